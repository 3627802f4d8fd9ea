<?php
// The fleet benchmark's app (bench/fleet.sh): one session cycle per request,
// as an ordinary app writes it (it does not check the write), answering the
// session's counter. /metrics answers this extension's pool counters.
if (($_SERVER['REQUEST_URI'] ?? '/') === '/metrics') {
    header('Content-Type: text/plain');
    echo function_exists('rediscluster_session_metrics') ? rediscluster_session_metrics() : '';
    exit;
}
if (!session_start()) {
    http_response_code(503);
    exit;
}
$n = ($_SESSION['n'] ?? 0) + 1;
$_SESSION['n'] = $n;
session_write_close();
header('Content-Length: ' . strlen((string)$n));
echo $n;
