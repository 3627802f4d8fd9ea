--TEST--
rediscluster_session_lock_info(): a held lock with its TTL and its waiters, then a free one, with the data's TTL and no lifetime; never the secret or the data; null with a warning when the cluster cannot be asked
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
rcs_use_session();
$sid = 'lockinfo' . bin2hex(random_bytes(8));
var_dump(rediscluster_session_lock_info($sid));
// The holder keeps the lock until lock_info has looked (a time would race a loaded machine).
$go = rcs_go_file();
$holder = rcs_spawn(rcs_holder_code($sid, $go, 'holder'), rcs_locking_unleased(['redis.session.lock_expire' => '20']));
rcs_wait_until(fn() => rcs_cmd('EXISTS', rcs_lock_key($sid)) === 1);
$waiter = rcs_spawn(rcs_holder_code($sid, 0, 'waiter'), rcs_locking_unleased());
rcs_wait_until(fn() => rcs_cmd('ZCARD', rcs_lock_key($sid) . '_FIFO') === 1);
$info = rediscluster_session_lock_info($sid);
echo "held: ", json_encode(['locked' => $info['locked'], 'ttl over 15 s' => $info['ttl_ms'] > 15000, 'waiters' => $info['waiters']]), "\n";
echo "keys: ", implode(',', array_keys($info)), "\n";
echo "secret shown: ", var_export(in_array(rcs_cmd('GET', rcs_lock_key($sid)), $info, true), true), "\n";
touch($go);
rcs_wait($holder);
rcs_wait($waiter);
var_dump(rediscluster_session_lock_info($sid));

ini_set('session.save_path', 'seed[]=127.0.0.1:1&timeout=0.2&read_timeout=0.2');
var_dump(rediscluster_session_lock_info($sid));
?>
--EXPECTF--
array(8) {
  ["locked"]=>
  bool(false)
  ["ttl_ms"]=>
  int(0)
  ["waiters"]=>
  int(0)
  ["data_ttl_ms"]=>
  int(-2)
  ["lifetime"]=>
  NULL
  ["lease_ms"]=>
  int(0)
  ["lease_expires_ms"]=>
  NULL
  ["lease_renewed_for_ms"]=>
  NULL
}
held: {"locked":true,"ttl over 15 s":true,"waiters":1}
keys: locked,ttl_ms,waiters,data_ttl_ms,lifetime,lease_ms,lease_expires_ms,lease_renewed_for_ms
secret shown: false
array(8) {
  ["locked"]=>
  bool(false)
  ["ttl_ms"]=>
  int(0)
  ["waiters"]=>
  int(0)
  ["data_ttl_ms"]=>
  int(%d)
  ["lifetime"]=>
  NULL
  ["lease_ms"]=>
  int(0)
  ["lease_expires_ms"]=>
  NULL
  ["lease_renewed_for_ms"]=>
  NULL
}

Warning: rediscluster_session_lock_info(): Couldn't map cluster keyspace using any provided seed: %s in %s on line %d
NULL
