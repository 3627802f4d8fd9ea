--TEST--
rediscluster_session.lock_lease_ms: the watchdog renews the lock while its request sleeps (the write lands, renewals counted, lock_info shows the lease), stops at lock_expire (the lock's backstop is lock_expire and a lease), the next request breaks the lock of a holder killed with SIGKILL within 2 s (and warns), a holder of a new session frozen past its lease with nobody waiting keeps its lock and writes, a holder without a lease keeps its write with a leased waiter queued, a holder that forks in a loop while renewals run keeps its lock with no child hanging, and a take that a stalled primary applies after its client gave up leaves a lock whose heartbeat never moves, which the next request breaks within 2 s
--SKIPIF--
<?php if (!function_exists('pcntl_fork')) die('skip pcntl not available'); ?>
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$run = bin2hex(random_bytes(6));
$locking = fn(array $extra = []) => rcs_locking($extra + ['rediscluster_session.lock_lease_ms' => '600', 'redis.session.lock_expire' => '30']);

echo "== a holder that sleeps 3 s\n";
$sid = 'lease' . $run;
echo rcs_php(<<<PHP
session_id('$sid');
session_start();
sleep(3);
\$info = rediscluster_session_lock_info('$sid');
echo 'lease_ms ', \$info['lease_ms'], ', expires within the lease: ', json_encode(\$info['lease_expires_ms'] <= 600), ', renewed for over 25 s: ', json_encode(\$info['lease_renewed_for_ms'] > 25000), "\\n";
\$_SESSION['slept'] = 1;
echo 'write_close ', json_encode(session_write_close()), "\\n";
\$stats = rediscluster_session_stats();
echo 'renewals at least 7: ', json_encode(\$stats['lease_renewals'] >= 7), ', failed ', \$stats['lease_renewal_failures'], ', lost ', \$stats['locks_lost_to_expiry'], "\\n";
PHP, $locking());
echo "stored: ", rcs_cmd('GET', rcs_prefix() . $sid), "\n";

echo "== lock_expire 2 s caps the renewals\n";
$sid = 'leasecap' . $run;
echo rcs_php(<<<PHP
set_error_handler(function (\$t, \$m) { echo 'warning: ', preg_replace('/ in .*/', '', \$m), "\\n"; return true; });
session_id('$sid');
session_start();
sleep(3);
\$_SESSION['late'] = 1;
echo 'write_close ', json_encode(session_write_close()), "\\n";
PHP, $locking(['redis.session.lock_expire' => '2']));

echo "== a holder killed with SIGKILL\n";
$sid = 'leasekill' . $run;
$holder = rcs_spawn("session_id('$sid'); session_start(); echo 'locked', PHP_EOL; sleep(30);", $locking());
// Killed once its lease has been renewed (the lock then lives one lease).
rcs_wait_until(fn() => rcs_cmd('EXISTS', rcs_lock_key($sid)) === 1);
usleep(1200000);
proc_terminate($holder[0], SIGKILL);
$killed = microtime(true);
rcs_wait($holder);
echo rcs_php("session_id('$sid'); session_start(); \$_SESSION['next'] = 1; echo 'next: write_close ', json_encode(session_write_close()), PHP_EOL;", $locking());
$after = microtime(true) - $killed;
echo "the next request had the lock within 2 s of the kill: ", json_encode($after < 2.0), $after < 2.0 ? '' : " ($after s)", "\n";

echo "== a holder of a new session, frozen past its lease with nobody waiting, writes\n";
// Nobody watches its heartbeat, so nobody breaks its lock: the lock key
// lives lock_expire and a lease whatever the heartbeat does.
$sid = 'leasefrozen' . $run;
$holder = rcs_spawn("session_id('$sid'); session_start(); while (ob_get_level()) ob_end_flush(); echo 'locked', PHP_EOL; fgets(STDIN); \$_SESSION['frozen'] = 1; echo 'write_close ', json_encode(session_write_close()), PHP_EOL;", $locking());
echo fgets($holder[1]);
echo "its renewal made the log: ", json_encode(rcs_wait_until(fn() => rcs_cmd('EXISTS', rcs_lock_key($sid) . '_DONE') === 1)), "\n";
$pid = proc_get_status($holder[0])['pid'];
exec("kill -STOP $pid");
usleep(1500000);
echo "still locked: ", json_encode(rcs_cmd('EXISTS', rcs_lock_key($sid)) === 1), "\n";
exec("kill -CONT $pid");
fwrite($holder[3], "go\n");
echo rcs_wait($holder);
echo "stored: ", rcs_cmd('GET', rcs_prefix() . $sid), "\n";

echo "== a holder without a lease, handed a session nobody saved, and a waiter with one\n";
// The holder (lock_lease_ms=0, as an older release's worker in a rolling
// deploy) is handed a session without a log of savers (the first holder has
// no lease either, and saves nothing); the waiter queueing behind it must not
// make one, which the holder's write would take for a save since its read.
$sid = 'leasemixed' . $run;
$flushed = "session_id('$sid'); session_start(); while (ob_get_level()) ob_end_flush();";
$first = rcs_spawn("$flushed echo 'first locked', PHP_EOL; fgets(STDIN); session_abort();", rcs_locking_unleased());
echo fgets($first[1]);
$holder = rcs_spawn("$flushed echo 'holder locked', PHP_EOL; fgets(STDIN); \$_SESSION['holder'] = 1; echo 'holder: write_close ', json_encode(session_write_close()), PHP_EOL;", rcs_locking_unleased());
usleep(300000);
fwrite($first[3], "go\n");
rcs_wait($first);
echo fgets($holder[1]);
$waiter = rcs_spawn("$flushed \$_SESSION['waiter'] = 1; echo 'waiter: write_close ', json_encode(session_write_close()), PHP_EOL;", $locking());
usleep(500000);
fwrite($holder[3], "go\n");
echo rcs_wait($holder), rcs_wait($waiter);
echo "stored: ", rcs_cmd('GET', rcs_prefix() . $sid), "\n";

echo "== a holder that forks in a loop while renewals run\n";
$sid = 'leasefork' . $run;
echo rcs_php(<<<PHP
session_id('$sid');
session_start();
\$until = microtime(true) + 3;
\$forks = 0;
\$hung = 0;
while (microtime(true) < \$until) {
    \$pid = pcntl_fork();
    if (\$pid === 0) {
        // The lock is the parent's: not seen, not renewed, not released here.
        // Its end runs the request's end and the module's shutdown; its
        // session is let go of without a write (the lock is not its own).
        session_abort();
        if (rediscluster_session_lock_info('$sid')['lease_expires_ms'] !== null) echo "the child sees its parent's lease\\n";
        exit(0);
    }
    \$forks++;
    \$waited = microtime(true);
    while (pcntl_waitpid(\$pid, \$status, WNOHANG) === 0) {
        if (microtime(true) - \$waited > 5) { \$hung++; exec("kill -9 \$pid"); }
        usleep(1000);
    }
}
echo 'forks over 20: ', json_encode(\$forks > 20), ', hung: ', \$hung, "\\n";
\$_SESSION['forked'] = 1;
echo 'write_close ', json_encode(session_write_close()), "\\n";
\$stats = rediscluster_session_stats();
echo 'lost ', \$stats['locks_lost_to_expiry'], "\\n";
PHP, $locking());
echo "stored: ", rcs_cmd('GET', rcs_prefix() . $sid), "\n";

echo "== a primary that stalls while a take is in flight\n";
$sid = 'leasestall' . $run;
$primary = rcs_primary_of(rcs_lock_key($sid));
preg_match('/process_id:(\d+)/', Resp::send($primary, ['INFO', 'server']), $m);
$stalled = (int)$m[1];
exec("kill -STOP $stalled");
try {
    // It gives up; the primary applies the take once it runs again.
    echo rcs_php("set_error_handler(fn() => true); session_id('$sid'); echo 'started ', json_encode(session_start()), PHP_EOL;",
        $locking(['session.save_path' => rcs_save_path('timeout=1&read_timeout=1&prefix=' . urlencode(rcs_prefix()))]));
} finally {
    exec("kill -CONT $stalled");
}
$thawed = microtime(true);
usleep(100000);
echo "the lock it left has a heartbeat: ", json_encode(rcs_keys(rcs_lock_key($sid) . '_BEAT_*') !== []), "\n";
echo rcs_php("session_id('$sid'); session_start(); \$_SESSION['after'] = 1; echo 'next: write_close ', json_encode(session_write_close()), PHP_EOL;", $locking());
$after = microtime(true) - $thawed;
echo "the next request had the lock within 2 s: ", json_encode($after < 2.0), $after < 2.0 ? '' : " ($after s)", "\n";
?>
--EXPECTF--
== a holder that sleeps 3 s
lease_ms 600, expires within the lease: true, renewed for over 25 s: true
write_close true
renewals at least 7: true, failed 0, lost 0
stored: slept|i:1;
== lock_expire 2 s caps the renewals
write_close warning: session_write_close(): Session lock expired
warning: session_write_close(): Failed to write session data (rediscluster). Please verify that the current setting of session.save_path is correct (%s)
true
== a holder killed with SIGKILL

Warning: session_start(): rediscluster: took over the lock of session sha256:%x: its holder's heartbeat stood still for 600 ms while the server served (rediscluster_session.lock_lease_ms); a save of that holder stores nothing in %s on line %d
next: write_close true
the next request had the lock within 2 s of the kill: true
== a holder of a new session, frozen past its lease with nobody waiting, writes
locked
its renewal made the log: true
still locked: true
write_close true
stored: frozen|i:1;
== a holder without a lease, handed a session nobody saved, and a waiter with one
first locked
holder locked
holder: write_close true
waiter: write_close true
stored: holder|i:1;waiter|i:1;
== a holder that forks in a loop while renewals run
forks over 20: true, hung: 0
write_close true
lost 0
stored: forked|i:1;
== a primary that stalls while a take is in flight
started false
the lock it left has a heartbeat: true

Warning: session_start(): rediscluster: took over the lock of session sha256:%x: its holder's heartbeat stood still for 600 ms while the server served (rediscluster_session.lock_lease_ms); a save of that holder stores nothing in %s on line %d
next: write_close true
the next request had the lock within 2 s: true
