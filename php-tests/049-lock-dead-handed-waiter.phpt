--TEST--
Locking: a waiter that died after the lock was handed to it delays the next one by about a second, not the lock's TTL (issue 18, defect 2)
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
// phpredis's default 2 ms lock_wait_time: waits block in 100 ms pieces, for up to 30 s.
$ini = rcs_locking(['redis.session.lock_expire' => '20', 'redis.session.lock_retries' => '15000']);
$sid = 'deadhanded' . bin2hex(random_bytes(8));
// H holds until told (a time would race a loaded machine).
$go = rcs_go_file();
$h = rcs_spawn(rcs_holder_code($sid, $go), $ini);
rcs_wait_until(fn() => rcs_cmd('EXISTS', rcs_lock_key($sid)) === 1);
$w1 = rcs_spawn("session_id('$sid'); session_start(); sleep(30);", $ini);
rcs_wait_until(fn() => rcs_cmd('ZCARD', rcs_lock_key($sid) . '_FIFO') === 1);
// W1 dies in the queue just before H releases: H hands the lock to a dead waiter.
proc_terminate($w1[0], 9);
rcs_wait($w1);
touch($go);
echo rcs_wait($h);
// The lock is W1's now, for 20 s. W2 comes 3 s later, when the waiters' own
// entries have long expired.
sleep(3);
$started = microtime(true);
echo rcs_php("session_id('$sid'); var_dump(session_start()); session_write_close();", $ini);
$waited = microtime(true) - $started;
echo "W2 had the lock within 2 s: ", var_export($waited < 2.0, true), "\n";
?>
--EXPECT--
bool(true)
bool(true)
bool(true)
W2 had the lock within 2 s: true
