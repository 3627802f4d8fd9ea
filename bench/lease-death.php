<?php
// Driver of bench/lease-death.sh (which starts the servers and sets the environment).
// 1. A holder dies: the time from its SIGKILL to the next request's lock, per variant.
// 2. The renewals' server CPU: many concurrent locked requests, lease on and off.
require __DIR__ . '/../php-tests/inc/resp.php';

$trials = (int)getenv('LEASE_DEATH_TRIALS');
$cpu_requests = (int)getenv('LEASE_CPU_REQUESTS');
$primaries = array_values(array_filter(explode(',', getenv('RCS_SEEDS')),
    fn($addr) => Resp::send($addr, ['ROLE'])[0] === 'master'));
$seed_path = implode('&', array_map(fn($addr) => "seed[]=$addr", $primaries));
$files_dir = sys_get_temp_dir() . '/rcs-lease-death-files';
@mkdir($files_dir);

$common = ['session.use_cookies' => 0, 'session.use_strict_mode' => 0, 'session.gc_probability' => 0,
    'redis.session.locking_enabled' => 1, 'redis.session.lock_wait_time' => 20000,
    'redis.session.lock_retries' => 3000]; // waits up to 60 s: longer than any lock lives here
$ours = ['extension' => getenv('RCS_EXT'), 'session.save_handler' => 'rediscluster',
    'session.save_path' => $seed_path, 'redis.session.lock_expire' => 10];
$variants = [
    'ours, lease 1000 ms' => $ours + ['rediscluster_session.lock_lease_ms' => 1000],
    'ours, lease 0, lock_expire 10' => $ours + ['rediscluster_session.lock_lease_ms' => 0],
    'phpredis redis handler, lock_expire 10' => ['extension' => explode(' ', getenv('RCS_PHPREDIS')),
        'session.save_handler' => 'redis', 'session.save_path' => 'tcp://' . getenv('RCS_STANDALONE'),
        'redis.session.lock_expire' => 10],
    'files (flock)' => ['session.save_handler' => 'files', 'session.save_path' => $files_dir],
];

function command(array $ini, string ...$args): array {
    global $common;
    $cmd = [PHP_BINARY, '-n'];
    foreach ($ini + $common as $k => $v) {
        foreach ((array)$v as $one) array_push($cmd, '-d', "$k=\"$one\"");
    }
    return array_merge($cmd, [__DIR__ . '/lease.php'], $args);
}

function spawn(array $cmd): array {
    $proc = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['file', '/dev/null', 'w']], $pipes);
    return [$proc, $pipes[1]];
}

/** The process's last line of output, decoded, once it exits. */
function finish(array $p): array {
    $out = trim(stream_get_contents($p[1]));
    proc_close($p[0]);
    $last = json_decode(substr($out, strrpos("\n$out", "\n")), true);
    if (!is_array($last)) throw new RuntimeException("worker failed: $out");
    return $last;
}

function median(array $v): float { sort($v); $n = count($v); return ($v[intdiv($n - 1, 2)] + $v[intdiv($n, 2)]) / 2; }

// 1. Each trial kills every variant's holder at a random moment of its own,
// 0.2-3 s after it held the lock, in the order of those moments.
$waits = array_fill_keys(array_keys($variants), []);
for ($t = 1; $t <= $trials; $t++) {
    $plan = [];
    foreach ($variants as $name => $ini) {
        $sid = 'death' . bin2hex(random_bytes(8));
        $holder = spawn(command($ini, 'hold', $sid, '30'));
        if (trim(fgets($holder[1])) !== 'locked') throw new RuntimeException("$name: the holder took no lock");
        $plan[] = ['name' => $name, 'sid' => $sid, 'holder' => $holder,
            'kill_at' => microtime(true) + mt_rand(200, 3000) / 1000];
    }
    usort($plan, fn($a, $b) => $a['kill_at'] <=> $b['kill_at']);
    foreach ($plan as &$p) {
        usleep(max(0, (int)(($p['kill_at'] - microtime(true)) * 1e6)));
        $p['killed'] = microtime(true);
        proc_terminate($p['holder'][0], 9);
        $p['next'] = spawn(command($variants[$p['name']], 'next', $p['sid']));
    }
    unset($p);
    foreach ($plan as $p) {
        $next = finish($p['next']);
        proc_close($p['holder'][0]);
        if (!$next['ok'] || $next['messages']) fwrite(STDERR, "{$p['name']}: " . json_encode($next) . "\n");
        $waits[$p['name']][] = $next['at'] - $p['killed'];
    }
    fwrite(STDERR, "trial $t/$trials done\n");
}
printf("A holder SIGKILLed 0.2-3 s into its request: its death to the next request's lock, %d trials each\n", $trials);
printf("| %-40s | %8s | %8s |\n|%s|%s|%s|\n", 'variant', 'median s', 'max s', str_repeat('-', 42), str_repeat('-', 10), str_repeat('-', 10));
foreach ($waits as $name => $w) printf("| %-40s | %8.3f | %8.3f |\n", $name, median($w), max($w));

// 2. The primaries' CPU over a batch of concurrent 10-s locked requests, each on
// a session of its own, lease off and on, twice each, interleaved.
function cpu_seconds(array $primaries): float {
    $sum = 0.0;
    foreach ($primaries as $addr) {
        preg_match_all('/^used_cpu_(?:sys|user):([\d.]+)/m', Resp::send($addr, ['INFO', 'cpu']), $m);
        $sum += array_sum(array_map('floatval', $m[1]));
    }
    return $sum;
}
// The servers' own background (cron, cluster bus, replication) over as long.
$before = cpu_seconds($primaries);
sleep(10);
$idle = cpu_seconds($primaries) - $before;
$cpu = [];
foreach ([0, 1000, 0, 1000] as $lease) {
    $ini = ['redis.session.lock_expire' => 30, 'rediscluster_session.lock_lease_ms' => $lease] + $ours;
    $before = cpu_seconds($primaries);
    $start = microtime(true);
    $batch = [];
    for ($i = 0; $i < $cpu_requests; $i++) $batch[] = spawn(command($ini, 'hold', 'cpu' . bin2hex(random_bytes(8)), '10'));
    $renewals = 0;
    foreach ($batch as $p) $renewals += finish($p)['stats']['lease_renewals'] ?? 0;
    $cpu[$lease][] = ['cpu' => cpu_seconds($primaries) - $before, 'secs' => microtime(true) - $start, 'renewals' => $renewals];
}
printf("\n%d concurrent 10-s locked requests: the primaries' CPU (INFO cpu, user + sys, summed), per batch\n", $cpu_requests);
printf("  idle, no requests: %.3f s CPU over 10 s\n", $idle);
foreach ($cpu as $lease => $runs) {
    foreach ($runs as $r) printf("  lease %4d ms: %.3f s CPU over %.1f s, %d renewals\n", $lease, $r['cpu'], $r['secs'], $r['renewals']);
}
$off = median(array_column($cpu[0], 'cpu'));
$on = median(array_column($cpu[1000], 'cpu'));
$renewals = median(array_column($cpu[1000], 'renewals'));
printf("  median: lease 1000 %.3f s, lease 0 %.3f s: ratio %.2f, +%.0f µs per renewal\n", $on, $off, $on / $off,
    $renewals ? ($on - $off) * 1e6 / $renewals : 0);
