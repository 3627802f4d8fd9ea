--TEST--
lazy_write: unchanged data refreshes the TTL (update_timestamp); a vanished key is written again
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
rcs_use_session(['session.gc_maxlifetime' => 600, 'session.lazy_write' => 1]);
session_start();
$sid = session_id();
$_SESSION['a'] = 1;
session_write_close();
$key = rcs_prefix() . $sid;

rcs_cmd('EXPIRE', $key, '9999');
session_start();            // data unchanged: PHP calls update_timestamp, not write
session_write_close();
var_dump(rcs_cmd('TTL', $key));

session_start();
rcs_cmd('DEL', $key);       // gone between read and close
session_write_close();
var_dump(rcs_cmd('GET', $key), rcs_cmd('TTL', $key));
?>
--EXPECT--
int(600)
string(6) "a|i:1;"
int(600)
