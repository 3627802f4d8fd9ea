<?php
// A minimal concurrent HTTP/1.0 client, for the tests and the benchmark that
// drive nginx + php-fpm.

/** Sends GET $path with $cookie; returns the socket its answer comes on. */
function http_send(int $port, string $path, string $cookie) {
    $socket = stream_socket_client("tcp://127.0.0.1:$port", $errno, $error, 5);
    fwrite($socket, "GET $path HTTP/1.0\r\nHost: localhost\r\nCookie: $cookie\r\n\r\n");
    return $socket;
}

/** [status, body] of a whole response. */
function http_parse(string $response): array {
    [$head, $body] = explode("\r\n\r\n", $response, 2) + [1 => ''];
    return [(int)explode(' ', $head)[1], $body];
}

/** Whether the answer to http_send() has begun to arrive. */
function http_answered($socket): bool {
    $read = [$socket];
    $write = $except = null;
    return stream_select($read, $write, $except, 0) > 0;
}

/** [status, body] of the answer to http_send() (waits up to 60 s for it). */
function http_answer($socket): array {
    stream_set_timeout($socket, 60);
    $response = stream_get_contents($socket);
    fclose($socket);
    return http_parse($response);
}

/** GETs every path with up to $concurrency requests in flight; returns [status, body] by index. */
function http_many(int $port, array $paths, array $cookies, int $concurrency): array {
    $results = [];
    $pending = array_keys($paths);
    $open = [];
    while ($pending || $open) {
        while ($pending && count($open) < $concurrency) {
            $i = array_shift($pending);
            $open[$i] = [http_send($port, $paths[$i], $cookies[$i]), ''];
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
                $results[$i] = http_parse($open[$i][1]);
                unset($open[$i]);
            }
        }
    }
    ksort($results);
    return $results;
}
