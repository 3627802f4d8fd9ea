<?php
// A TCP proxy in front of one node, as a load balancer or a sidecar is: it
// forwards bytes both ways (TLS passes through it untouched) until the file
// BROKEN_FLAG exists; from then on it behaves as such a proxy does once its
// node is down: the connections it holds are dropped, and every new one is
// accepted and closed at once.
//   php tcp-proxy.php TARGET_PORT BROKEN_FLAG   (prints its port, then serves
//   until its standard input closes: it never outlives the test)
[, $target, $broken_flag] = $argv;
$server = stream_socket_server('tcp://127.0.0.1:0', $errno, $error) or exit("proxy: $error\n");
$port = (int)substr(strrchr(stream_socket_get_name($server, false), ':'), 1);
echo $port, "\n";
fflush(STDOUT);

/** @var array<int, resource> each socket's other end, by the socket's id */
$peer = [];
$sockets = [];
$drop = function ($socket) use (&$peer, &$sockets) {
    foreach ([$socket, $peer[(int)$socket]] as $end) {
        unset($peer[(int)$end], $sockets[(int)$end]);
        fclose($end);
    }
};
$broken = false;
while (true) {
    if (!$broken && file_exists($broken_flag)) {
        $broken = true;
        foreach ($sockets as $socket) {
            if (isset($sockets[(int)$socket])) $drop($socket);
        }
    }
    $read = [STDIN, $server, ...array_values($sockets)];
    $write = $except = null;
    // A short wait: the flag is seen within 20 ms.
    if (stream_select($read, $write, $except, 0, 20000) === false) exit("proxy: select failed\n");
    foreach ($read as $socket) {
        if ($socket === STDIN) exit;
        if ($socket === $server) {
            $client = @stream_socket_accept($server, 0);
            if ($client === false) continue;
            $node = $broken ? false : @stream_socket_client("tcp://127.0.0.1:$target", $errno, $error, 2);
            if ($node === false) {
                fclose($client);
                continue;
            }
            foreach ([[$client, $node], [$node, $client]] as [$end, $other]) {
                stream_set_blocking($end, false);
                $peer[(int)$end] = $other;
                $sockets[(int)$end] = $end;
            }
            continue;
        }
        if (!isset($sockets[(int)$socket])) continue;   // dropped with its other end in this round
        $bytes = fread($socket, 65536);
        if ($bytes === false || ($bytes === '' && feof($socket))) {
            $drop($socket);
            continue;
        }
        // A blocking write of what came: the tests send little.
        $other = $peer[(int)$socket];
        stream_set_blocking($other, true);
        fwrite($other, $bytes);
        stream_set_blocking($other, false);
    }
}
