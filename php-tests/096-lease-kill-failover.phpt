--TEST--
A lease judged by the time the server served (issue 48): a live holder keeps its lock, and its write lands, when its primary is killed and its replica elected after a 5-s node timeout (read_timeout 8 s covers it), with a waiter queued at the kill and a late request arriving after the promotion; the late one gets the lock only by the holder's hand-over, after the holder's write, and nothing is lost. With the lease as the lock's TTL (before), the promoted replica's lock had expired: the late request took it at once and the holder's write was refused
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$cluster_node = fn(string $action, string $addr) => exec(implode(' ', array_map('escapeshellarg',
    [__DIR__ . '/../scripts/cluster.sh', $action, rcs_env('RCS_FLAVOR'), (string)rcs_seeds()[0][1], substr(strrchr($addr, ':'), 1)])) . ' 2>&1');
$nodes = array_map(fn($seed) => "$seed[0]:$seed[1]", rcs_seeds());
$node_timeout = Resp::send($nodes[0], ['CONFIG', 'GET', 'cluster-node-timeout'])[1];
foreach ($nodes as $node) Resp::send($node, ['CONFIG', 'SET', 'cluster-node-timeout', '5000']);

$sid = 'leasekill' . bin2hex(random_bytes(6));
$primary = rcs_primary_of(rcs_prefix() . $sid);
$replica = null;
foreach ($nodes as $node) {
    $role = Resp::send($node, ['ROLE']);
    if ($role[0] === 'slave' && "{$role[1]}:{$role[2]}" === $primary) $replica = $node;
}
$ini = rcs_locking([
    'session.save_path' => rcs_save_path('timeout=2&read_timeout=8&prefix=' . urlencode(rcs_prefix())),
    'redis.session.lock_retries' => '1500',
    'redis.session.lock_wait_time' => '20000',
]);
// Each child prints whether its session started and the warnings it got.
$child = fn(string $who, string $hold = '') => "set_error_handler(function (\$type, \$message) { \$GLOBALS['warnings'][] = \$message; return true; });"
    . " session_id('$sid'); \$started = session_start(); while (ob_get_level()) ob_end_flush(); echo 'started', PHP_EOL; $hold"
    . " if (\$started) { \$_SESSION['$who'] = 1; session_write_close(); }"
    . " echo json_encode(['who' => '$who', 'started' => \$started, 'warnings' => \$GLOBALS['warnings'] ?? []]), PHP_EOL;";
$go = rcs_go_file();
$holder = rcs_spawn($child('holder', rcs_hold_code($go)), $ini);
fgets($holder[1]);
$waiter = rcs_spawn($child('waiter'), $ini);
rcs_wait_until(fn() => rcs_cmd('ZCARD', rcs_lock_key($sid) . '_FIFO') === 1);
// The replica has all the primary had (the lock, the queue), then the primary dies.
rcs_wait_until(function () use ($primary): bool {
    $info = Resp::send($primary, ['INFO', 'replication']);
    preg_match('/^master_repl_offset:(\d+)/m', $info, $offset);
    preg_match_all('/^slave\d+:.*\boffset=(\d+)/m', $info, $replicas);
    return $replicas[1] !== [] && array_unique($replicas[1]) === [$offset[1]];
}, 10);
usleep(700000);
$cluster_node('kill-node', $primary);
Resp::forget($primary);
echo 'promoted: ', json_encode(rcs_wait_until(fn() => Resp::send($replica, ['ROLE'])[0] === 'master', 30)), "\n";
// A request that comes after the promotion queues behind the live holder,
// and watches its heartbeat on the new primary for more than a lease and
// the grace before the holder writes.
$late = rcs_spawn($child('late'), $ini);
usleep(5000000);
touch($go);
$outcomes = [];
foreach ([$holder, $waiter, $late] as $process) {
    $lines = explode("\n", trim(rcs_wait($process)));
    $outcome = json_decode(end($lines), true);
    $outcomes[$outcome['who']] = $outcome;
}
$stored = (string)Resp::send($replica, ['GET', rcs_prefix() . $sid]);
echo 'stored: the holder\'s ', json_encode(str_contains($stored, 'holder|i:1;')), ', the late one\'s ', json_encode(str_contains($stored, 'late|i:1;')), "\n";
foreach (['holder', 'late'] as $who) {
    echo "$who: started ", json_encode($outcomes[$who]['started']), ', warnings ', json_encode($outcomes[$who]['warnings']), "\n";
}
// The waiter, queued at the kill, may or may not ride out the failover
// (its budget against the election); whatever it acknowledged is there.
$waiter_ok = !$outcomes['waiter']['started'] || ($outcomes['waiter']['warnings'] === [] && str_contains($stored, 'waiter|i:1;'));
echo 'waiter: nothing acknowledged lost: ', json_encode($waiter_ok), "\n";

// The killed node back as the replica, then the primary again, for the tests after this one.
$cluster_node('start-node', $primary);
rcs_wait_until(fn() => rcs_cluster_settled(), 30);
Resp::send($primary, ['CLUSTER', 'FAILOVER']);
rcs_wait_until(fn() => Resp::send($primary, ['ROLE'])[0] === 'master' && rcs_cluster_settled(), 30);
foreach ($nodes as $node) Resp::send($node, ['CONFIG', 'SET', 'cluster-node-timeout', $node_timeout]);
?>
--EXPECT--
promoted: true
stored: the holder's true, the late one's true
holder: started true, warnings []
late: started true, warnings []
waiter: nothing acknowledged lost: true
