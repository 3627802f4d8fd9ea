--TEST--
Waiting: retries x wait time bound the wait; giving up fails session_start, or reads read-only with lock_failure_readonly; a long wait in many pieces is not cut short by the PHP call's time budget (the server ends each piece up to a tick late)
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$sid = 'lockwait' . bin2hex(random_bytes(8));
rcs_cmd('SET', rcs_prefix() . $sid, 'v|s:8:"original";');
// The holder keeps the lock until the three tries below are over (a time
// would not do: a loaded machine may take longer to run them).
$go = rcs_go_file();
$holder = rcs_spawn(rcs_holder_code($sid, $go, 'holder'), rcs_locking());
rcs_wait_until(fn() => rcs_cmd('EXISTS', rcs_lock_key($sid)) === 1);

// 10 retries x 100 ms: gives up after about 1 s.
$t = microtime(true);
echo rcs_php("session_id('$sid'); var_dump(session_start());",
    rcs_locking(['redis.session.lock_retries' => '10', 'redis.session.lock_wait_time' => '100000']));
$waited = microtime(true) - $t;
var_dump($waited > 0.9 && $waited < 2.5);

// retries 0 means 100, wait 0 means 20000 us: about 2 s.
$t = microtime(true);
echo rcs_php("session_id('$sid'); var_dump(session_start());",
    rcs_locking(['redis.session.lock_retries' => '0', 'redis.session.lock_wait_time' => '0']));
$waited = microtime(true) - $t;
var_dump($waited > 1.9 && $waited < 3.5);

// Read-only: the data is there, a write is refused, the holder's lock stays.
echo rcs_php("session_id('$sid'); var_dump(session_start()); echo \$_SESSION['v'], PHP_EOL; \$_SESSION['v'] = 'intruder'; var_dump(session_write_close());",
    rcs_locking(['redis.session.lock_retries' => '2', 'redis.session.lock_wait_time' => '10000', 'redis.session.lock_failure_readonly' => '1']));
var_dump(rcs_cmd('EXISTS', rcs_lock_key($sid)));

touch($go);
echo rcs_wait($holder);
var_dump(rcs_cmd('GET', rcs_prefix() . $sid));

// A 3 s hold against a wait of up to 300 x 20 ms in 100 ms pieces, with a
// budget (timeout + read_timeout) of 0.5 s: the waiter gets the lock.
$go = rcs_go_file();
$holder = rcs_spawn(rcs_holder_code($sid, $go, 'holder'), rcs_locking());
rcs_wait_until(fn() => rcs_cmd('EXISTS', rcs_lock_key($sid)) === 1);
$waiter = rcs_spawn("\$t = microtime(true); session_id('$sid'); var_dump(session_start()); echo \$_SESSION['v'], ' after ', microtime(true) - \$t >= 2.5 ? 'the hold' : 'less', PHP_EOL;",
    rcs_locking(['redis.session.lock_retries' => '300',
        'session.save_path' => rcs_save_path('prefix=' . urlencode(rcs_prefix()) . '&timeout=0.2&read_timeout=0.3')]));
rcs_wait_until(fn() => rcs_cmd('ZCARD', rcs_lock_key($sid) . '_FIFO') === 1);
sleep(3);
touch($go);
echo rcs_wait($holder), rcs_wait($waiter);
?>
--EXPECTF--
Warning: session_start(): Failed to acquire session lock in %s on line %d

Warning: session_start(): Failed to read session data: rediscluster (path: %s) in %s on line %d
bool(false)
bool(true)

Warning: session_start(): Failed to acquire session lock in %s on line %d

Warning: session_start(): Failed to read session data: rediscluster (path: %s) in %s on line %d
bool(false)
bool(true)

Warning: session_start(): Failed to acquire session lock, session will be read only in %s on line %d
bool(true)
original

Warning: session_write_close(): Unable to write session: session lock not held in %s on line %d

Warning: session_write_close(): Failed to write session data (rediscluster). Please verify that the current setting of session.save_path is correct (%s) in %s on line %d
bool(true)
int(1)
bool(true)
bool(true)
string(15) "v|s:6:"holder";"
bool(true)
bool(true)
bool(true)
holder after the hold
