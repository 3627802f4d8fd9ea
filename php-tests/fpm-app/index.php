<?php
// The app behind nginx and php-fpm in 037: counts visits in its session and
// reports which worker served it and how many connection sets that worker
// has opened. ?warn=1 raises a warning, to prove the FPM log catches them.
if (isset($_GET['warn'])) {
    trigger_error('deliberate warning from the FPM test', E_USER_WARNING);
    exit;
}
if (!session_start()) {
    http_response_code(503);
    exit;
}
$_SESSION['visits'] = ($_SESSION['visits'] ?? 0) + 1;
usleep(10000);
session_write_close();
header('Content-Type: application/json');
echo json_encode(['worker' => getmypid(), 'connects' => rediscluster_session_stats()['connects']]);
