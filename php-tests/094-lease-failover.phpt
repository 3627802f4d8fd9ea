--TEST--
A lease judged by the time the server served (issue 48): a live holder keeps its lock, and its write lands, across a failover of its primary (hung 1.5 s, longer than the lease, then CLUSTER FAILOVER TAKEOVER on its replica) with a waiter queued behind it and holding on for 4 s after it (more than a lease and the grace); the waiter gets the lock by the holder's hand-over, breaks nothing, and the session ends with both changes. With the lease as the lock's TTL (before), the promoted replica's lock had expired: the waiter took it and the holder's write was refused
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
// The primary hangs (its replica has all it had), and 1.5 s later, longer
// than the lease, its replica takes over (TAKEOVER: no election, which a
// shard refuses for a while after another failover); then the old one runs
// again and steps down.
$synced = function () use ($primary): bool {
    $info = Resp::send($primary, ['INFO', 'replication']);
    preg_match('/^master_repl_offset:(\d+)/m', $info, $offset);
    preg_match_all('/^slave\d+:.*\boffset=(\d+)/m', $info, $replicas);
    return $replicas[1] !== [] && array_unique($replicas[1]) === [$offset[1]];
};
rcs_wait_until($synced, 10);
preg_match('/process_id:(\d+)/', Resp::send($primary, ['INFO', 'server']), $m);
exec("kill -STOP {$m[1]}");
usleep(1500000);
Resp::send($replica, ['CLUSTER', 'FAILOVER', 'TAKEOVER']);
rcs_wait_until(fn() => Resp::send($replica, ['ROLE'])[0] === 'master', 10);
exec("kill -CONT {$m[1]}");
rcs_wait_until(fn() => Resp::send($primary, ['ROLE'])[0] === 'slave', 10);
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
