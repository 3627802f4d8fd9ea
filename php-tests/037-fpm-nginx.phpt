--TEST--
Behind nginx and php-fpm: concurrent requests on shared sessions lose no update, each worker keeps one connection set, and the FPM log stays free of warnings
--SKIPIF--
<?php if (getenv('RCS_NO_FPM')) die('skip ' . getenv('RCS_NO_FPM')); ?>
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
require __DIR__ . '/inc/served.php';
const WORKERS = 4;
$dir = sys_get_temp_dir() . '/rcs-fpm-' . getmypid();
$port = rcs_seeds()[0][1] + 1090;

// A fresh process connects only where its session goes: the seed it learns
// the slot map from, and the primary of its session's slot.
$before = served_connections_received();
rcs_php("session_id('fpmprobe'); session_start(); session_write_close();");
$one_session = served_connections_received() - $before;   // Resp keeps its own connections open
echo "connections of a fresh process with one session: ", $one_session >= 1 && $one_session <= 2 ? "1 or 2" : $one_session, "\n";

served_start('fpm', $dir, $port, WORKERS);
try {
    // 4 sessions, 60 requests each, 16 at a time.
    served_concurrency($port, WORKERS, 4, 60, 16);
    echo "FPM log: ", served_log("$dir/fpm.log"), "\n";
    echo "nginx log: ", served_log("$dir/nginx-error.log"), "\n";
    echo "after a deliberate warning: ", served_warning_lines($port, "$dir/fpm.log"), " line\n";
} finally {
    served_stop('fpm', $dir);
}
?>
--EXPECT--
connections of a fresh process with one session: 1 or 2
responses: {"200":240}
workers that served: several
connection sets per worker, at most: 1
connections the cluster accepted: at most one set per worker
lost updates: 0
locks left: 0
FPM log: clean
nginx log: clean
after a deliberate warning: 1 line
