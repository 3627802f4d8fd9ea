--TEST--
Lock TTL: lock_expire, else max_execution_time, else a bounded 30 s default (never a lock without TTL)
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$cases = [
    'lock_expire=3' => ['redis.session.lock_expire' => '3', 'max_execution_time' => '300'],
    'max_execution_time=2' => ['redis.session.lock_expire' => '0', 'max_execution_time' => '2'],
    'both 0 (CLI)' => ['redis.session.lock_expire' => '0', 'max_execution_time' => '0'],
];
foreach ($cases as $label => $ini) {
    $sid = 'lockttl' . bin2hex(random_bytes(8));
    $child = rcs_spawn(rcs_holder_code($sid, 0.5), rcs_locking_unleased($ini));
    rcs_wait_until(fn() => rcs_cmd('EXISTS', rcs_lock_key($sid)) === 1);
    $pttl = rcs_cmd('PTTL', rcs_lock_key($sid));
    echo "$label: ", (int)ceil($pttl / 1000), " s\n";
    rcs_wait($child);
}

// A holder that overruns its lock TTL loses the lock: the next process gets it
// after about the TTL, not after the holder finishes.
$sid = 'lockttl' . bin2hex(random_bytes(8));
$holder = rcs_spawn(rcs_holder_code($sid, 4), rcs_locking_unleased(['max_execution_time' => '0', 'redis.session.lock_expire' => '1']));
rcs_wait_until(fn() => rcs_cmd('EXISTS', rcs_lock_key($sid)) === 1);
$t = microtime(true);
echo rcs_php("session_id('$sid'); var_dump(session_start());", rcs_locking_unleased(['redis.session.lock_retries' => '-1', 'redis.session.lock_wait_time' => '50000']));
$waited = microtime(true) - $t;
var_dump($waited > 0.3 && $waited < 2.5);
echo rcs_wait($holder);
?>
--EXPECTF--
lock_expire=3: 3 s
max_execution_time=2: 2 s
both 0 (CLI): 30 s
bool(true)
bool(true)
bool(true)

Warning: session_write_close(): Session lock expired in %s on line %d

Warning: session_write_close(): Failed to write session data (rediscluster). Please verify that the current setting of session.save_path is correct (%s) in %s on line %d
bool(true)
