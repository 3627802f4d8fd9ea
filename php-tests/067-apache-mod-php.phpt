--TEST--
Behind Apache prefork and Debian's mod_php (4 children): concurrent requests on shared sessions lose no update, each child keeps one connection set, Apache's error log stays free of warnings, and rediscluster_session_metrics() is the sum of the children's rediscluster_session_stats()
--SKIPIF--
<?php
if (getenv('RCS_NO_APACHE')) die('skip ' . getenv('RCS_NO_APACHE'));
$version = PHP_MAJOR_VERSION . '.' . PHP_MINOR_VERSION;
if (!is_executable(getenv('APACHE_BIN') ?: '/usr/sbin/apache2')) die('skip Apache is not installed (Debian: apache2)');
$mod_php = getenv('MOD_PHP') ?: "/usr/lib/apache2/modules/libphp$version.so";
if (!is_file($mod_php)) die("skip Debian's mod_php for PHP $version is not installed ($mod_php, from libapache2-mod-php$version)");
?>
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
require __DIR__ . '/inc/served.php';
const WORKERS = 4;
$dir = sys_get_temp_dir() . '/rcs-apache-' . getmypid();
$port = rcs_seeds()[0][1] + 1093;
served_start('apache', $dir, $port, WORKERS);
try {
    // 4 sessions, 60 requests each, 16 at a time: children wait for locks.
    served_concurrency($port, WORKERS, 4, 60, 16);
    // The children forked from the parent that started the extension: one
    // set of pool counters, whatever child serves the scrape.
    served_pool_metrics($port, WORKERS, 240);
    // More requests in flight than children, by design: Apache logs (at
    // error level) when all were busy as it checked, as a loaded machine's
    // slow requests make likely.
    echo "Apache's error log: ", served_log("$dir/error.log", 'AH00161'), "\n";
    echo "after a deliberate warning: ", served_warning_lines($port, "$dir/error.log"), " line\n";
} finally {
    served_stop('apache', $dir);
}
?>
--EXPECTF--
responses: {"200":240}
workers that served: several
connection sets per worker, at most: 1
connections the cluster accepted: at most one set per worker
lost updates: 0
locks left: 0
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
Apache's error log: clean
after a deliberate warning: 1 line
