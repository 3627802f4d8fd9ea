<?php
// A minimal concurrent HTTP/1.0 client, for the tests and the benchmark that
// drive nginx + php-fpm.

/** GETs every path with up to $concurrency requests in flight; returns [status, body] by index. */
function http_many(int $port, array $paths, array $cookies, int $concurrency): array {
    $results = [];
    $pending = array_keys($paths);
    $open = [];
    while ($pending || $open) {
        while ($pending && count($open) < $concurrency) {
            $i = array_shift($pending);
            $socket = stream_socket_client("tcp://127.0.0.1:$port", $errno, $error, 5);
            fwrite($socket, "GET {$paths[$i]} HTTP/1.0\r\nHost: localhost\r\nCookie: {$cookies[$i]}\r\n\r\n");
            $open[$i] = [$socket, ''];
        }
        $read = array_column($open, 0);
        $write = $except = null;
        if (stream_select($read, $write, $except, 10) === 0) throw new RuntimeException('HTTP timeout');
        foreach ($open as $i => [$socket, $buffer]) {
            if (!in_array($socket, $read, true)) continue;
            $chunk = fread($socket, 65536);
            $open[$i][1] .= $chunk;
            if ($chunk === '' && feof($socket)) {
                fclose($socket);
                [$head, $body] = explode("\r\n\r\n", $open[$i][1], 2) + [1 => ''];
                $results[$i] = [(int)explode(' ', $head)[1], $body];
                unset($open[$i]);
            }
        }
    }
    ksort($results);
    return $results;
}
