--TEST--
1 MB of binary data with NUL bytes round-trips byte for byte
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
rcs_use_session();
$blob = random_bytes(1024 * 1024) . "\0tail\0";
session_start();
$_SESSION['blob'] = $blob;
$encoded = session_encode();
$sid = session_id();
session_write_close();
var_dump(rcs_cmd('GET', rcs_prefix() . $sid) === $encoded);
$child = rcs_php("session_id('$sid'); session_start(); echo md5(\$_SESSION['blob']);");
var_dump($child === md5($blob));
?>
--EXPECT--
bool(true)
bool(true)
