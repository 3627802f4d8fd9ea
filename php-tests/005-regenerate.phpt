--TEST--
session_regenerate_id(false) keeps the old session, (true) deletes it; the data moves to the new id
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
rcs_use_session();
session_start();
$_SESSION['v'] = 'kept';
$old = session_id();
session_write_close();

session_id($old);
session_start();
session_regenerate_id(false);
$new = session_id();
session_write_close();
var_dump($new !== $old);
var_dump(rcs_cmd('GET', rcs_prefix() . $old), rcs_cmd('GET', rcs_prefix() . $new));

session_id($new);
session_start();
session_regenerate_id(true);
$newer = session_id();
$_SESSION['v'] = 'moved';
session_write_close();
var_dump(rcs_cmd('EXISTS', rcs_prefix() . $new), rcs_cmd('GET', rcs_prefix() . $newer));
?>
--EXPECT--
bool(true)
string(13) "v|s:4:"kept";"
string(13) "v|s:4:"kept";"
int(0)
string(14) "v|s:5:"moved";"
