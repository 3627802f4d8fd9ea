<?php
// A fake TLS cluster node whose bytes come one every 0.2 s, for
// 058-tls-trickle.phpt. PHP cannot send part of a TLS record, so the node is
// a relay in front of its own TLS end (in this process): the client's bytes
// go through at once, the TLS end's come back trickled, from the start
// (MODE handshake) or from the reply to the first command after
// CLUSTER SLOTS, which points at the node itself (MODE reply).
//   php tls-trickle-node.php MODE TLS_DIR   (prints its port, then serves)
[, $mode, $tls] = $argv;

function listener(): array {
    $server = stream_socket_server('tcp://127.0.0.1:0', $errno, $error) or exit("trickle node: $error\n");
    return [$server, (int)substr(strrchr(stream_socket_get_name($server, false), ':'), 1)];
}

[$public, $port] = listener();
[$inner, $inner_port] = listener();
echo $port, "\n";
fflush(STDOUT);

$slots = "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n\$9\r\n127.0.0.1\r\n:$port\r\n";
// A session of 200 bytes: 45 s to send at this pace.
$reply = "\$200\r\n" . str_repeat('x', 200) . "\r\n";

while ($client = @stream_socket_accept($public, -1)) {
    $relay = stream_socket_client("tcp://127.0.0.1:$inner_port");
    $end = stream_socket_accept($inner);
    stream_context_set_option($end, ['ssl' => ['local_cert' => "$tls/server.crt", 'local_pk' => "$tls/server.key"]]);
    foreach ([$client, $relay, $end] as $stream) {
        stream_set_blocking($stream, false);
    }
    $handshaken = false;
    $trickle = $mode === 'handshake';
    $commands = $pending = '';
    $next_byte = 0.0;
    // A client that waits for a whole record (the old code) is let go after 10 s.
    $until = microtime(true) + 10;
    while (microtime(true) < $until) {
        $read = [$client, $relay, $end];
        $none = null;
        @stream_select($read, $none, $none, 0, 50000);
        $in = (string)fread($client, 65536);
        if ($in === '' && feof($client)) break;
        fwrite($relay, $in);
        if (!$handshaken) {
            $done = @stream_socket_enable_crypto($end, true, STREAM_CRYPTO_METHOD_TLS_SERVER);
            if ($done === false) break;
            $handshaken = $done === true;
        }
        if ($handshaken) {
            $commands .= (string)fread($end, 65536);
            if (str_contains($commands, "SLOTS\r\n")) {
                fwrite($end, $slots);
                $commands = '';
            } elseif ($commands !== '' && str_ends_with($commands, "\r\n")) {
                // Whatever it asks: it is answered, slowly.
                $trickle = true;
                fwrite($end, $reply);
                $commands = '';
            }
        }
        $pending .= (string)fread($relay, 65536);
        if ($pending !== '' && !$trickle) {
            $pending = substr($pending, (int)fwrite($client, $pending));
        } elseif ($pending !== '' && microtime(true) >= $next_byte) {
            $pending = substr($pending, (int)fwrite($client, $pending[0]));
            $next_byte = microtime(true) + 0.2;
        }
    }
    foreach ([$client, $relay, $end] as $stream) {
        fclose($stream);
    }
}
