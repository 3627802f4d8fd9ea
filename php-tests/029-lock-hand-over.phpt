--TEST--
Hand-over: a release wakes the longest waiter at once (first come, first served) instead of letting it sleep out lock_wait_time; dead waiters and dead holders give way; nothing is left behind
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
// Each wait may last 10 s (blocked in pieces of 1 s): only a hand-over is prompt.
$ini = rcs_locking(['redis.session.lock_wait_time' => '2000000', 'redis.session.lock_retries' => '5']);
$queued = fn(string $sid, int $n) => rcs_wait_until(fn() => rcs_cmd('ZCARD', rcs_lock_key($sid) . '_FIFO') === $n);
// A holder lets go when the parent creates its file (rcs_go_file()), once the
// waiters are where the case wants them: a time would race a loaded machine.
$holder = fn(string $sid, string $go) => rcs_spawn("session_id('$sid'); session_start(); " . rcs_hold_code($go)
    . " \$_SESSION['order'][] = 'holder'; echo 'released ', microtime(true), \"\\n\"; session_write_close();", $ini);
$waiter = fn(string $sid, string $name) => rcs_spawn("session_id('$sid'); var_dump(session_start());"
    . " echo 'acquired ', microtime(true), \"\\n\"; \$_SESSION['order'][] = '$name'; session_write_close();", $ini);
$time = fn(string $what, string $output) => preg_match("/$what ([0-9.]+)/", $output, $m) ? (float)$m[1] : INF;

// Three waiters queue behind a holder and get the lock in arrival order.
$sid = 'handover' . bin2hex(random_bytes(8));
$h = $holder($sid, $go = rcs_go_file());
rcs_wait_until(fn() => rcs_cmd('EXISTS', rcs_lock_key($sid)) === 1);
$waiters = [];
foreach (['A', 'B', 'C'] as $i => $name) {
    $waiters[] = $waiter($sid, $name);
    var_dump($queued($sid, $i + 1));
}
touch($go);
$released = $time('released', rcs_wait($h));
$outputs = array_map('rcs_wait', $waiters);
echo implode(',', unserialize(substr(rcs_cmd('GET', rcs_prefix() . $sid), strlen('order|')))), "\n";
$gap = $time('acquired', $outputs[0]) - $released;
echo "first waiter had the lock within 250 ms of the release: ", var_export($gap < 0.25, true), "\n";
var_dump(rcs_lock_keys_left($sid));

// A waiter killed in the queue is handed the lock and never claims it: the
// next waiter gets it once the 1 s hand-over expires, not after the lock TTL.
$sid = 'handoverdead' . bin2hex(random_bytes(8));
$h = $holder($sid, $go = rcs_go_file());
rcs_wait_until(fn() => rcs_cmd('EXISTS', rcs_lock_key($sid)) === 1);
$doomed = $waiter($sid, 'doomed');
var_dump($queued($sid, 1));
$next = $waiter($sid, 'next');
var_dump($queued($sid, 2));
proc_terminate($doomed[0], 9);
rcs_wait($doomed);
touch($go);
$released = $time('released', rcs_wait($h));
$gap = $time('acquired', rcs_wait($next)) - $released;
echo "after a dead waiter, the next had the lock within 3 s: ", var_export($gap < 3.0, true), "\n";

// A holder killed with its lock: waiters get it when the lock TTL (1 s) runs out.
$sid = 'handoverholder' . bin2hex(random_bytes(8));
$h = rcs_spawn("session_id('$sid'); session_start(); sleep(30);", $ini + ['redis.session.lock_expire' => '1']);
rcs_wait_until(fn() => rcs_cmd('EXISTS', rcs_lock_key($sid)) === 1);
$t = microtime(true);
$next = $waiter($sid, 'next');
proc_terminate($h[0], 9);
rcs_wait($h);
$gap = $time('acquired', rcs_wait($next)) - $t;
echo "after a dead holder, the waiter had the lock within 3 s: ", var_export($gap < 3.0, true), "\n";
var_dump(rcs_lock_keys_left($sid));

// A waiter with early_refresh gets its TTL refresh from the hand-over (it reads nothing itself).
$sid = 'handoverrefresh' . bin2hex(random_bytes(8));
$go = rcs_go_file();
$h = rcs_spawn("session_id('$sid'); session_start(); " . rcs_hold_code($go) . " \$_SESSION['v'] = 1; session_write_close();",
    $ini + ['session.gc_maxlifetime' => '100']);
rcs_wait_until(fn() => rcs_cmd('EXISTS', rcs_lock_key($sid)) === 1);
$next = rcs_spawn("session_id('$sid'); var_dump(session_start()); session_write_close();",
    $ini + ['session.gc_maxlifetime' => '1000', 'redis.session.early_refresh' => '1', 'session.lazy_write' => '1']);
var_dump($queued($sid, 1));
touch($go);
rcs_wait($h);
echo rcs_wait($next);
$ttl = rcs_cmd('TTL', rcs_prefix() . $sid);
echo "TTL refreshed to the waiter's lifetime: ", var_export($ttl > 900, true), "\n";
var_dump(rcs_lock_keys_left($sid));
?>
--EXPECT--
bool(true)
bool(true)
bool(true)
holder,A,B,C
first waiter had the lock within 250 ms of the release: true
array(0) {
}
bool(true)
bool(true)
after a dead waiter, the next had the lock within 3 s: true
after a dead holder, the waiter had the lock within 3 s: true
array(0) {
}
bool(true)
bool(true)
TTL refreshed to the waiter's lifetime: true
array(0) {
}
