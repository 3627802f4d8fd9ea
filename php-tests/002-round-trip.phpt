--TEST--
Round trip across processes: the data key is prefix.sid on the cluster, with the session TTL
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
rcs_use_session(['session.gc_maxlifetime' => 600]);
var_dump(session_start());
$sid = session_id();
$_SESSION['user'] = 'alice';
$_SESSION['n'] = 1;
var_dump(session_write_close());

$key = rcs_prefix() . $sid;
var_dump(rcs_cmd('GET', $key));
var_dump(rcs_cmd('TTL', $key));

// Another process reads it back and changes it.
echo rcs_php("session_id('$sid'); var_dump(session_start()); echo json_encode(\$_SESSION), PHP_EOL; \$_SESSION['n']++;");
var_dump(rcs_cmd('GET', $key));

// A session that does not exist yet reads as empty.
echo rcs_php("session_id('nosuchsession0123456789'); var_dump(session_start(), \$_SESSION); session_abort();");
var_dump(rcs_cmd('EXISTS', rcs_prefix() . 'nosuchsession0123456789'));
?>
--EXPECT--
bool(true)
bool(true)
string(23) "user|s:5:"alice";n|i:1;"
int(600)
bool(true)
{"user":"alice","n":1}
string(23) "user|s:5:"alice";n|i:2;"
bool(true)
array(0) {
}
int(0)
