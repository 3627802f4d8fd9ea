--TEST--
rediscluster_session.max_waiters=1: one request queues for a busy session, the next does not queue and fails at once (or reads read-only with lock_failure_readonly), counted as waiters_rejected; the queued one gets the lock
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$sid = 'maxwaiters' . bin2hex(random_bytes(8));
rcs_cmd('SET', rcs_prefix() . $sid, 'v|s:8:"original";');
$cap = ['rediscluster_session.max_waiters' => '1', 'redis.session.lock_retries' => '-1'];
// The holder keeps the lock until the two requests below are done (a time
// would race a loaded machine).
$go = rcs_go_file();
$holder = rcs_spawn(rcs_holder_code($sid, $go, 'holder'), rcs_locking());
rcs_wait_until(fn() => rcs_cmd('EXISTS', rcs_lock_key($sid)) === 1);
$waiter = rcs_spawn(rcs_holder_code($sid, 0, 'waiter'), rcs_locking($cap));
echo "one waiter queued: ", var_export(rcs_wait_until(fn() => rcs_cmd('ZCARD', rcs_lock_key($sid) . '_FIFO') === 1), true), "\n";

$timed = "\$t = microtime(true); \$ok = session_start(); \$ms = (microtime(true) - \$t) * 1000;"
    . " var_dump(\$ok); echo \$ms < 100 ? 'at once' : \"after \$ms ms\", PHP_EOL;";
echo rcs_php("session_id('$sid'); $timed echo rediscluster_session_stats()['waiters_rejected'], ' rejected', PHP_EOL;",
    rcs_locking($cap));
echo rcs_php("session_id('$sid'); $timed echo \$_SESSION['v'], PHP_EOL;",
    rcs_locking($cap + ['redis.session.lock_failure_readonly' => '1']));

touch($go);
echo "holder:\n", rcs_wait($holder);
echo "waiter:\n", rcs_wait($waiter);
var_dump(rcs_cmd('GET', rcs_prefix() . $sid));
?>
--EXPECTF--
one waiter queued: true

Warning: session_start(): Session sha256:%x already has 1 waiters for its lock (rediscluster_session.max_waiters=1) in %s on line %d

Warning: session_start(): Failed to read session data: rediscluster (path: %s) in %s on line %d
bool(false)
at once
1 rejected

Warning: session_start(): Session sha256:%x already has 1 waiters for its lock (rediscluster_session.max_waiters=1), session will be read only in %s on line %d
bool(true)
at once
original
holder:
bool(true)
bool(true)
waiter:
bool(true)
bool(true)
string(15) "v|s:6:"waiter";"
