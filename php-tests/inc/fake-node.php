<?php
// A fake cluster node for the hostile-reply tests: it owns every slot, and
// answers any other command with the reply MODE names, then streams what
// that reply says is still to come, slowly, until the client hangs up.
//   php fake-node.php MODE [TLS_DIR]   (prints its port, then serves)
[, $mode] = $argv;
$tls = $argv[2] ?? '';
$context = stream_context_create($tls === '' ? [] : ['ssl' => [
    'local_cert' => "$tls/server.crt", 'local_pk' => "$tls/server.key"]]);
$server = stream_socket_server(($tls === '' ? 'tcp' : 'tls') . '://127.0.0.1:0', $errno, $error,
    STREAM_SERVER_BIND | STREAM_SERVER_LISTEN, $context) or exit("fake node: $error\n");
$port = (int)substr(strrchr(stream_socket_get_name($server, false), ':'), 1);
echo $port, "\n";
fflush(STDOUT);

// [the reply's first bytes, what streams after them in pieces]
[$head, $piece] = match ($mode) {
    'bulk-200g' => ["\$200000000000\r\nabc", null],
    'bulk-2^62' => ["\$4611686018427387904\r\nabc", null],
    'bulk-max' => ["\$9223372036854775807\r\nabc", null],
    'bulk-512m+1' => ["\$536870913\r\n", str_repeat('x', 65536)],
    'bulk-400m' => ["\$400000000\r\n", str_repeat('x', 65536)],
    'array-100m' => ["*100000000\r\n", str_repeat(":1\r\n", 16384)],
};
$slots = "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n\$9\r\n127.0.0.1\r\n:$port\r\n";

/** One command's arguments, or null when the client hung up. */
function command($client): ?array {
    $line = fgets($client);
    if ($line === false || $line[0] !== '*') return null;
    $args = [];
    for ($i = (int)substr($line, 1); $i > 0; $i--) {
        $length = (int)substr(fgets($client), 1);
        $args[] = $length > 0 ? stream_get_contents($client, $length) : '';
        fgets($client);
    }
    return $args;
}

while ($client = @stream_socket_accept($server, -1)) {
    while (($args = command($client)) !== null) {
        if (strtoupper($args[0]) === 'CLUSTER') {
            fwrite($client, $slots);
            continue;
        }
        fwrite($client, $head);
        // About 6 MB a second: memory must follow what arrived, not what was announced.
        while ($piece !== null && @fwrite($client, $piece)) {
            usleep(10000);
        }
        break;
    }
    // Held open until the client gives up on it.
    $read = [$client];
    $none = null;
    @stream_select($read, $none, $none, 30);
    fclose($client);
}
