--TEST--
Faults: a node slower than read_timeout gives a warning within the bound and no later request reads a stale reply; a node out of memory refuses the write with a warning and the lock is still released
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$collect = 'set_error_handler(function ($t, $m) { echo "  ", preg_replace("/ \\\\(path: .*\\\\)$/", "", $m), "\n"; return true; });';

// A node that stops answering for 5 s (CLIENT PAUSE); connect and read timeouts 0.3 s.
$sid = 'slow' . bin2hex(random_bytes(6));
rcs_cmd('SET', rcs_prefix() . $sid, 'v|s:6:"before";');
$node = rcs_primary_of(rcs_prefix() . $sid);
$slow = rcs_save_path('timeout=0.3&read_timeout=0.3&prefix=' . urlencode(rcs_prefix()));
$out = rcs_php("$collect session_id('$sid');"
    . " Resp::send('$node', ['CLIENT', 'PAUSE', '5000', 'ALL']);"
    . " \$t = microtime(true); var_dump(session_start()); echo 'failed within 3 s: ', var_export(microtime(true) - \$t < 3, true), \"\\n\";"
    . " usleep(5200000 - (int)((microtime(true) - \$t) * 1e6));"
    // The same worker, after the pause: fresh replies only, the data as stored.
    . " session_id('$sid'); var_dump(session_start()); echo \$_SESSION['v'], \"\\n\"; \$_SESSION['v'] = 'after'; session_write_close();"
    . " session_id('$sid'); session_start(); echo \$_SESSION['v'], \"\\n\";",
    rcs_locking(['session.save_path' => $slow]));
echo preg_replace('/(Error communicating with the Redis Cluster: ).*/', '$1...', $out);
var_dump(rcs_cmd('EXISTS', rcs_lock_key($sid)));

// A primary out of memory (maxmemory, noeviction) while a session is held.
$sid = 'oom' . bin2hex(random_bytes(6));
rcs_cmd('SET', rcs_prefix() . $sid, 'v|s:6:"stored";');
$node = rcs_primary_of(rcs_prefix() . $sid);
$out = rcs_php("$collect session_id('$sid'); var_dump(session_start()); \$_SESSION['v'] = 'too much';"
    . " Resp::send('$node', ['CONFIG', 'SET', 'maxmemory-policy', 'noeviction']);"
    . " Resp::send('$node', ['CONFIG', 'SET', 'maxmemory', '1']);"
    . " session_write_close();"
    . " Resp::send('$node', ['CONFIG', 'SET', 'maxmemory', '0']);", rcs_locking());
Resp::send($node, ['CONFIG', 'SET', 'maxmemory', '0']);   // whatever the child did
echo preg_replace('/(Error communicating with the Redis Cluster: ).*/', '$1...', $out);
var_dump(rcs_cmd('GET', rcs_prefix() . $sid));
var_dump(rcs_cmd('EXISTS', rcs_lock_key($sid)));
?>
--EXPECTF--
  session_start(): Error communicating with the Redis Cluster: ...
  session_start(): Failed to read session data: rediscluster
bool(false)
failed within 3 s: true
bool(true)
before
after
int(0)
bool(true)
  session_write_close(): Error communicating with the Redis Cluster: ...
  session_write_close(): Failed to write session data (rediscluster). Please verify that the current setting of session.save_path is correct (%s)
string(15) "v|s:6:"stored";"
int(0)
