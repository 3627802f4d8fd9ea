--TEST--
rediscluster_session.write_replicas covers session_destroy() as it covers a write: with the session's only replica frozen, the destroy still deletes on the primary but fails with the warning a write gives, so a logout a failover could undo is not acknowledged; locked and unlocked
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
rcs_wait_until('rcs_cluster_settled', 30);
$sid = 'replicas' . bin2hex(random_bytes(6));
$slot = rcs_cmd('CLUSTER', 'KEYSLOT', rcs_prefix() . $sid);
foreach (rcs_cmd('CLUSTER', 'SLOTS') as $range) {
    if ($slot >= $range[0] && $slot <= $range[1]) $replica = $range[3][1];
}
file_put_contents(sys_get_temp_dir() . '/rcs-062-' . rcs_seeds()[0][1], (string)$replica);
$node = fn(string $action) => exec(implode(' ', array_map('escapeshellarg',
    [__DIR__ . '/../scripts/cluster.sh', $action, rcs_env('RCS_FLAVOR'), (string)rcs_seeds()[0][1], (string)$replica])));
$ini = ['rediscluster_session.write_replicas' => '1', 'rediscluster_session.write_replicas_timeout' => '100'];
$request = fn(string $code, string $locking) => rcs_php('set_error_handler(function ($t, $m) {
        echo "  warning: ", preg_replace("/^[a-z_]+\\(\\): /", "", $m), "\n"; return true; });
    session_id("' . $sid . '"); session_start(); ' . $code, $ini + ['redis.session.locking_enabled' => $locking]);
foreach (['1' => 'locked', '0' => 'unlocked'] as $locking => $mode) {
    echo "== $mode\n";
    echo $request('$_SESSION["n"] = 1; echo "  write: ", json_encode(session_write_close()), "\n";', $locking);
    $node('pause-node');
    try {
        echo $request('$destroyed = session_destroy(); echo "  destroy: ", json_encode($destroyed), "\n";', $locking);
    } finally {
        $node('resume-node');
    }
    echo "  on the primary: ", rcs_cmd('EXISTS', rcs_prefix() . $sid), " keys\n";
    echo "  lock keys left: ", count(rcs_lock_keys_left($sid)), "\n";
}
?>
--CLEAN--
<?php
require __DIR__ . '/inc/setup.php';
$file = sys_get_temp_dir() . '/rcs-062-' . rcs_seeds()[0][1];
if (is_file($file)) {
    exec(implode(' ', array_map('escapeshellarg', [__DIR__ . '/../scripts/cluster.sh', 'resume-node',
        rcs_env('RCS_FLAVOR'), (string)rcs_seeds()[0][1], file_get_contents($file)])));
    unlink($file);
}
?>
--EXPECTF--
== locked
  write: true
  warning: Session destroyed on the primary, but only 0 of 1 replicas had it within 100 ms (rediscluster_session.write_replicas)
  warning: Session object destruction failed
  destroy: false
  on the primary: 0 keys
  lock keys left: 0
== unlocked
  write: true
  warning: Session destroyed on the primary, but only 0 of 1 replicas had it within 100 ms (rediscluster_session.write_replicas)
  warning: Session object destruction failed
  destroy: false
  on the primary: 0 keys
  lock keys left: 0
