--TEST--
session_reset() with locking: PHP opens the handler again without closing it; the lock stays ours (not dropped to wait out its TTL), the saved data reads back, and close releases it
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
rcs_use_session(rcs_locking(['redis.session.lock_wait_time' => '50000', 'redis.session.lock_retries' => '40']));
$sid = 'reset' . bin2hex(random_bytes(6));
$lock = rcs_lock_key($sid);
session_id($sid);
session_start();
$_SESSION['v'] = 'saved';
session_write_close();

session_id($sid);
session_start();
$secret = rcs_cmd('GET', $lock);
$_SESSION['v'] = 'changed, then reset';
$t = microtime(true);
var_dump(session_reset());
echo "reset: ", microtime(true) - $t < 0.5 ? 'at once' : 'waited ' . round(microtime(true) - $t, 1) . ' s', "\n";
echo "data: ", $_SESSION['v'], "\n";
echo "lock: ", rcs_cmd('GET', $lock) === $secret ? 'still ours' : 'not ours', "\n";
$_SESSION['v'] = 'written after the reset';
session_write_close();
echo "lock after close: ", rcs_cmd('EXISTS', $lock) ? 'left behind' : 'released', "\n";
echo rcs_php("session_id('$sid'); session_start(); echo \$_SESSION['v'], \"\\n\";", rcs_locking());
?>
--EXPECT--
bool(true)
reset: at once
data: saved
lock: still ours
lock after close: released
written after the reset
