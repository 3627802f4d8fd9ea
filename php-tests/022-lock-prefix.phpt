--TEST--
Prefixes: a {hash-tag} prefix keeps its tag in the lock key; malformed braces fail only with locking on, storing nothing
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$tag = 'tagged:{' . bin2hex(random_bytes(4)) . '}:';
$sid = 'tagged0123456789';
$child = rcs_spawn(rcs_holder_code($sid, 0.5), rcs_locking(['session.save_path' => rcs_save_path('prefix=' . urlencode($tag))]));
var_dump(rcs_wait_until(fn() => rcs_cmd('EXISTS', "$tag{$sid}_LOCK") === 1));
echo rcs_wait($child);
var_dump(rcs_cmd('GET', "$tag$sid"), rcs_cmd('EXISTS', "$tag{$sid}_LOCK"));

foreach (['mal:ab{}c:', 'mal:}xy:', 'mal:{tenant:', 'mal:{}:x:{tenant}:'] as $prefix) {
    $path = rcs_save_path('prefix=' . urlencode($prefix));
    echo "[$prefix] locking on\n", rcs_php(rcs_holder_code('malformed0123', 0), rcs_locking(['session.save_path' => $path]));
    var_dump(rcs_keys("$prefix*"), rcs_keys("*$prefix*"));
}
echo "[mal:ab{}c:] locking off\n", rcs_php(rcs_holder_code('malformed0123', 0), ['session.save_path' => rcs_save_path('prefix=' . urlencode('mal:ab{}c:'))]);
var_dump(rcs_cmd('GET', 'mal:ab{}c:malformed0123'));
rcs_cmd('DEL', 'mal:ab{}c:malformed0123');
?>
--EXPECTF--
bool(true)
bool(true)
bool(true)
string(15) "v|s:6:"holder";"
int(0)
[mal:ab{}c:] locking on

Warning: session_start(): Cluster session prefix must contain no braces or a non-empty {hash-tag} in %s on line %d

Warning: session_start(): Failed to read session data: rediscluster (path: %s) in %s on line %d
bool(false)
bool(false)
array(0) {
}
array(0) {
}
[mal:}xy:] locking on

Warning: session_start(): Cluster session prefix must contain no braces or a non-empty {hash-tag} in %s on line %d

Warning: session_start(): Failed to read session data: rediscluster (path: %s) in %s on line %d
bool(false)
bool(false)
array(0) {
}
array(0) {
}
[mal:{tenant:] locking on

Warning: session_start(): Cluster session prefix must contain no braces or a non-empty {hash-tag} in %s on line %d

Warning: session_start(): Failed to read session data: rediscluster (path: %s) in %s on line %d
bool(false)
bool(false)
array(0) {
}
array(0) {
}
[mal:{}:x:{tenant}:] locking on

Warning: session_start(): Cluster session prefix must contain no braces or a non-empty {hash-tag} in %s on line %d

Warning: session_start(): Failed to read session data: rediscluster (path: %s) in %s on line %d
bool(false)
bool(false)
array(0) {
}
array(0) {
}
[mal:ab{}c:] locking off
bool(true)
bool(true)
string(15) "v|s:6:"holder";"
