--TEST--
rediscluster_session_lock_info() takes its id as PHP's own functions take a string: ints, floats, bools and Stringable objects coerced, ids that are not UTF-8 accepted, null deprecated; TypeError only where strlen() throws one, and with strict_types for a non-string
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
rcs_use_session();
$show = function ($id) {
    try {
        $info = rediscluster_session_lock_info($id);
        echo is_array($info) ? json_encode($info) : var_export($info, true), "\n";
    } catch (Throwable $e) {
        echo get_class($e), ": ", $e->getMessage(), "\n";
    }
};
// Locks held on the ids the coerced values become.
$binary = "\xff\xfe\x80" . bin2hex(random_bytes(4));
$holder = rcs_spawn('
    foreach (["12345", "1.5", "1", "stringable", ' . var_export($binary, true) . '] as $id) {
        session_id($id); session_start(); session_write_close();
    }', rcs_locking());
rcs_wait($holder);
foreach (['12345', '1.5', '1', 'stringable', $binary] as $id) {
    rcs_cmd('SET', rcs_lock_key($id), 'held', 'PX', '60000');
}
$show(12345);
$show(1.5);
$show(true);
$show(new class { public function __toString(): string { return 'stringable'; } });
$show($binary);
$show([]);
$show(new stdClass);
set_error_handler(function ($type, $message) { echo "  ", $message, "\n"; return true; });
$show(null);
restore_error_handler();
echo rcs_php('declare(strict_types=1);
    try { rediscluster_session_lock_info(12345); } catch (TypeError $e) { echo "strict: ", $e->getMessage(), "\n"; }
    try { strlen(12345); } catch (TypeError $e) { echo "strlen strict: ", $e->getMessage(), "\n"; }
    var_dump(is_array(rediscluster_session_lock_info("12345")));', rcs_session_ini());
foreach (['12345', '1.5', '1', 'stringable', $binary] as $id) {
    rcs_cmd('DEL', rcs_lock_key($id));
}
?>
--EXPECTF--
{"locked":true,"ttl_ms":%d,"waiters":0,"data_ttl_ms":%d,"lifetime":null,"lease_ms":0,"lease_expires_ms":null,"lease_renewed_for_ms":null}
{"locked":true,"ttl_ms":%d,"waiters":0,"data_ttl_ms":%d,"lifetime":null,"lease_ms":0,"lease_expires_ms":null,"lease_renewed_for_ms":null}
{"locked":true,"ttl_ms":%d,"waiters":0,"data_ttl_ms":%d,"lifetime":null,"lease_ms":0,"lease_expires_ms":null,"lease_renewed_for_ms":null}
{"locked":true,"ttl_ms":%d,"waiters":0,"data_ttl_ms":%d,"lifetime":null,"lease_ms":0,"lease_expires_ms":null,"lease_renewed_for_ms":null}
{"locked":true,"ttl_ms":%d,"waiters":0,"data_ttl_ms":%d,"lifetime":null,"lease_ms":0,"lease_expires_ms":null,"lease_renewed_for_ms":null}
TypeError: rediscluster_session_lock_info(): Argument #1 ($id) must be of type string, array given
TypeError: rediscluster_session_lock_info(): Argument #1 ($id) must be of type string, %s given
  rediscluster_session_lock_info(): Passing null to parameter #1 ($id) of type string is deprecated
  rediscluster_session_lock_info(): Session ID is empty or longer than 256 bytes
NULL
strict: rediscluster_session_lock_info(): Argument #1 ($id) must be of type string, int given
strlen strict: strlen(): Argument #1 ($string) must be of type string, int given
bool(true)
