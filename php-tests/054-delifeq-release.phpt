--TEST--
lock_release_cmd=delifeq on a server that has DELIFEQ (Valkey 9): the releases not folded into a write go through it (read_and_close, session_abort()), leave no lock and keep the data; an unchanged session with early_refresh=1 read without waiting is renewed by the touch script instead (the plain read cannot know the session's own lifetime); with a waiter queued, Lua hands the lock on after the DELIFEQ at once
--SKIPIF--
<?php
require __DIR__ . '/inc/setup.php';
if (!rcs_server_has('delifeq')) die('skip the server has no DELIFEQ (Valkey 9 has it)');
?>
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
// Without a lease: a leased lock is taken by script, whose read renews the
// TTL, so no path below would release by Lua (071 covers the lease).
$ini = rcs_locking_unleased(['redis.session.lock_release_cmd' => 'delifeq', 'redis.session.lock_wait_time' => '2000000',
    'redis.session.lock_retries' => '5']);
// The child's own count of releases by each means, after its script.
$releases = ' register_shutdown_function(function () { echo json_encode(rediscluster_session_stats()["releases"]), "\n"; });';
$paths = [
    'read_and_close' => ["session_start(['read_and_close' => true]);", []],
    'session_abort()' => "session_start(); \$_SESSION['x'] = 2; session_abort();",
    // Read by plain GET (the lock was free): its close renews the TTL, by Lua.
    'unchanged, early_refresh=1' => ["session_start(); session_write_close();", ['redis.session.early_refresh' => '1']],
];
foreach ($paths as $label => $path) {
    [$code, $extra] = is_array($path) ? $path : [$path, []];
    $sid = 'delifeq' . bin2hex(random_bytes(8));
    rcs_php("session_id('$sid'); session_start(); \$_SESSION['x'] = 1; session_write_close();");
    rcs_cmd('EXPIRE', rcs_prefix() . $sid, '100');
    $calls = rcs_command_calls('delifeq');
    echo "$label: ", rcs_php("$releases session_id('$sid'); $code", $ini + $extra);
    echo "  DELIFEQ calls: ", rcs_command_calls('delifeq') - $calls, ", lock left: ", rcs_cmd('EXISTS', rcs_lock_key($sid)),
        ", data: ", rcs_cmd('GET', rcs_prefix() . $sid), "\n";
    if ($extra) echo "  TTL renewed: ", var_export(rcs_cmd('TTL', rcs_prefix() . $sid) > 1000, true), "\n";
}

// A waiter queued behind the holder: DELIFEQ deletes the lock and sees the
// queue, then Lua hands the lock on. The holder lets go as soon as the waiter
// has queued, so a waiter left to its 1 s piece of waiting would be ~1 s late.
$sid = 'delifeqwait' . bin2hex(random_bytes(8));
$go = sys_get_temp_dir() . "/rcs-delifeq-go-$sid";
$holder = rcs_spawn("$releases session_id('$sid'); session_start(); while (!file_exists('$go')) usleep(5000);"
    . " echo 'released ', microtime(true), \"\\n\"; session_abort();", $ini);
rcs_wait_until(fn() => rcs_cmd('EXISTS', rcs_lock_key($sid)) === 1);
$waiter = rcs_spawn("session_id('$sid'); var_dump(session_start()); echo 'acquired ', microtime(true), \"\\n\"; session_write_close();", $ini);
rcs_wait_until(fn() => rcs_cmd('ZCARD', rcs_lock_key($sid) . '_FIFO') === 1);
touch($go);
$held = rcs_wait($holder);
$got = rcs_wait($waiter);
$time = fn(string $what, string $output) => preg_match("/$what ([0-9.]+)/", $output, $m) ? (float)$m[1] : INF;
echo "holder's releases: ", trim(preg_replace('/^released .*\n/m', '', $held)), "\n";
echo "waiter: ", strtok($got, "\n"), ", had the lock within 0.5 s of the release: ",
    var_export($time('acquired', $got) - $time('released', $held) < 0.5, true), "\n";
var_dump(rcs_lock_keys_left($sid));
unlink($go);
?>
--EXPECT--
read_and_close: {"lua":0,"delex":0,"delifeq":1}
  DELIFEQ calls: 1, lock left: 0, data: x|i:1;
session_abort(): {"lua":0,"delex":0,"delifeq":1}
  DELIFEQ calls: 1, lock left: 0, data: x|i:1;
unchanged, early_refresh=1: {"lua":1,"delex":0,"delifeq":0}
  DELIFEQ calls: 0, lock left: 0, data: x|i:1;
  TTL renewed: true
holder's releases: {"lua":0,"delex":0,"delifeq":1}
waiter: bool(true), had the lock within 0.5 s of the release: true
array(0) {
}
