--TEST--
ACL users (auth[]=user&auth[]=pass) work; no warning (ours or PHP's), session_save_path() or phpinfo() shows the password, however the name auth is spelled, and no warning shows a lock secret
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$user = 'rcs_acl_' . bin2hex(random_bytes(4));
$password = 'Right' . bin2hex(random_bytes(8));
$wrong = 'Wrong' . bin2hex(random_bytes(8));
foreach (rcs_seeds() as [$host, $port]) {   // ACLs are per node, replicas included
    Resp::send("$host:$port", ['ACL', 'SETUSER', $user, 'on', ">$password", '~*', '&*', '+@all']);
}
$auth = fn(string $pw) => rcs_save_path("auth[]=$user&auth[]=$pw&prefix=" . urlencode(rcs_prefix()));
// Every warning a child sees, printed after a marker so the parent can check them.
$collect = 'set_error_handler(function ($t, $m) { echo "WARNING: $m\n"; return true; });';
$shown = '';

// The right password: a round trip.
$out = rcs_php("$collect session_id('acl1'); var_dump(session_start()); \$_SESSION['v'] = 1; session_write_close();"
    . " session_id('acl1'); session_start(); var_dump(\$_SESSION['v']);", ['session.save_path' => $auth($password)]);
echo $out;
$shown .= $out;

// AUTH goes out with the first command of each connection, in one write
// (it had a packet of its own). The trace holds the password: it goes at once.
$trace = tempnam(sys_get_temp_dir(), 'rcs-trace');
$script = tempnam(sys_get_temp_dir(), 'rcs') . '.php';
file_put_contents($script, "<?php session_id('acl1'); session_start(); session_write_close();");
$cmd = ['strace', '-f', '-qq', '-e', 'trace=sendto,write,sendmsg', '-s', '512', '-o', $trace,
    ...rcs_php_command(rcs_session_ini(['session.save_path' => $auth($password)])), $script];
proc_close(proc_open($cmd, [1 => ['file', '/dev/null', 'w'], 2 => ['file', '/dev/null', 'w']], $pipes));
$auths = preg_grep('/AUTH/', file($trace));
$alone = array_filter($auths, fn($line) => !str_contains(substr($line, strpos($line, 'AUTH')), '\r\n*'));
unlink($trace);
unlink($script);
echo 'writes with AUTH: ', count($auths) > 0 ? 'some' : 'none', ', AUTH alone in one: ', count($alone), "\n";

// A wrong password fails at once with a warning (it is not retried like an
// outage); then session_save_path() and a later session_start() with a good
// save_path in the same process.
$t = microtime(true);
$out = rcs_php("$collect session_id('acl2'); var_dump(session_start());"
    . " echo 'save_path shown: ', session_save_path(), \"\\n\";"
    . " ini_set('session.save_path', " . var_export($auth($password), true) . ");"
    . " session_id('acl2'); var_dump(session_start());", ['session.save_path' => $auth($wrong)]);
echo preg_match('/WARNING: session_start\(\): Couldn\'t map cluster keyspace/', $out) ? "wrong password: warned\n" : $out;
echo "within 1.5 s: ", var_export(microtime(true) - $t < 1.5, true), "\n";
echo str_contains($out, 'auth[]=***&auth[]=***') ? "save_path masked\n" : $out;
$shown .= $out;

// A failing hook (an id over 256 bytes) masks PHP's copy; the next open unmasks it.
$out = rcs_php("$collect session_id(str_repeat('b', 257)); var_dump(session_start()); session_id('acl3'); var_dump(session_start());",
    ['session.save_path' => $auth($password)]);
echo substr_count($out, 'WARNING'), " warnings, then: ", substr($out, strrpos($out, 'bool')), "";
$shown .= $out;

// Names the parser trims and decodes to "auth" are masked as well: in PHP's
// warning, session_save_path() and phpinfo().
foreach (['+auth[]', '%20auth[]', ' auth[]'] as $spelled) {
    $path = rcs_save_path("$spelled=$user&$spelled=$password&prefix=" . urlencode(rcs_prefix()));
    $out = rcs_php("$collect session_id(str_repeat('b', 257)); session_start(); echo session_save_path(), \"\\n\";"
        . " session_id('acl4'); var_dump(session_start()); phpinfo(INFO_MODULES);", ['session.save_path' => $path]);
    echo "'$spelled': ", str_contains($out, 'bool(true)') ? 'authenticated' : 'failed', ", ",
        substr_count($out, "$spelled=***&$spelled=***"), " masked copies\n";
    $shown .= $out;
}

// phpinfo(), text mode: the session section shows the save_path masked.
$out = rcs_php("phpinfo(INFO_CONFIGURATION | INFO_MODULES);", ['session.save_path' => $auth($password)]);
echo preg_match('/^session\.save_path => (.*)$/m', $out, $m) ? "phpinfo: " . str_replace($user, 'USER', $m[1]) . "\n" : "no row\n";
$shown .= $out;

// A lock secret: hold a lock, read its secret, and make every kind of lock warning happen.
$sid = 'aclsecret' . bin2hex(random_bytes(6));
$ini = rcs_locking(['session.save_path' => $auth($password), 'redis.session.lock_expire' => '1']);
$holder = rcs_spawn("session_id('$sid'); session_start(); usleep(2500000); \$_SESSION['v'] = 2; $collect session_write_close();", $ini);
rcs_wait_until(fn() => rcs_cmd('EXISTS', rcs_lock_key($sid)) === 1);
$secret = rcs_cmd('GET', rcs_lock_key($sid));
$shown .= rcs_php("$collect session_id('$sid'); session_start();", $ini + ['redis.session.lock_retries' => '1', 'redis.session.lock_wait_time' => '1000']);
$shown .= rcs_php("$collect session_id('$sid'); session_start(['read_and_close' => true]);",
    $ini + ['redis.session.lock_retries' => '1', 'redis.session.lock_wait_time' => '1000', 'redis.session.lock_failure_readonly' => '1']);
$out = rcs_wait($holder);   // its lock expired after 2 s (lock_expire and the lease): "Session lock expired"
echo str_contains($out, 'Session lock expired') ? "lost lock: warned\n" : $out;
$shown .= $out;

var_dump(strlen($secret) === 32);
echo "password shown: ", var_export(str_contains($shown, $password) || str_contains($shown, $wrong), true), "\n";
echo "lock secret shown: ", var_export(str_contains($shown, $secret), true), "\n";
foreach (rcs_seeds() as [$host, $port]) Resp::send("$host:$port", ['ACL', 'DELUSER', $user]);
?>
--EXPECTF--
bool(true)
int(1)
writes with AUTH: some, AUTH alone in one: 0
wrong password: warned
within 1.5 s: true
save_path masked
2 warnings, then: bool(true)
'+auth[]': authenticated, 4 masked copies
'%20auth[]': authenticated, 4 masked copies
' auth[]': authenticated, 4 masked copies
phpinfo: seed[]=127.0.0.1:%d&seed[]=127.0.0.1:%d&seed[]=127.0.0.1:%d&auth[]=***&auth[]=***&prefix=%s => seed[]=127.0.0.1:%d&seed[]=127.0.0.1:%d&seed[]=127.0.0.1:%d&auth[]=***&auth[]=***&prefix=%s
lost lock: warned
bool(true)
password shown: false
lock secret shown: false
