<?php
// The app behind nginx and php-fpm in 037, 043 and 047, and behind Apache
// prefork and mod_php in 067 (php-tests/inc/served.php): counts visits in its
// session and reports which worker served it and how many connection sets
// that worker has opened. ?warn=1 raises a warning, to prove the server's log
// catches them; ?rss=1 reports the worker's resident size in KiB; ?fatal=1
// turns any warning into a fatal error, as an application's error handler may;
// ?stats=1 gives the worker's rediscluster_session_stats() (holding the worker
// 50 ms, so that parallel calls reach every worker); ?metrics=1 the pool's;
// ?lock_wait=1 the worker's rediscluster_session_lock_wait() for this
// request, and whether opcache is on; ?hold=FILE keeps the session (and its lock) until the test
// creates FILE (60 s at most), and writes the worker's pid to FILE.pid once it holds it.
if (isset($_GET['warn'])) {
    trigger_error('deliberate warning from the served app', E_USER_WARNING);
    exit;
}
if (isset($_GET['rss'])) {
    preg_match('/^VmRSS:\s+(\d+)/m', file_get_contents('/proc/self/status'), $m);
    echo json_encode(['worker' => getmypid(), 'rss_kib' => (int)$m[1]]);
    exit;
}
if (isset($_GET['stats'])) {
    usleep(50000);
    echo json_encode(['worker' => getmypid(), 'stats' => rediscluster_session_stats()]);
    exit;
}
if (isset($_GET['metrics'])) {
    header('Content-Type: text/plain; version=0.0.4');
    echo rediscluster_session_metrics();
    exit;
}
if (isset($_GET['lock_wait'])) {
    $opcache = function_exists('opcache_get_status') && (opcache_get_status(false)['opcache_enabled'] ?? false);
    echo json_encode(rediscluster_session_lock_wait() + ['opcache' => $opcache]);
    exit;
}
if (isset($_GET['fatal'])) {
    set_error_handler(function (int $type, string $message) {
        trigger_error("fatal after: $message", E_USER_ERROR);
    }, E_WARNING);
}
if (!session_start()) {
    http_response_code(503);
    exit;
}
$_SESSION['visits'] = ($_SESSION['visits'] ?? 0) + 1;
usleep(10000);
// Which worker holds: a test or bench kills it.
if (isset($_GET['hold'])) file_put_contents($_GET['hold'] . '.pid', getmypid());
for ($until = microtime(true) + 60; isset($_GET['hold']) && !file_exists($_GET['hold']) && microtime(true) < $until;) {
    usleep(5000);
}
session_write_close();
header('Content-Type: application/json');
echo json_encode(['worker' => getmypid(), 'connects' => rediscluster_session_stats()['connects']]);
