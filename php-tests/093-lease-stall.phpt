--TEST--
A lease judged by the time the server served (issue 48): a live holder keeps its lock, and its write lands, while its primary is stopped (SIGSTOP) for 1.2, 2.5 and 5 s (below the node timeout) with a waiter queued behind it; the waiter gets the lock by the holder's hand-over, breaks nothing, and the session ends with both changes. With the lease as the lock's TTL (before), the waiter took the lock at the thaw and the holder's write was refused
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
// read_timeout above the longest stall: the calls wait it out. The waiter
// waits up to 20 s (1000 × 20 ms).
$ini = rcs_locking([
    'session.save_path' => rcs_save_path('timeout=2&read_timeout=10&prefix=' . urlencode(rcs_prefix())),
    'redis.session.lock_retries' => '1000',
    'redis.session.lock_wait_time' => '20000',
]);
$report = 'function report(string $who, bool $written): void {'
    . ' echo "$who: write ", json_encode($written), ", broke ", rediscluster_session_stats()["locks_broken"], PHP_EOL; }';
foreach ([1.2, 2.5, 5.0] as $stall) {
    $sid = 'leasestall' . bin2hex(random_bytes(6));
    $primary = rcs_primary_of(rcs_prefix() . $sid);
    preg_match('/process_id:(\d+)/', Resp::send($primary, ['INFO', 'server']), $m);
    $pid = (int)$m[1];
    $go = rcs_go_file();
    $holder = rcs_spawn("$report session_id('$sid'); session_start(); while (ob_get_level()) ob_end_flush(); echo 'locked', PHP_EOL; "
        . rcs_hold_code($go) . " \$_SESSION['holder'] = 1; report('holder', session_write_close());", $ini);
    fgets($holder[1]);
    $waiter = rcs_spawn("$report session_id('$sid'); session_start(); \$_SESSION['waiter'] = 1; report('waiter', session_write_close());", $ini);
    // The waiter queued, and watches the holder's heartbeat.
    rcs_wait_until(fn() => rcs_cmd('ZCARD', rcs_lock_key($sid) . '_FIFO') === 1);
    usleep(700000);
    exec("kill -STOP $pid");
    usleep((int)($stall * 1e6));
    exec("kill -CONT $pid");
    // Served again: more than a lease of it before the holder lets go.
    usleep(1500000);
    touch($go);
    echo "== the primary stopped for $stall s\n", rcs_wait($holder), rcs_wait($waiter);
    $stored = rcs_cmd('GET', rcs_prefix() . $sid);
    echo "stored: ", $stored, "\n";
}
?>
--EXPECT--
== the primary stopped for 1.2 s
holder: write true, broke 0
waiter: write true, broke 0
stored: holder|i:1;waiter|i:1;
== the primary stopped for 2.5 s
holder: write true, broke 0
waiter: write true, broke 0
stored: holder|i:1;waiter|i:1;
== the primary stopped for 5 s
holder: write true, broke 0
waiter: write true, broke 0
stored: holder|i:1;waiter|i:1;
