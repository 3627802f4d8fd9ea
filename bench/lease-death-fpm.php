<?php
// Driver of bench/lease-death-fpm.sh (issue 48, item 2): behind nginx and
// php-fpm with the default lease (1000 ms) and lock_expire 30, the time from a
// lock holder's death to the lock held by the next request, which starts at
// the death: holders SIGKILLed at random moments 0.05-3 s into their hold (the
// first at 0.1 s, before the first heartbeat), holders SIGKILLed right after a
// hand-over gave them the lock, and holders killed by the pool's
// request_terminate_timeout (measured from the 502 that ends them).
require __DIR__ . '/../php-tests/inc/setup.php';
require __DIR__ . '/../php-tests/inc/served.php';

$trials = (int)(getenv('LEASE_DEATH_TRIALS') ?: 20);
$port = rcs_seeds()[0][1] + 1199;
$dir = sys_get_temp_dir() . '/rcs-lease-death-fpm-' . getmypid();
$ini = ['redis.session.lock_expire=30'];

/** The next request on $sid: how long after $since it was served, and its status. */
function next_served(int $port, string $sid, float $since): array {
    [$status] = http_many($port, ['/'], ["PHPSESSID=$sid"], 1)[0];
    return [microtime(true) - $since, $status];
}

/** Waits for a holder of rcs_go_file() $go to write its worker's pid. */
function holder_pid(string $go): int {
    rcs_wait_until(fn() => is_file("$go.pid"), 20) or throw new RuntimeException('no holder');
    return (int)file_get_contents("$go.pid");
}

$times = ['SIGKILL at a random moment' => [], 'SIGKILL right after a hand-over' => [], 'request_terminate_timeout' => []];
$failed = 0;
served_start('fpm', $dir, $port, 3, $ini);
try {
    for ($i = 0; $i < $trials; $i++) {
        $sid = 'deathfpm' . bin2hex(random_bytes(8));
        $go = rcs_go_file();
        $holder = http_send($port, '/?hold=' . urlencode($go), "PHPSESSID=$sid");
        $pid = holder_pid($go);
        usleep($i === 0 ? 100000 : random_int(50000, 3000000));
        exec("kill -9 $pid");
        $killed = microtime(true);
        http_answer($holder);
        [$took, $status] = next_served($port, $sid, $killed);
        $status === 200 ? $times['SIGKILL at a random moment'][] = $took : $failed++;

        // A holds, B queues; A lets go, the lock goes to B, which is killed at once.
        $sid = 'deathhand' . bin2hex(random_bytes(8));
        [$go_a, $go_b] = [rcs_go_file(), rcs_go_file()];
        $a = http_send($port, '/?hold=' . urlencode($go_a), "PHPSESSID=$sid");
        holder_pid($go_a);
        $b = http_send($port, '/?hold=' . urlencode($go_b), "PHPSESSID=$sid");
        rcs_wait_until(fn() => rcs_cmd('ZCARD', rcs_lock_key($sid) . '_FIFO') === 1, 10);
        touch($go_a);
        $pid = holder_pid($go_b);
        exec("kill -9 $pid");
        $killed = microtime(true);
        http_answer($a);
        http_answer($b);
        [$took, $status] = next_served($port, $sid, $killed);
        $status === 200 ? $times['SIGKILL right after a hand-over'][] = $took : $failed++;
        fwrite(STDERR, "trial " . ($i + 1) . "/$trials done\n");
    }
} finally {
    served_stop('fpm', $dir);
}
$dir .= '-terminate';
served_start('fpm', $dir, $port, 3, $ini, env: ['FPM_CONF_EXTRA' => 'request_terminate_timeout = 1s']);
try {
    for ($i = 0; $i < $trials; $i++) {
        $sid = 'deathterm' . bin2hex(random_bytes(8));
        $holder = http_send($port, '/?hold=' . urlencode(rcs_go_file()), "PHPSESSID=$sid");
        http_answer($holder);
        [$took, $status] = next_served($port, $sid, microtime(true));
        $status === 200 ? $times['request_terminate_timeout'][] = $took : $failed++;
    }
} finally {
    served_stop('fpm', $dir);
}

printf("Behind nginx and php-fpm (3 workers), lease 1000 ms, lock_expire 30: a holder's death to the next request's lock, %d trials each\n", $trials);
printf("| %-34s | %8s | %8s |\n|%s|%s|%s|\n", 'death', 'median s', 'max s', str_repeat('-', 36), str_repeat('-', 10), str_repeat('-', 10));
foreach ($times as $name => $list) {
    sort($list);
    $median = $list === [] ? NAN : $list[intdiv(count($list), 2)];
    printf("| %-34s | %8.3f | %8.3f |\n", $name, $median, $list === [] ? NAN : max($list));
}
echo "next requests not served: $failed\n";
