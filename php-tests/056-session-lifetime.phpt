--TEST--
rediscluster_session_set_lifetime() and lock_info()'s lifetime: a sliding lifetime outlives gc_maxlifetime across requests that run with a short one (write, touch, early_refresh); a fixed end holds whatever comes in between; regenerate carries it, destroy ends it, 0 resets it; a destroyed id made again and a lifetime key left without data start afresh; bad input warns and changes nothing; locked and unlocked
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
rcs_use_session();
// One request on session $sid (empty: a new one) with gc_maxlifetime $gc:
// $code runs while the session is active. Shows what it printed, returns the
// session's id at its end.
$locking = '1';
$request = function (string $sid, string $code, int $gc = 60, array $ini = []) use (&$locking) {
    $lines = explode("\n", rtrim(rcs_php('set_error_handler(function ($t, $m) { echo "  warning: ", preg_replace("/^[a-z_]+\\(\\): /", "", $m), "\n"; return true; });
        ' . ($sid === '' ? '' : 'session_id(' . var_export($sid, true) . ');') . '
        session_start();
        ' . $code . '
        session_write_close();
        echo session_id();', $ini + ['redis.session.locking_enabled' => $locking, 'session.gc_maxlifetime' => (string)$gc, 'session.lazy_write' => '1'])));
    $id = array_pop($lines);
    foreach ($lines as $line) echo "  $line\n";
    return $id;
};
$key = fn(string $sid) => rcs_prefix() . $sid;
$life = fn(string $sid) => '{' . rcs_prefix() . $sid . '}_LIFETIME';
$ttl = fn(string $sid) => rcs_cmd('TTL', $key($sid));
$show = function (string $what, string $sid) use ($key, $life, $ttl) {
    $data_ms = rcs_cmd('PTTL', $key($sid));
    $life_ms = rcs_cmd('PTTL', $life($sid));
    echo "$what: data ", $data_ms < 0 ? $data_ms : ($data_ms > 86_000_000 ? '>1 day' : round($data_ms / 1000) . ' s'),
        ', lifetime ', var_export(rcs_cmd('GET', $life($sid)), true),
        $life_ms > 0 ? ' (' . (abs($life_ms - $data_ms) < 200 ? 'same TTL' : "TTL $life_ms ms") . ')' : '', "\n";
};

foreach (['1' => 'locked', '0' => 'unlocked'] as $locking => $mode) {
echo "== $mode\n";
    echo "sliding, 30 days:\n";
    $a = $request('', '$_SESSION["n"] = 1; var_dump(rediscluster_session_set_lifetime(30 * 86400));');
    $show('  first write', $a);
    $request($a, '$_SESSION["n"]++;', 5);
    $show('  a write with gc_maxlifetime=5', $a);
    rcs_cmd('EXPIRE', $key($a), '100');
    $request($a, '', 5);
    $show('  an unchanged request (touch)', $a);
    rcs_cmd('EXPIRE', $key($a), '100');
    $request($a, '', 5, ['redis.session.early_refresh' => '1']);
    $show('  an unchanged request with early_refresh', $a);

    echo "  lock_info: ", json_encode(array_intersect_key(rediscluster_session_lock_info($a), ['lifetime' => 1])), "\n";
    echo "reset to gc_maxlifetime:\n";
    $request($a, 'var_dump(rediscluster_session_set_lifetime(0));', 50);
    $show('  touched', $a);

    echo "a fixed end in 3 s:\n";
    $b = $request('', '$_SESSION["n"] = 1; var_dump(rediscluster_session_set_lifetime(3, false));');
    $show('  first write', $b);
    $request($b, '$_SESSION["n"]++;', 600);
    $show('  a write with gc_maxlifetime=600', $b);
    $info = rediscluster_session_lock_info($b);
    echo "  lock_info: ", json_encode(['seconds' => $info['lifetime']['seconds'] <= 3, 'sliding' => $info['lifetime']['sliding'], 'data_ttl_ms' => $info['data_ttl_ms'] <= 3000]), "\n";
    usleep(3_300_000);
    echo "  after it:\n";
    $request($b, 'echo count($_SESSION), " values\n"; $_SESSION["n"] = 1;');
    $show('  re-created', $b);

    echo "regenerate:\n";
    $c = $request('', '$_SESSION["n"] = 1; rediscluster_session_set_lifetime(7 * 86400);');
    $new = $request($c, 'session_regenerate_id(true);');
    $show('  the new id', $new);
    echo '  the old id: ', rcs_cmd('EXISTS', $key($c), $life($c)), " keys\n";
    $kept = $request($new, 'session_regenerate_id(false);');
    $show('  regenerated again, keeping the old', $kept);
    $show('  the old one', $new);
    $fresh = $request($kept, 'rediscluster_session_set_lifetime(600); session_regenerate_id(true);');
    $show('  a new lifetime set before regenerating', $fresh);

    echo "destroy, and the id made again:\n";
    $request($fresh, 'session_destroy(); session_start();');
    echo '  destroyed: ', rcs_cmd('EXISTS', $key($fresh), $life($fresh)), " keys\n";
    $request($fresh, '$_SESSION["again"] = 1;');
    $show('  made again', $fresh);

    echo "a lifetime key left without data (phpredis's destroy):\n";
    $d = $request('', '$_SESSION["n"] = 1; rediscluster_session_set_lifetime(86400 * 2);');
    rcs_cmd('DEL', $key($d));
    $request($d, '$_SESSION["again"] = 1;');
    $show('  made again', $d);

}
echo "bad input:\n";
$e = $request('', '$_SESSION["n"] = 1;
    var_dump(rediscluster_session_set_lifetime(-1), rediscluster_session_set_lifetime(400 * 86400 + 1));
    var_dump(rediscluster_session_set_lifetime(400 * 86400, false));', 50);
$show('  the 400 days that passed', $e);
echo rcs_php('var_dump(@rediscluster_session_set_lifetime(60)); echo error_get_last()["message"], "\n";', rcs_locking());
// A prefix with a stray brace, unlocked: the lifetime key would be on another slot.
echo rcs_php('session_start(); var_dump(@rediscluster_session_set_lifetime(60)); echo error_get_last()["message"], "\n"; $_SESSION["n"] = 1;',
    ['session.save_path' => rcs_save_path('prefix=' . urlencode(rcs_prefix() . 'x{'))]);
?>
--EXPECTF--
== locked
sliding, 30 days:
  bool(true)
  first write: data >1 day, lifetime 'S2592000' (same TTL)
  a write with gc_maxlifetime=5: data >1 day, lifetime 'S2592000' (same TTL)
  an unchanged request (touch): data >1 day, lifetime 'S2592000' (same TTL)
  an unchanged request with early_refresh: data >1 day, lifetime 'S2592000' (same TTL)
  lock_info: {"lifetime":{"seconds":2592000,"sliding":true}}
reset to gc_maxlifetime:
  bool(true)
  touched: data 50 s, lifetime NULL
a fixed end in 3 s:
  bool(true)
  first write: data 3 s, lifetime 'A%d' (same TTL)
  a write with gc_maxlifetime=600: data 3 s, lifetime 'A%d' (same TTL)
  lock_info: {"seconds":true,"sliding":false,"data_ttl_ms":true}
  after it:
  0 values
  re-created: data 60 s, lifetime NULL
regenerate:
  the new id: data >1 day, lifetime 'S604800' (same TTL)
  the old id: 0 keys
  regenerated again, keeping the old: data >1 day, lifetime 'S604800' (same TTL)
  the old one: data >1 day, lifetime 'S604800' (same TTL)
  a new lifetime set before regenerating: data 600 s, lifetime 'S600' (same TTL)
destroy, and the id made again:
  destroyed: 0 keys
  made again: data 60 s, lifetime NULL
a lifetime key left without data (phpredis's destroy):
  made again: data 60 s, lifetime NULL
== unlocked
sliding, 30 days:
  bool(true)
  first write: data >1 day, lifetime 'S2592000' (same TTL)
  a write with gc_maxlifetime=5: data >1 day, lifetime 'S2592000' (same TTL)
  an unchanged request (touch): data >1 day, lifetime 'S2592000' (same TTL)
  an unchanged request with early_refresh: data >1 day, lifetime 'S2592000' (same TTL)
  lock_info: {"lifetime":{"seconds":2592000,"sliding":true}}
reset to gc_maxlifetime:
  bool(true)
  touched: data 50 s, lifetime NULL
a fixed end in 3 s:
  bool(true)
  first write: data 3 s, lifetime 'A%d' (same TTL)
  a write with gc_maxlifetime=600: data 3 s, lifetime 'A%d' (same TTL)
  lock_info: {"seconds":true,"sliding":false,"data_ttl_ms":true}
  after it:
  0 values
  re-created: data 60 s, lifetime NULL
regenerate:
  the new id: data >1 day, lifetime 'S604800' (same TTL)
  the old id: 0 keys
  regenerated again, keeping the old: data >1 day, lifetime 'S604800' (same TTL)
  the old one: data >1 day, lifetime 'S604800' (same TTL)
  a new lifetime set before regenerating: data 600 s, lifetime 'S600' (same TTL)
destroy, and the id made again:
  destroyed: 0 keys
  made again: data 60 s, lifetime NULL
a lifetime key left without data (phpredis's destroy):
  made again: data 60 s, lifetime NULL
bad input:
    warning: a session lifetime cannot be negative
    warning: a session lifetime is at most 34560000 seconds (400 days, the longest browsers keep a cookie)
  bool(false)
  bool(false)
  bool(true)
  the 400 days that passed: data >1 day, lifetime 'A%d' (same TTL)
bool(false)
rediscluster_session_set_lifetime(): no active session of the rediscluster save handler
bool(false)
rediscluster_session_set_lifetime(): a session whose key (prefix and id) has braces outside a hash tag cannot have a lifetime: its lifetime key would be on another slot
