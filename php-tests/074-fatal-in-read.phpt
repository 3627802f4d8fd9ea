--TEST--
A fatal error in the application's error handler, raised by a message of session_start()'s read (the lock taken, the data read, $_SESSION not yet filled), keeps the stored session: PHP's shutdown write of the empty $_SESSION is refused with a warning and the lock is released. With locking off too, and for the lock-wait notice; an exit() or an exception in the handler keeps the data as it was; a save from the error handler before $_SESSION is filled, and a session_regenerate_id(true) at shutdown after the fatal error, are refused and keep it too
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
rcs_use_session();
$key = fn(string $sid) => rcs_prefix() . $sid;
// The error handler dies with a fatal error (E_USER_ERROR from inside it; PHP 8.4+
// also says that passing E_USER_ERROR is deprecated, hence %A before the fatal error;
// PHP 8.5 would add the fatal error's backtrace).
$fatal = 'set_error_handler(function ($t, $m) { echo "handler: $m\n"; trigger_error("dying", E_USER_ERROR); });';
$quiet = ['display_errors' => '0', 'log_errors' => '0'];
$shown = ['display_errors' => '1', 'log_errors' => '0', 'fatal_error_backtraces' => '0', 'error_reporting' => (string)(E_ALL & ~E_DEPRECATED)];

$run = function (string $label, array $ini, string $handler, ?callable $before = null) use ($key) {
    $sid = 'fatalread' . bin2hex(random_bytes(6));
    echo "== $label\n";
    echo rcs_php("session_id('$sid'); session_start(); \$_SESSION['user'] = 'alice'; session_write_close(); echo \"stored\\n\";", ['display_errors' => '0'] + $ini);
    $release = $before ? $before($sid) : null;
    $out = rcs_php("$handler session_id('$sid'); var_dump(session_start()); var_dump(\$_SESSION);", $ini);
    // What each line says, without the paths and line numbers.
    echo preg_replace(['/ in \S+ on line \d+/', '/\((path: )?seed\[\][^)]*\)/'], ['', '(...)'], trim($out)), "\n";
    if ($release) $release();
    echo 'stored after: ', rcs_cmd('GET', $key($sid)), ', lock left: ', json_encode(rcs_lock_keys_left($sid)), "\n";
};

// session.gc_maxlifetime=0 makes the read raise a notice after taking the lock.
$run('locked, a notice of the read', rcs_locking($shown + ['session.gc_maxlifetime' => '0']), $fatal);
$run('unlocked, a notice of the read', $shown + ['session.gc_maxlifetime' => '0'], $fatal);
// The lock-wait notice: another request holds the lock for a moment.
$run('the lock-wait notice', rcs_locking($shown + ['rediscluster_session.lock_wait_notice_ms' => '1']), $fatal,
    function (string $sid) {
        $go = rcs_go_file();
        $holder = rcs_spawn("session_id('$sid'); session_start(); " . rcs_hold_code($go) . ' usleep(300000); session_write_close();', rcs_locking(['display_errors' => '0']));
        rcs_wait_until(fn() => rcs_cmd('EXISTS', rcs_lock_key($sid)) === 1);
        touch($go);
        return fn() => rcs_wait($holder);
    });
// The error handler saves the session (PHP has not filled $_SESSION yet).
$run('the error handler closes the session', rcs_locking($shown + ['session.gc_maxlifetime' => '0']),
    'set_error_handler(function ($t, $m) { echo "handler: $m\n"; var_dump(session_write_close()); return true; });');
// After the bailout, a shutdown function regenerates the id, deleting the old one.
$run('session_regenerate_id(true) at shutdown', rcs_locking($shown + ['session.gc_maxlifetime' => '0']),
    'register_shutdown_function(function () { restore_error_handler(); var_dump(session_regenerate_id(true)); }); ' . $fatal);
// Neither leaves the hook by a bailout: PHP fills $_SESSION and saves it as read.
$run('exit() in the handler', rcs_locking($quiet + ['session.gc_maxlifetime' => '0']), 'set_error_handler(function () { exit(3); });');
$run('an exception from the handler', rcs_locking($quiet + ['session.gc_maxlifetime' => '0']),
    'set_error_handler(function ($t, $m) { throw new ErrorException($m); });');
?>
--EXPECTF--
== locked, a notice of the read
stored
handler: session_start(): session.gc_maxlifetime is <= 0, defaulting to 1440 seconds
%A
Fatal error: dying

Warning: PHP Request Shutdown: Unable to write session: the session's data has not reached $_SESSION (session_start() was raising a message, and its error handler saved or died with a fatal error); the stored session is kept as it was

Warning: PHP Request Shutdown: Failed to write session data (rediscluster). Please verify that the current setting of session.save_path is correct (...)
stored after: user|s:5:"alice";, lock left: []
== unlocked, a notice of the read
stored
handler: session_start(): session.gc_maxlifetime is <= 0, defaulting to 1440 seconds
%A
Fatal error: dying

Warning: PHP Request Shutdown: Unable to write session: the session's data has not reached $_SESSION (session_start() was raising a message, and its error handler saved or died with a fatal error); the stored session is kept as it was

Warning: PHP Request Shutdown: Failed to write session data (rediscluster). Please verify that the current setting of session.save_path is correct (...)
stored after: user|s:5:"alice";, lock left: []
== the lock-wait notice
stored
handler: session_start(): rediscluster: waited %d ms for the lock of session sha256:%x (rediscluster_session.lock_wait_notice_ms=1)
%A
Fatal error: dying

Warning: PHP Request Shutdown: Unable to write session: the session's data has not reached $_SESSION (session_start() was raising a message, and its error handler saved or died with a fatal error); the stored session is kept as it was

Warning: PHP Request Shutdown: Failed to write session data (rediscluster). Please verify that the current setting of session.save_path is correct (...)
stored after: user|s:5:"alice";, lock left: []
== the error handler closes the session
stored
handler: session_start(): session.gc_maxlifetime is <= 0, defaulting to 1440 seconds

Warning: session_write_close(): Unable to write session: the session's data has not reached $_SESSION (session_start() was raising a message, and its error handler saved or died with a fatal error); the stored session is kept as it was

Warning: session_write_close(): Failed to write session data (rediscluster). Please verify that the current setting of session.save_path is correct (...)
bool(true)
bool(false)
array(0) {
}
stored after: user|s:5:"alice";, lock left: []
== session_regenerate_id(true) at shutdown
stored
handler: session_start(): session.gc_maxlifetime is <= 0, defaulting to 1440 seconds
%A
Fatal error: dying

Warning: session_regenerate_id(): Unable to destroy session: the session's data has not reached $_SESSION (session_start() was raising a message, and its error handler saved or died with a fatal error); the stored session is kept as it was

Warning: session_regenerate_id(): Session object destruction failed. ID: rediscluster (...)
bool(false)
stored after: user|s:5:"alice";, lock left: []
== exit() in the handler
stored

stored after: user|s:5:"alice";, lock left: []
== an exception from the handler
stored

stored after: user|s:5:"alice";, lock left: []
