--TEST--
An error handler that suspends a Fiber while session_start()'s read raises its message (the lock taken, $_SESSION not yet filled): the code outside the fiber that saves the session meanwhile is refused and the stored session kept; resumed, the fiber's session reads and saves as usual; a fiber never resumed keeps the stored session and leaves no lock. No crash, no hang, locked and unlocked
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
rcs_use_session();
$ini = fn(bool $locked) => ($locked ? rcs_locking(...) : fn($x) => $x)(['session.gc_maxlifetime' => '0', 'display_errors' => '1', 'log_errors' => '0']);
// session.gc_maxlifetime=0 makes the read raise a notice; the handler suspends the fiber there.
$suspend = 'set_error_handler(function ($t, $m) { if (Fiber::getCurrent()) { echo "suspended: $m\n"; Fiber::suspend(); echo "resumed\n"; } return true; });';
$fiber = '$f = new Fiber(function () { var_dump(session_start()); echo "fiber read: ", json_encode($_SESSION), "\n"; $_SESSION["n"]++; var_dump(session_write_close()); }); $f->start();';
foreach ([true, false] as $locked) {
    foreach (['saved outside, then resumed' => 'var_dump(session_write_close()); $f->resume();',
              'resumed' => '$f->resume();',
              'never resumed' => ''] as $label => $then) {
        $sid = 'fiber' . bin2hex(random_bytes(6));
        echo '== ', $locked ? 'locked' : 'unlocked', ", $label\n";
        rcs_php("session_id('$sid'); session_start(); \$_SESSION['n'] = 5; session_write_close();", $ini($locked));
        $out = rcs_php("$suspend session_id('$sid'); $fiber echo 'outside: ', json_encode(\$_SESSION), \"\\n\"; $then echo \"end\\n\";", $ini($locked));
        echo preg_replace(['/ in \S+ on line \d+/', '/\((path: )?seed\[\][^)]*\)/'], ['', '(...)'], trim($out)), "\n";
        echo 'stored after: ', rcs_cmd('GET', rcs_prefix() . $sid), ', lock left: ', json_encode(rcs_lock_keys_left($sid)), "\n";
    }
}
?>
--EXPECTF--
== locked, saved outside, then resumed
suspended: session_start(): session.gc_maxlifetime is <= 0, defaulting to 1440 seconds
outside: []

Warning: session_write_close(): Unable to write session: the session's data has not reached $_SESSION (session_start() was raising a message, and its error handler saved or died with a fatal error); the stored session is kept as it was

Warning: session_write_close(): Failed to write session data (rediscluster). Please verify that the current setting of session.save_path is correct (...)
bool(true)
resumed
bool(false)
fiber read: []
%A
end
stored after: n|i:5;, lock left: []
== locked, resumed
suspended: session_start(): session.gc_maxlifetime is <= 0, defaulting to 1440 seconds
outside: []
resumed
bool(true)
fiber read: {"n":5}
suspended: session_write_close(): session.gc_maxlifetime is <= 0, defaulting to 1440 seconds
end
stored after: n|i:6;, lock left: []
== locked, never resumed
suspended: session_start(): session.gc_maxlifetime is <= 0, defaulting to 1440 seconds
outside: []
end
stored after: n|i:5;, lock left: []
== unlocked, saved outside, then resumed
suspended: session_start(): session.gc_maxlifetime is <= 0, defaulting to 1440 seconds
outside: []

Warning: session_write_close(): Unable to write session: the session's data has not reached $_SESSION (session_start() was raising a message, and its error handler saved or died with a fatal error); the stored session is kept as it was

Warning: session_write_close(): Failed to write session data (rediscluster). Please verify that the current setting of session.save_path is correct (...)
bool(true)
resumed
bool(false)
fiber read: []
%A
end
stored after: n|i:5;, lock left: []
== unlocked, resumed
suspended: session_start(): session.gc_maxlifetime is <= 0, defaulting to 1440 seconds
outside: []
resumed
bool(true)
fiber read: {"n":5}
suspended: session_write_close(): session.gc_maxlifetime is <= 0, defaulting to 1440 seconds
end
stored after: n|i:6;, lock left: []
== unlocked, never resumed
suspended: session_start(): session.gc_maxlifetime is <= 0, defaulting to 1440 seconds
outside: []
end
stored after: n|i:5;, lock left: []
