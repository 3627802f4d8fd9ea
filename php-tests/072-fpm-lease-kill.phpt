--TEST--
Behind nginx and php-fpm with rediscluster_session.lock_lease_ms=600 and lock_expire=30: a worker holding a session's lock is killed with SIGKILL after its lease was renewed, and one is killed by the pool's request_terminate_timeout; each time the next request on that session gets the lock within 2 s of the kill
--SKIPIF--
<?php
if (getenv('RCS_NO_FPM')) die('skip ' . getenv('RCS_NO_FPM'));
?>
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
require __DIR__ . '/inc/served.php';
$dir = sys_get_temp_dir() . '/rcs-fpm-lease-' . getmypid();
$port = rcs_seeds()[0][1] + 1099;
// One worker: the one holding the lock is the master's only child.
served_start('fpm', $dir, $port, 1, ['rediscluster_session.lock_lease_ms=600', 'redis.session.lock_expire=30']);
try {
    $sid = 'fpmlease' . bin2hex(random_bytes(8));
    $holder = http_send($port, '/?hold=' . urlencode(rcs_go_file()), "PHPSESSID=$sid");
    rcs_wait_until(fn() => rcs_cmd('EXISTS', rcs_lock_key($sid)) === 1);
    // Renewed by now: the lock lives one lease.
    usleep(1200000);
    $master = (int)trim(file_get_contents("$dir/fpm.pid"));
    $worker = (int)trim(shell_exec("pgrep -P $master"));
    exec("kill -9 $worker");
    $killed = microtime(true);
    [$status] = http_answer($holder);
    echo "the killed holder's request: $status\n";
    [$status] = http_many($port, ['/'], ["PHPSESSID=$sid"], 1)[0];
    $after = microtime(true) - $killed;
    echo "the next request: $status\n";
    echo "within 2 s of the kill: ", json_encode($after < 2.0), $after < 2.0 ? '' : " ($after s)", "\n";
} finally {
    served_stop('fpm', $dir);
}

// php-fpm's master kills a request that outlives request_terminate_timeout
// (SIGTERM, which a worker does not handle: no shutdown, no release).
$dir .= '-terminate';
served_start('fpm', $dir, $port, 1, ['rediscluster_session.lock_lease_ms=600', 'redis.session.lock_expire=30'],
    env: ['FPM_CONF_EXTRA' => 'request_terminate_timeout = 2s']);
try {
    $sid = 'fpmterm' . bin2hex(random_bytes(8));
    $holder = http_send($port, '/?hold=' . urlencode(rcs_go_file()), "PHPSESSID=$sid");
    [$status] = http_answer($holder);
    $killed = microtime(true);
    echo "the terminated holder's request: $status\n";
    [$status] = http_many($port, ['/'], ["PHPSESSID=$sid"], 1)[0];
    $after = microtime(true) - $killed;
    echo "the next request: $status\n";
    echo "within 2 s of the kill: ", json_encode($after < 2.0), $after < 2.0 ? '' : " ($after s)", "\n";
    echo "the pool says it terminated it: ", json_encode(str_contains(file_get_contents("$dir/fpm.log"), 'execution timed out')), "\n";
} finally {
    served_stop('fpm', $dir);
}
?>
--EXPECT--
the killed holder's request: 502
the next request: 200
within 2 s of the kill: true
the terminated holder's request: 502
the next request: 200
within 2 s of the kill: true
the pool says it terminated it: true
