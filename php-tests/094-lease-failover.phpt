--TEST--
A lease judged by the time the server served (issue 48): a live holder keeps its lock, and its write lands, across a CLUSTER FAILOVER of its primary with a waiter queued behind it and holding on for 4 s after it (more than a lease and the grace); the waiter gets the lock by the holder's hand-over, breaks nothing, and the session ends with both changes
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$sid = 'leasefailover' . bin2hex(random_bytes(6));
$primary = rcs_primary_of(rcs_prefix() . $sid);
$replica = null;
foreach (rcs_seeds() as [$host, $port]) {
    $role = Resp::send("$host:$port", ['ROLE']);
    if ($role[0] === 'slave' && "{$role[1]}:{$role[2]}" === $primary) $replica = "$host:$port";
}
$ini = rcs_locking([
    'session.save_path' => rcs_save_path('timeout=2&read_timeout=5&prefix=' . urlencode(rcs_prefix())),
    'redis.session.lock_retries' => '1000',
    'redis.session.lock_wait_time' => '20000',
]);
$report = 'function report(string $who, bool $written): void {'
    . ' echo "$who: write ", json_encode($written), ", broke ", rediscluster_session_stats()["locks_broken"], PHP_EOL; }';
$go = rcs_go_file();
$holder = rcs_spawn("$report session_id('$sid'); session_start(); while (ob_get_level()) ob_end_flush(); echo 'locked', PHP_EOL; "
    . rcs_hold_code($go) . " \$_SESSION['holder'] = 1; report('holder', session_write_close());", $ini);
fgets($holder[1]);
$waiter = rcs_spawn("$report session_id('$sid'); session_start(); \$_SESSION['waiter'] = 1; report('waiter', session_write_close());", $ini);
rcs_wait_until(fn() => rcs_cmd('ZCARD', rcs_lock_key($sid) . '_FIFO') === 1);
usleep(700000);
// A manual failover: the replica catches up first, so the lock and the
// heartbeat are there. Asked harder if the shard refuses (a recent failover).
Resp::send($replica, ['CLUSTER', 'FAILOVER']);
if (!rcs_wait_until(fn() => Resp::send($primary, ['ROLE'])[0] === 'slave', 10)) {
    Resp::send($replica, ['CLUSTER', 'FAILOVER', 'TAKEOVER']);
    rcs_wait_until(fn() => Resp::send($primary, ['ROLE'])[0] === 'slave', 10);
}
echo 'failed over: ', json_encode(Resp::send($primary, ['ROLE'])[0] === 'slave'), "\n";
usleep(4000000);
touch($go);
echo rcs_wait($holder), rcs_wait($waiter);
echo "stored: ", rcs_cmd('GET', rcs_prefix() . $sid), "\n";
// The old primary back for the tests after this one.
Resp::send($primary, ['CLUSTER', 'FAILOVER', 'TAKEOVER']);
rcs_wait_until(fn() => Resp::send($primary, ['ROLE'])[0] === 'master' && rcs_cluster_settled(), 20);
?>
--EXPECT--
failed over: true
holder: write true, broke 0
waiter: write true, broke 0
stored: holder|i:1;waiter|i:1;
