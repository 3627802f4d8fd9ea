--TEST--
An error handler that turns our warning into a fatal error (PHP longjmps past the hook) leaks nothing: a php-fpm worker reading a 20 MB session that way ten times grows by less than one session
--SKIPIF--
<?php
if (getenv('RCS_NO_FPM')) die('skip ' . getenv('RCS_NO_FPM'));
if (!is_readable('/proc/self/status')) die('skip needs /proc');
foreach (['php-fpm' . PHP_MAJOR_VERSION . '.' . PHP_MINOR_VERSION, 'nginx'] as $bin) {
    if (!trim((string)shell_exec("command -v $bin || ls /usr/sbin/$bin 2>/dev/null"))) die("skip needs $bin");
}
?>
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
require __DIR__ . '/inc/http.php';
$fpm = __DIR__ . '/../scripts/fpm.sh';
$dir = sys_get_temp_dir() . '/rcs-fpm-fatal-' . getmypid();
$port = rcs_seeds()[0][1] + 1091;
$sid = 'fatal' . bin2hex(random_bytes(6));
// A 20 MB session, and its lock held by someone else: the read finds the lock
// busy and warns "session will be read only" with the 20 MB read.
echo rcs_php("session_id('$sid'); session_start(); \$_SESSION['blob'] = random_bytes(20 << 20); session_write_close(); echo \"stored\\n\";");
rcs_cmd('SET', rcs_lock_key($sid), 'held-by-someone-else', 'PX', '120000');

$save_path = rcs_save_path('prefix=' . urlencode(rcs_prefix()) . '&timeout=2&read_timeout=5');
exec(implode(' ', array_map('escapeshellarg', [$fpm, 'start', $dir, $port, __DIR__ . '/fpm-app', 1,
    "session.save_path=\"$save_path\"", 'redis.session.locking_enabled=1', 'redis.session.lock_failure_readonly=1',
    'redis.session.lock_wait_time=10000', 'redis.session.lock_retries=2', 'memory_limit=512M',
    'session.use_strict_mode=0'])) . ' 2>&1', $out, $status);
if ($status !== 0) die("fpm.sh start failed:\n" . implode("\n", $out));
try {
    $fatal = fn(int $n) => http_many($port, array_fill(0, $n, '/?fatal=1'), array_fill(0, $n, "PHPSESSID=$sid"), 1);
    $rss = fn() => json_decode(http_many($port, ['/?rss=1'], [''], 1)[0][1], true)['rss_kib'];
    $fatal(2);   // the worker's allocators warm up
    $before = $rss();
    $statuses = array_count_values(array_column($fatal(10), 0));
    // A leak of the session on each longjmp would be 200 MB; the allocator
    // may keep one freed block of a few MB resident, which is no leak.
    $grown = $rss() - $before;
    echo "responses: ", json_encode($statuses), "\n";
    echo "worker RSS after 10 fatal requests: ", $grown < 20480 ? "less than one session" : "$grown KiB more", "\n";
    // The FPM master copies a worker's output into its log on its own
    // schedule, after the response may have gone out: wait for the 12th line
    // (bounded, for a loaded machine), then count what came.
    $logged = fn() => substr_count((string)file_get_contents("$dir/fpm.log"), 'fatal after: session_start(): Failed to acquire session lock, session will be read only');
    rcs_wait_until(fn() => $logged() >= 12, 10);
    echo "fatal errors logged: ", $logged(), "\n";
} finally {
    exec(implode(' ', array_map('escapeshellarg', [$fpm, 'stop', $dir])));
    rcs_cmd('DEL', rcs_lock_key($sid), rcs_prefix() . $sid);
}
?>
--EXPECT--
stored
responses: {"500":10}
worker RSS after 10 fatal requests: less than one session
fatal errors logged: 12
