--TEST--
The TTL is session.gc_maxlifetime, clamped as phpredis does
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
foreach ([600, 1800, 0, 3000000000] as $lifetime) {
    rcs_use_session();
    ini_set('session.gc_maxlifetime', (string)$lifetime);
    session_start();
    $_SESSION['t'] = $lifetime;
    $sid = session_id();
    session_write_close();
    echo $lifetime, ' => ', rcs_cmd('TTL', rcs_prefix() . $sid), "\n";
}
?>
--EXPECTF--
600 => 600
1800 => 1800

Notice: session_start(): session.gc_maxlifetime is <= 0, defaulting to 1440 seconds in %s on line %d

Notice: session_write_close(): session.gc_maxlifetime is <= 0, defaulting to 1440 seconds in %s on line %d
0 => 1440

Notice: session_start(): session.gc_maxlifetime overflows INT_MAX, truncating. in %s on line %d

Notice: session_write_close(): session.gc_maxlifetime overflows INT_MAX, truncating. in %s on line %d
3000000000 => 2147483647
