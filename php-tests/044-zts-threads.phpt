--TEST--
Thread-safe PHP: 4 threads of one process (the embed SAPI, as FrankenPHP and Apache's worker MPM run PHP) increment one locked session 50 times each: no update lost, no warning, no leak; then with rediscluster_session.lock_lease_ms=300, 5 times each holding the lock 0.25 s (past its first renewals): one watchdog renews for every thread, and it stops with the process
--SKIPIF--
<?php
if (!PHP_ZTS) die('skip needs a thread-safe (ZTS) PHP');
if (!is_file(dirname(PHP_BINARY, 2) . '/lib/libphp.so')) die('skip needs the embed SAPI (libphp.so)');
?>
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
const THREADS = 4;
$prefix = dirname(PHP_BINARY, 2);
$dir = sys_get_temp_dir() . '/rcs-zts-' . getmypid();
@mkdir($dir);
$includes = trim(shell_exec(escapeshellarg("$prefix/bin/php-config") . ' --includes'));
exec(sprintf('cc -o %s %s %s -L%s -lphp -lpthread -Wl,-rpath,%s 2>&1', escapeshellarg("$dir/threads"),
    escapeshellarg(__DIR__ . '/zts/threads.c'), $includes, escapeshellarg("$prefix/lib"), escapeshellarg("$prefix/lib")), $out, $status);
if ($status !== 0) die("cc failed:\n" . implode("\n", $out));

foreach (['no lease' => [50, 0, ['rediscluster_session.lock_lease_ms' => '0']], 'a lease of 300 ms' => [5, 250000, ['rediscluster_session.lock_lease_ms' => '300']]]
         as $case => [$rounds, $hold_us, $extra]) {
    echo "== $case\n";
    // The embedded PHP's php.ini: this extension, locking, and this test's save_path.
    $ini = ['extension' => rcs_ext()] + rcs_session_ini(rcs_locking(['redis.session.lock_retries' => '-1'] + $extra));
    file_put_contents("$dir/php.ini", implode("\n", array_map(fn($k, $v) => "$k=\"$v\"", array_keys($ini), $ini)) . "\n");
    $sid = 'zts' . bin2hex(random_bytes(6));
    $code = "set_error_handler(function (\$t, \$m) { echo \"WARNING: \$m\\n\"; return true; });"
        . " for (\$i = 0; \$i < $rounds; \$i++) { session_id('$sid');"
        . " if (!session_start()) { echo \"not started\\n\"; continue; }"
        . " \$_SESSION['n'] = (\$_SESSION['n'] ?? 0) + 1; usleep($hold_us); session_write_close(); }"
        . " \$s = rediscluster_session_stats(); if (\$s['lease_renewals'] > 0) echo \"renewals seen\\n\";"
        . " echo \"thread done\\n\";";
    $output = shell_exec('PHPRC=' . escapeshellarg("$dir/php.ini") . ' ' . escapeshellarg("$dir/threads") . ' ' . THREADS
        . ' ' . escapeshellarg($code) . ' 2>&1; echo "exit $?"');
    $lines = array_count_values(array_filter(explode("\n", trim($output))));
    ksort($lines);
    print_r($lines);
    preg_match('/n\|i:(\d+);/', (string)rcs_cmd('GET', rcs_prefix() . $sid), $m);
    echo "count: ", $m[1] ?? 'none', " of ", THREADS * $rounds, "\n";
    echo "locks left: ", count(rcs_keys(rcs_prefix() . '*_LOCK*')), "\n";
}
exec('rm -rf ' . escapeshellarg($dir));
?>
--EXPECT--
== no lease
Array
(
    [exit 0] => 1
    [thread done] => 4
)
count: 200 of 200
locks left: 0
== a lease of 300 ms
Array
(
    [exit 0] => 1
    [renewals seen] => 4
    [thread done] => 4
)
count: 20 of 20
locks left: 0
