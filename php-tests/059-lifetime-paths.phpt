--TEST--
A session's lifetime belongs to one id on every path: saved when the request just ends (normal end, exit(), an uncaught exception, a fatal error), not kept by a logout's new id nor by another id regenerated, dropped by session_abort(), applied by an unchanged session whose waited-for lock renewed it, not cut to gc_maxlifetime by an early_refresh read or a read-only request, refused on a read-only session with the right reason; locked and unlocked
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
rcs_use_session();
$locking = '1';
// One request: $code runs after set_error_handler; prints what it printed.
// Returns the last line (the code echoes the id it wants to look at).
$request = function (string $code, array $ini = []) use (&$locking) {
    $out = rcs_php('set_error_handler(function ($t, $m) { echo "  warning: ", preg_replace("/^[a-z_]+\\(\\): /", "", $m), "\n"; return true; });
        ' . $code, $ini + ['redis.session.locking_enabled' => $locking, 'session.gc_maxlifetime' => '60',
            'session.lazy_write' => '1', 'display_errors' => '0', 'log_errors' => '0']);
    $lines = explode("\n", rtrim($out));
    $last = array_pop($lines);
    foreach ($lines as $line) echo "$line\n";
    return $last;
};
$key = fn(string $sid) => rcs_prefix() . $sid;
$life = fn(string $sid) => '{' . rcs_prefix() . $sid . '}_LIFETIME';
$show = function (string $what, string $sid) use ($key, $life) {
    $ms = rcs_cmd('PTTL', $key($sid));
    echo "  $what: data ", $ms < 0 ? $ms : ($ms > 86_400_000 ? '>1 day' : ($ms > 70_000 ? "$ms ms" : '<=60 s')),
        ', lifetime ', var_export(rcs_cmd('GET', $life($sid)), true), "\n";
};
$month = 'rediscluster_session_set_lifetime(30 * 86400);';
$new = fn(string $name) => $name . bin2hex(random_bytes(6));

foreach (['1' => 'locked', '0' => 'unlocked'] as $locking => $mode) {
    echo "== $mode\n";
    echo "docs/configuration.md's login page: the request just ends\n";
    $ends = [
        'normal end' => '',
        'exit()' => 'exit(0);',
        'an uncaught exception' => 'throw new RuntimeException("x");',
        'a fatal error' => 'ini_set("memory_limit", "16M"); $blob = str_repeat("x", 64 << 20);',
    ];
    foreach ($ends as $how => $end) {
        $sid = $new('login');
        $request("session_id('$sid'); session_start(); \$_SESSION['user'] = 'alice'; $month echo \"$sid\\n\"; $end");
        $show($how, $sid);
    }

    echo "logout, then a new anonymous session in the same request\n";
    $a = $new('remember');
    $request("session_id('$a'); session_start(); \$_SESSION['user'] = 'alice'; $month session_write_close(); echo 'x';");
    $fresh = $request("session_id('$a'); session_start(); session_destroy(); session_id(''); session_start(); \$_SESSION['cart'] = []; echo session_id();");
    $show('the new id', $fresh);
    echo '  the old id: ', rcs_cmd('EXISTS', $key($a), $life($a)), " keys\n";

    echo "another session regenerated after one with a lifetime was read\n";
    $a = $new('remember');
    $b = $new('plain');
    $request("session_id('$a'); session_start(); \$_SESSION['n'] = 1; $month session_write_close();
        session_id('$b'); session_start(); \$_SESSION['n'] = 1; session_write_close(); echo 'x';");
    $regenerated = $request("session_id('$a'); session_start(); session_write_close();
        session_id('$b'); session_start(); session_regenerate_id(true); echo session_id();");
    $show("the plain session's new id", $regenerated);

    echo "session_abort() drops a lifetime asked for\n";
    $a = $new('abort');
    $b = $new('next');
    $request("session_id('$a'); session_start(); \$_SESSION['n'] = 1; session_write_close();
        session_id('$a'); session_start(); $month session_abort();
        session_id('$b'); session_start(); \$_SESSION['n'] = 1; session_write_close(); echo 'x';");
    $show('the aborted session', $a);
    $show('the next one', $b);

    echo "early_refresh: an unchanged session asked for a lifetime\n";
    $a = $new('refresh');
    $request("session_id('$a'); session_start(); \$_SESSION['n'] = 1; echo 'x';");
    // A lock someone else holds briefly: this request waits for it, and takes it by script.
    rcs_cmd('SET', rcs_lock_key($a), 'someone', 'PX', '300');
    $request("session_id('$a'); session_start(); $month echo 'x';", ['redis.session.early_refresh' => '1']);
    $show('after it', $a);

    echo "early_refresh read_and_close of a session with a lifetime\n";
    $a = $new('rac');
    $request("session_id('$a'); session_start(); \$_SESSION['n'] = 1; $month echo 'x';");
    $request("session_id('$a'); session_start(['read_and_close' => true]); echo 'x';", ['redis.session.early_refresh' => '1']);
    $show('after it', $a);
    $request("session_id('$a'); session_start(); rediscluster_session_set_lifetime(100, false); echo 'x';");
    $request("session_id('$a'); session_start(['read_and_close' => true]); echo 'x';", ['redis.session.early_refresh' => '1']);
    $ms = rcs_cmd('PTTL', $key($a));
    echo "  a fixed end 100 s away: ", $ms > 0 && $ms <= 100_000 ? 'kept' : "data TTL $ms ms", "\n";
}

echo "== locked, the lock busy: read only\n";
$a = $new('busy');
$locking = '1';
$request("session_id('$a'); session_start(); \$_SESSION['n'] = 1; $month echo 'x';");
rcs_cmd('SET', rcs_lock_key($a), 'someone', 'PX', '20000');
$request("session_id('$a'); session_start(); var_dump(rediscluster_session_set_lifetime(60)); echo 'x';",
    ['redis.session.lock_failure_readonly' => '1', 'redis.session.lock_retries' => '2', 'redis.session.lock_wait_time' => '50000']);
$show('after an unchanged read-only request', $a);
rcs_cmd('DEL', rcs_lock_key($a));
?>
--EXPECT--
== locked
docs/configuration.md's login page: the request just ends
  normal end: data >1 day, lifetime 'S2592000'
  exit(): data >1 day, lifetime 'S2592000'
  an uncaught exception: data >1 day, lifetime 'S2592000'
  a fatal error: data >1 day, lifetime 'S2592000'
logout, then a new anonymous session in the same request
  the new id: data <=60 s, lifetime NULL
  the old id: 0 keys
another session regenerated after one with a lifetime was read
  the plain session's new id: data <=60 s, lifetime NULL
session_abort() drops a lifetime asked for
  the aborted session: data <=60 s, lifetime NULL
  the next one: data <=60 s, lifetime NULL
early_refresh: an unchanged session asked for a lifetime
  after it: data >1 day, lifetime 'S2592000'
early_refresh read_and_close of a session with a lifetime
  after it: data >1 day, lifetime 'S2592000'
  a fixed end 100 s away: kept
== unlocked
docs/configuration.md's login page: the request just ends
  normal end: data >1 day, lifetime 'S2592000'
  exit(): data >1 day, lifetime 'S2592000'
  an uncaught exception: data >1 day, lifetime 'S2592000'
  a fatal error: data >1 day, lifetime 'S2592000'
logout, then a new anonymous session in the same request
  the new id: data <=60 s, lifetime NULL
  the old id: 0 keys
another session regenerated after one with a lifetime was read
  the plain session's new id: data <=60 s, lifetime NULL
session_abort() drops a lifetime asked for
  the aborted session: data <=60 s, lifetime NULL
  the next one: data <=60 s, lifetime NULL
early_refresh: an unchanged session asked for a lifetime
  after it: data >1 day, lifetime 'S2592000'
early_refresh read_and_close of a session with a lifetime
  after it: data >1 day, lifetime 'S2592000'
  a fixed end 100 s away: kept
== locked, the lock busy: read only
  warning: Failed to acquire session lock, session will be read only
  warning: the session is read only: its lock is held by another request, which saves it
bool(false)
  after an unchanged read-only request: data >1 day, lifetime 'S2592000'
