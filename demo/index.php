<?php
// Counts visits in $_SESSION. Each request holds the session a little while,
// so concurrent requests overlap; ?lock=0 turns session locking off to show
// the lost updates that locking prevents. ?stats=1 tells how many connection
// sets the worker has opened (one, kept across requests). /metrics serves the
// pool's counters to Prometheus.
if (isset($_GET['stats'])) {
    exit((string)rediscluster_session_stats()['connects']);
}
if (parse_url($_SERVER['REQUEST_URI'] ?? '', PHP_URL_PATH) === '/metrics') {
    header('Content-Type: text/plain; version=0.0.4');
    exit(rediscluster_session_metrics());
}
if (($_GET['lock'] ?? '1') === '0') {
    ini_set('redis.session.locking_enabled', '0');
}
if (!session_start()) {
    http_response_code(503);
    exit("session_start() failed\n");
}
$visits = ($_SESSION['visits'] ?? 0) + 1;
usleep(20000);
$_SESSION['visits'] = $visits;
header('Content-Type: application/json');
echo json_encode(['visits' => $visits, 'worker' => getmypid(), 'session' => session_id()]), "\n";
