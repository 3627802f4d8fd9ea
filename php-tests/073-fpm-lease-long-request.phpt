--TEST--
Behind nginx and php-fpm with rediscluster_session.lock_lease_ms=600 and lock_expire=30: a request that holds its session 15 s, far past its lease, keeps its lock while 3 requests queue behind it; all 4 succeed, no update is lost, no renewal failed and the workers log no warning
--SKIPIF--
<?php
if (getenv('RCS_NO_FPM')) die('skip ' . getenv('RCS_NO_FPM'));
?>
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
require __DIR__ . '/inc/served.php';
$dir = sys_get_temp_dir() . '/rcs-fpm-lease-long-' . getmypid();
$port = rcs_seeds()[0][1] + 1100;
// The waiters wait up to 30 s (600 × 50 ms).
served_start('fpm', $dir, $port, 4, ['rediscluster_session.lock_lease_ms=600', 'redis.session.lock_expire=30',
    'redis.session.lock_retries=600']);
try {
    $sid = 'fpmlong' . bin2hex(random_bytes(8));
    $go = rcs_go_file();
    $holder = http_send($port, '/?hold=' . urlencode($go), "PHPSESSID=$sid");
    rcs_wait_until(fn() => rcs_cmd('EXISTS', rcs_lock_key($sid)) === 1);
    $held = microtime(true);
    $waiters = array_map(fn() => http_send($port, '/', "PHPSESSID=$sid"), range(1, 3));
    rcs_wait_until(fn() => rcs_cmd('ZCARD', rcs_lock_key($sid) . '_FIFO') === 3);
    echo "3 waiters queued\n";
    time_sleep_until($held + 15);
    touch($go);
    $statuses = array_map(fn($socket) => http_answer($socket)[0], [$holder, ...$waiters]);
    echo "statuses: ", implode(' ', $statuses), "\n";
    echo "visits stored: ", preg_match('/visits\|i:(\d+)/', (string)rcs_cmd('GET', rcs_prefix() . $sid), $m) ? $m[1] : 'none', "\n";
    $stats = array_map(fn($answer) => json_decode($answer[1], true)['stats'],
        http_many($port, array_fill(0, 8, '/?stats=1'), array_fill(0, 8, 'PHPSESSID=stats'), 8));
    echo "renewals: ", json_encode(array_sum(array_column($stats, 'lease_renewals')) >= 20),
        ", failed: ", array_sum(array_column($stats, 'lease_renewal_failures')),
        ", lost: ", array_sum(array_column($stats, 'locks_lost_to_expiry')), "\n";
    echo "warnings logged: ", json_encode(preg_match('/warning/i', file_get_contents("$dir/fpm.log")) === 1), "\n";
} finally {
    served_stop('fpm', $dir);
}
?>
--EXPECT--
3 waiters queued
statuses: 200 200 200 200
visits stored: 4
renewals: true, failed: 0, lost: 0
warnings logged: false
