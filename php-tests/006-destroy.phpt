--TEST--
session_destroy deletes the data key
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
rcs_use_session();
session_start();
$_SESSION['v'] = 1;
$sid = session_id();
session_write_close();
var_dump(rcs_cmd('EXISTS', rcs_prefix() . $sid));
session_id($sid);
session_start();
var_dump(session_destroy());
var_dump(rcs_cmd('EXISTS', rcs_prefix() . $sid));
session_start();
var_dump(session_gc());   // TTLs expire sessions; nothing to collect
session_abort();
?>
--EXPECT--
int(1)
bool(true)
int(0)
int(0)
