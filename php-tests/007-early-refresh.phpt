--TEST--
redis.session.early_refresh=1: the read refreshes the TTL (GETEX), and the unchanged close sends nothing
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
rcs_use_session(['session.gc_maxlifetime' => 600]);
ini_set('redis.session.early_refresh', '1');
session_start();
$_SESSION['a'] = 1;
$sid = session_id();
session_write_close();
$key = rcs_prefix() . $sid;

rcs_cmd('EXPIRE', $key, '9999');
session_start();
var_dump(rcs_cmd('TTL', $key));        // refreshed by the read itself
rcs_cmd('EXPIRE', $key, '5000');
session_write_close();                  // unchanged: no EXPIRE is sent
var_dump(rcs_cmd('TTL', $key) > 4000);

ini_set('redis.session.early_refresh', '0');
rcs_cmd('EXPIRE', $key, '9999');
session_start();
var_dump(rcs_cmd('TTL', $key) > 9000);  // a plain GET leaves the TTL alone
session_write_close();
var_dump(rcs_cmd('TTL', $key));
?>
--EXPECT--
int(600)
bool(true)
bool(true)
int(600)
