--TEST--
Unlocked, a session whose read found no lifetime and whose request then drops one (rediscluster_session_set_lifetime(0)) deletes the lifetime key that another request set meanwhile, a forked child's exit write or a request beside it: the session is left with gc_maxlifetime's TTL and no lifetime, as the last save asked (before, the other's fixed lifetime stayed beside data that expires sooner; found by 057, seed 866933896)
--EXTENSIONS--
pcntl
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$ini = ['session.gc_maxlifetime' => '1000', 'session.lazy_write' => '0'];
$show = 'session_id($sid); session_start(["read_and_close" => true]); $info = rediscluster_session_lock_info($sid); echo "stored: ", json_encode($_SESSION), ", ttl ", round($info["data_ttl_ms"] / 1000), " s, lifetime ", json_encode($info["lifetime"]), "\n";';

echo "== a forked child's exit write\n";
$sid = 'dropfork' . bin2hex(random_bytes(6));
echo rcs_php("\$sid = '$sid'; session_id(\$sid); session_start(); rediscluster_session_set_lifetime(86400, false);
if (pcntl_fork() === 0) exit(0); // the child's shutdown writes with the lifetime it inherited
pcntl_wait(\$status);
rediscluster_session_set_lifetime(0); \$_SESSION['by'] = 'parent'; session_write_close(); $show", $ini);

echo "== a request beside it\n";
$sid = 'dropbeside' . bin2hex(random_bytes(6));
$read = rcs_go_file();
$go = rcs_go_file();
$first = rcs_spawn("\$sid = '$sid'; session_id(\$sid); session_start(); touch('$read'); " . rcs_hold_code($go)
    . " rediscluster_session_set_lifetime(0); \$_SESSION['by'] = 'first'; session_write_close(); $show", $ini);
rcs_wait_until(fn() => file_exists($read));
echo rcs_php("session_id('$sid'); session_start(); rediscluster_session_set_lifetime(86400, false); \$_SESSION['by'] = 'other'; session_write_close(); echo \"the other saved a fixed lifetime\\n\";", $ini);
touch($go);
echo rcs_wait($first);
?>
--EXPECT--
== a forked child's exit write
stored: {"by":"parent"}, ttl 1000 s, lifetime null
== a request beside it
the other saved a fixed lifetime
stored: {"by":"first"}, ttl 1000 s, lifetime null
