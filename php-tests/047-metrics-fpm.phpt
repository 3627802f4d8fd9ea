--TEST--
rediscluster_session_metrics() under php-fpm (4 static workers): every additive counter is the sum of the workers' rediscluster_session_stats(), the processes gauge counts the workers that used the handler, and the text parses as Prometheus exposition format
--SKIPIF--
<?php
if (getenv('RCS_NO_FPM')) die('skip ' . getenv('RCS_NO_FPM'));
?>
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
require __DIR__ . '/inc/served.php';
const WORKERS = 4;
$dir = sys_get_temp_dir() . '/rcs-fpm-metrics-' . getmypid();
$port = rcs_seeds()[0][1] + 1092;
served_start('fpm', $dir, $port, WORKERS);
try {
    // Load: 8 sessions, 120 requests, 8 at a time (so locks are waited for).
    $sids = array_map(fn($i) => "metrics$i" . bin2hex(random_bytes(8)), range(0, 7));
    $statuses = array_count_values(array_column(served_load($port, $sids, 15, 8), 0));
    echo "responses: ", json_encode($statuses), "\n";
    served_pool_metrics($port, WORKERS, 120);
    echo "FPM log: ", served_log("$dir/fpm.log"), "\n";
} finally {
    served_stop('fpm', $dir);
}
?>
--EXPECTF--
responses: {"200":120}
workers reporting: 4
locks_acquired_total: sum of the workers
lock_waits_total: sum of the workers
acquire_failures_total{kind="timeout"}: sum of the workers
acquire_failures_total{kind="rejected"}: sum of the workers
writes_refused_lock_lost_total: sum of the workers
releases_total{cmd="lua"}: sum of the workers
release_fallbacks_total: sum of the workers
connects_total: sum of the workers
errors_total{kind="io"}: sum of the workers
lock_wait_seconds_sum: sum of the workers
lock_wait_seconds_count: sum of the workers
locks taken: at least one per request
processes: the workers that used the handler
prometheus_client: %d families, %d samples parsed
FPM log: clean
