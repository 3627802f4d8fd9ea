--TEST--
A logout that cannot hold is refused, not half done: a session served read-only while another request holds its lock cannot be destroyed or regenerated with the old id deleted (the holder's write would bring it back, without its lifetime); and a fatal error inside session_regenerate_id() does not carry the session's lifetime to the next id the request makes in its shutdown functions
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
rcs_use_session();
$key = fn(string $sid) => rcs_prefix() . $sid;
$life = fn(string $sid) => '{' . rcs_prefix() . $sid . '}_LIFETIME';
$lifetime = fn(string $sid) => var_export(rcs_cmd('GET', $life($sid)), true);
$month = 'rediscluster_session_set_lifetime(30 * 86400);';

echo "== read-only logout\n";
$sid = 'rologout' . bin2hex(random_bytes(6));
echo rcs_php("session_id('$sid'); session_start(); \$_SESSION['user'] = 'alice'; $month", rcs_locking());
$go = rcs_go_file();
$holder = rcs_spawn(rcs_holder_code($sid, $go, 'holder'), rcs_locking());
rcs_wait_until(fn() => rcs_cmd('EXISTS', rcs_lock_key($sid)) === 1);
$read_only = rcs_locking(['redis.session.lock_retries' => '2', 'redis.session.lock_wait_time' => '10000',
    'redis.session.lock_failure_readonly' => '1']);
echo rcs_php("session_id('$sid'); session_start(); var_dump(session_destroy());", $read_only);
echo rcs_php("session_id('$sid'); session_start(); var_dump(session_regenerate_id(true));", $read_only);
// Nothing changed: nothing to refuse. An empty session too, which PHP
// writes without comparing it with what was read.
echo rcs_php("session_id('$sid'); session_start(); var_dump(session_write_close());", $read_only);
echo rcs_php("session_id('$sid'); session_start(); \$_SESSION = []; var_dump(session_write_close());", $read_only);
$empty = 'roempty' . bin2hex(random_bytes(6));
$empty_holder = rcs_spawn(rcs_holder_code($empty, $go, 'holder'), rcs_locking());
rcs_wait_until(fn() => rcs_cmd('EXISTS', rcs_lock_key($empty)) === 1);
echo rcs_php("session_id('$empty'); session_start(); var_dump(session_write_close());", $read_only);
echo 'still there under the holder: ', rcs_cmd('EXISTS', $key($sid)), ', lifetime ', $lifetime($sid), "\n";
touch($go);
echo rcs_wait($holder);
echo rcs_wait($empty_holder);
echo 'after the holder wrote: ', rcs_cmd('GET', $key($sid)), ', lifetime ', $lifetime($sid), "\n";

echo "== a fatal error inside session_regenerate_id()\n";
$sid = 'regenfatal' . bin2hex(random_bytes(6));
echo rcs_php(<<<PHP
session_id('$sid'); session_start(); \$_SESSION['user'] = 'alice'; $month session_write_close();
session_id('$sid'); session_start();
register_shutdown_function(function () {
    // The logout a shutdown function may do: a new, anonymous session.
    @session_destroy();
    session_id('');
    ini_set('redis.session.compression', 'none');
    session_start();
    \$_SESSION['anon'] = 1;
    echo 'new id: ', session_id(), "\n";
    session_write_close();
});
// A notice inside regenerate (the open hook's), made fatal by the application's error handler.
set_error_handler(function () { trigger_error('fatal inside regenerate', E_USER_ERROR); });
ini_set('redis.session.compression', 'bogus');
session_regenerate_id(true);
PHP, rcs_locking(['display_errors' => '0', 'log_errors' => '0']));
$new = null;
foreach (rcs_keys(rcs_prefix() . '*') as $found) {
    $id = substr($found, strlen(rcs_prefix()));
    if (!str_contains($id, '{') && !str_contains($id, '_') && $id !== $sid && rcs_cmd('GET', $found) === 'anon|i:1;') $new = $id;
}
$ms = rcs_cmd('PTTL', $key($new));
echo 'the new id: ', rcs_cmd('GET', $key($new)), ', TTL ', $ms <= 1440_000 ? '<= gc_maxlifetime' : "$ms ms", ', lifetime ', $lifetime($new), "\n";
?>
--EXPECTF--
== read-only logout

Warning: session_start(): Failed to acquire session lock, session will be read only in %s on line %d

Warning: session_destroy(): Unable to destroy session: session lock not held in %s on line %d

Warning: session_destroy(): Session object destruction failed in %s on line %d
bool(false)

Warning: session_start(): Failed to acquire session lock, session will be read only in %s on line %d

Warning: session_regenerate_id(): Unable to destroy session: session lock not held in %s on line %d

Warning: session_regenerate_id(): Session object destruction failed. ID: rediscluster (path: %s) in %s on line %d
bool(false)

Warning: session_start(): Failed to acquire session lock, session will be read only in %s on line %d
bool(true)

Warning: session_start(): Failed to acquire session lock, session will be read only in %s on line %d

Warning: session_write_close(): Unable to write session: session lock not held in %s on line %d

Warning: session_write_close(): Failed to write session data %s
bool(%s)

Warning: session_start(): Failed to acquire session lock, session will be read only in %s on line %d
bool(true)
still there under the holder: 1, lifetime 'S2592000'
bool(true)
bool(true)
bool(true)
bool(true)
after the holder wrote: user|s:5:"alice";v|s:6:"holder";, lifetime 'S2592000'
== a fatal error inside session_regenerate_id()
new id: %s
the new id: anon|i:1;, TTL <= gc_maxlifetime, lifetime NULL
