<?php
// Runs every benchmark scenario against every contender in one run and prints
// one table. Started by bench/run.sh, which provides the servers:
//   RCS_EXT      this extension's .so
//   RCS_SEEDS    host:port,... of the local cluster
//   RCS_STANDALONE host:port of a plain (non-cluster) server for phpredis's `redis` handler
//   RCS_SEEDS16  host:port,... of a 16-node cluster (optional), RCS_FPM_PORT a free port for nginx
//   RCS_METRICS_COST  the metrics_cost example (counter updates of one request)
//   RCS_EXT_PREVIOUS  optional: a previous release's .so, measured beside this one
//   php -n bench/bench.php [--smoke]
require __DIR__ . '/../php-tests/inc/resp.php';
require __DIR__ . '/../php-tests/inc/http.php';
require __DIR__ . '/../php-tests/inc/env.php';

$smoke = in_array('--smoke', $argv, true);
// Sizes: [full, smoke]. The smoke run only proves the benchmark still works.
$size = fn(int $full, int $small) => $smoke ? $small : $full;
$runs = $size(5, 1);
$cycles = $size(2000, 20);
$contention = ['processes' => 8, 'increments' => $size(200, 10), 'runs' => $size(3, 1)];
$callgrind = [$size(20, 2), $size(220, 6)];
$memory_checkpoints = $smoke ? [100, 300, 500] : [1000, 20000, 60000, 100000];

function env(string $name): string {
    return required_env($name, 'run bench/run.sh');
}

$primaries = array_values(array_filter(
    explode(',', env('RCS_SEEDS')),
    fn($addr) => Resp::send($addr, ['ROLE'])[0] === 'master',
));
$seed_path = implode('&', array_map(fn($addr) => "seed[]=$addr", $primaries));
$files_dir = sys_get_temp_dir() . '/rcs-bench-files';
@mkdir($files_dir);

// Every contender runs in a process of its own, loading only its own extension.
$common = [
    'session.use_cookies' => '0', 'session.use_only_cookies' => '0', 'session.cache_limiter' => '',
    'session.use_strict_mode' => '0', 'session.lazy_write' => '1', 'session.gc_probability' => '0',
];
$phpredis = ['igbinary', 'redis'];
// phpredis's polling as phpredis 6 ships it (20 ms); enough retries never to give up here.
$phpredis_lock = ['redis.session.locking_enabled' => '1', 'redis.session.lock_wait_time' => '20000',
    'redis.session.lock_retries' => '1000', 'redis.session.lock_expire' => '30'];
$ours = ['load' => [env('RCS_EXT')], 'nodes' => $primaries, 'ini' => [
    'session.save_handler' => 'rediscluster', 'session.save_path' => $seed_path]];
// The commands each contender sends in a warm cycle (for server µs), and
// those its scripts run inside them.
$plain = [['get', 'set', 'setex', 'expire', 'getex'], []];
$contenders = [
    // A free lock is taken with plain SET NX + GET; the write script runs GET and SET inside.
    'ours locked' => array_merge_recursive($ours, ['ini' => ['redis.session.locking_enabled' => '1']])
        + ['server' => [['evalsha', 'eval', 'set', 'get', 'getex'], ['get', 'set']]],
    'ours unlocked' => $ours + ['server' => $plain],
    'phpredis cluster' => ['load' => $phpredis, 'nodes' => $primaries, 'ini' => [
        'session.save_handler' => 'rediscluster', 'session.save_path' => $seed_path], 'server' => $plain],
    'phpredis cluster persistent' => ['load' => $phpredis, 'nodes' => $primaries, 'ini' => [
        'session.save_handler' => 'rediscluster', 'session.save_path' => "$seed_path&persistent=1",
        'redis.clusters.cache_slots' => '1'], 'server' => $plain],
    // Its unlock script runs GET and DEL inside.
    'phpredis standalone locked' => ['load' => $phpredis, 'nodes' => [env('RCS_STANDALONE')], 'ini' => [
        'session.save_handler' => 'redis', 'session.save_path' => 'tcp://' . env('RCS_STANDALONE')] + $phpredis_lock,
        'server' => [['get', 'set', 'setex', 'expire', 'evalsha', 'eval'], ['get']]],
    'files' => ['load' => [], 'nodes' => [], 'ini' => [
        'session.save_handler' => 'files', 'session.save_path' => $files_dir]],
];
$locked = ['ours locked'];
if (getenv('RCS_EXT_PREVIOUS')) {
    $contenders['previous release locked'] = ['load' => [getenv('RCS_EXT_PREVIOUS')]] + $contenders['ours locked'];
    $locked[] = 'previous release locked';
}

/** The command line of a worker for $contender, optionally under callgrind. */
function worker_command(array $contender, string $mode, array $job, bool $callgrind = false): array {
    global $common;
    $cmd = $callgrind ? ['valgrind', '--tool=callgrind', '--callgrind-out-file=/dev/null'] : [];
    array_push($cmd, PHP_BINARY, '-n');
    foreach ($contender['load'] as $ext) array_push($cmd, '-d', "extension=$ext");
    foreach ($contender['ini'] + $common as $k => $v) array_push($cmd, '-d', "$k=\"$v\"");
    $job += ['nodes' => $contender['nodes']];
    array_push($cmd, __DIR__ . '/worker.php', $mode, json_encode($job));
    return $cmd;
}

function spawn(array $cmd): array {
    $proc = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
    return [$proc, $pipes];
}

/** Waits for a worker; returns its JSON result, plus callgrind's instruction count if it ran under it. */
function finish(array $worker): array {
    [$proc, $pipes] = $worker;
    $out = stream_get_contents($pipes[1]);
    $err = stream_get_contents($pipes[2]);
    proc_close($proc);
    $result = json_decode(trim($out), true);
    if (!is_array($result)) {
        throw new RuntimeException("worker failed:\n$out\n$err");
    }
    if (preg_match('/Collected : (\d+)/', $err, $m)) $result['instructions'] = (int)$m[1];
    $warnings = trim(preg_replace('/^==\d+==.*$/m', '', $err));
    if ($warnings !== '' || $result['failures'] > 0) {
        fwrite(STDERR, "worker reported {$result['failures']} failures: $warnings\n");
    }
    return $result;
}

function run(array $contender, string $mode, array $job, bool $callgrind = false): array {
    return finish(spawn(worker_command($contender, $mode, $job, $callgrind)));
}

function new_sid(): string {
    return 'bench' . bin2hex(random_bytes(12));
}

function median(array $values): float {
    sort($values);
    $n = count($values);
    return $n % 2 ? $values[intdiv($n, 2)] : ($values[$n / 2 - 1] + $values[$n / 2]) / 2;
}

function percentile(array $values, float $p): float {
    sort($values);
    return $values[min(count($values) - 1, (int)floor($p * count($values)))];
}

/** The session's counter "n", read back through the contender's own handler. */
function session_count(array $contender, string $sid): int {
    $code = "session_id('$sid'); session_start(['read_and_close' => true]); echo \$_SESSION['n'] ?? 0;";
    $cmd = worker_command($contender, 'cycles', []);
    array_splice($cmd, -3, 3, ['-r', $code]);
    [$proc, $pipes] = spawn($cmd);
    $out = stream_get_contents($pipes[1]);
    proc_close($proc);
    return (int)$out;
}

/**
 * Server time in µs spent on the calls a client sends, over $nodes, from INFO
 * commandstats: $sent names the commands it sends itself. A script's usec
 * already includes the commands run inside it, which Redis also counts under
 * their own names: those ($inner, per script call) are taken out again.
 */
function server_usec(array $nodes, array $sent, array $inner): array {
    $usec = $calls = [];
    foreach ($nodes as $addr) {
        preg_match_all('/^cmdstat_([a-z|]+):calls=(\d+),usec=(\d+)/m', Resp::send($addr, ['INFO', 'commandstats']), $m, PREG_SET_ORDER);
        foreach ($m as [, $name, $n, $us]) {
            $calls[$name] = ($calls[$name] ?? 0) + (int)$n;
            $usec[$name] = ($usec[$name] ?? 0) + (int)$us;
        }
    }
    $total = 0;
    foreach ($sent as $name) $total += $usec[$name] ?? 0;
    $scripts = ($calls['evalsha'] ?? 0) + ($calls['eval'] ?? 0);
    foreach ($inner as $name) {
        if (!empty($calls[$name])) $total -= $scripts * $usec[$name] / $calls[$name];
    }
    return [$total, array_sum(array_intersect_key($calls, array_flip($sent)))];
}

/** CPU µs (user + sys, INFO cpu) the servers at $nodes have used so far. */
function cpu_usec(array $nodes): float {
    $total = 0.0;
    foreach ($nodes as $addr) {
        preg_match_all('/^used_cpu_(?:user|sys):([0-9.]+)/m', Resp::send($addr, ['INFO', 'cpu']), $m);
        $total += array_sum(array_map('floatval', $m[1])) * 1e6;
    }
    return $total;
}

$table = [];
$log = fn(string $what) => fwrite(STDERR, "bench: $what\n");

// 1 + 3. Warm one-process cycles: cycles/s (median of $runs, contenders interleaved) and round trips.
$log("one-process cycles, $runs x $cycles per contender");
$speeds = $cpus = [];
for ($r = 0; $r < $runs; $r++) {
    foreach ($contenders as $who => $contender) {
        foreach ($contender['nodes'] as $addr) Resp::send($addr, ['CONFIG', 'RESETSTAT']);
        $cpu = cpu_usec($contender['nodes']);
        $result = run($contender, 'cycles', ['sid' => new_sid(), 'kind' => 'changed', 'n' => $cycles, 'warm' => 5]);
        if ($contender['nodes']) $cpus[$who][] = (cpu_usec($contender['nodes']) - $cpu) / ($cycles + 5);
        if ($r === $runs - 1 && isset($contender['server'])) {
            [$usec] = server_usec($contender['nodes'], ...$contender['server']);
            $table['server µs / request (commandstats)'][$who] = round($usec / ($cycles + 5), 2);
        }
        $speeds[$who][] = $cycles / $result['seconds'];
        $table['round trips / request, changed'][$who] = round($result['reads'], 2);
        $table['slot-map fetches / 1000 requests'][$who] = round($result['slot_maps'] * 1000);
    }
}
foreach ($speeds as $who => $values) $table['cycles/s, one process (median)'][$who] = round(median($values));
foreach ($cpus as $who => $values) $table['primaries CPU µs / request (INFO cpu, median)'][$who] = round(median($values), 1);
foreach (['unchanged' => 'unchanged (lazy_write)', 'read_and_close' => 'read_and_close'] as $kind => $label) {
    foreach (['ours locked', 'ours unlocked', 'phpredis cluster'] as $who) {
        $result = run($contenders[$who], 'cycles', ['sid' => new_sid(), 'kind' => $kind, 'n' => $cycles, 'warm' => 5]);
        $table["round trips / request, $label"][$who] = round($result['reads'], 2);
    }
}

// 2. Client CPU: callgrind instructions per warm cycle, from the difference of two cycle counts.
$log("callgrind, {$callgrind[0]} and {$callgrind[1]} cycles per contender");
foreach ($contenders as $who => $contender) {
    $sid = new_sid();
    $instructions = array_map(fn($n) => run($contender, 'cycles',
        ['sid' => $sid, 'kind' => 'changed', 'n' => $n, 'warm' => 3, 'nodes' => []], true)['instructions'], $callgrind);
    $table['instructions / request (callgrind)'][$who] =
        round(($instructions[1] - $instructions[0]) / ($callgrind[1] - $callgrind[0]));
}

// The counter updates of a request, with the counters per process only or
// also in the pool's shared memory (what rediscluster_session_metrics() reads).
$log('callgrind, metrics counters');
foreach (['local' => 'per process only', 'shared' => 'with the pool-wide shared counters'] as $mode => $label) {
    $counts = [];
    foreach ($callgrind as $n) {
        $cmd = ['valgrind', '--tool=callgrind', '--callgrind-out-file=/dev/null', env('RCS_METRICS_COST'), $mode, (string)$n];
        [$proc, $pipes] = spawn($cmd);
        $err = stream_get_contents($pipes[2]);
        proc_close($proc);
        preg_match('/Collected : (\d+)/', $err, $m);
        $counts[] = (int)$m[1];
    }
    $table["metrics: instructions / request, $label"]['ours locked'] =
        round(($counts[1] - $counts[0]) / ($callgrind[1] - $callgrind[0]));
}

// 4 + 5. Contention on one session; hand-over latency from two processes taking turns.
$contended = [...$locked, 'phpredis standalone locked', 'files', 'ours unlocked', 'phpredis cluster'];
$log("contention: {$contention['processes']} x {$contention['increments']}, {$contention['runs']} runs");
/** Starts $processes workers on one session together; returns [events per process, seconds, round trips, count]. */
$contend = function (array $contender, int $processes, int $increments, int $hold_us) {
    $sid = new_sid();
    $reads = resp_reads_processed($contender['nodes']);
    $job = ['sid' => $sid, 'n' => $increments, 'hold_us' => $hold_us, 'start_ns' => hrtime(true) + 300_000_000];
    $workers = [];
    for ($p = 0; $p < $processes; $p++) $workers[] = spawn(worker_command($contender, 'contend', $job));
    $events = array_map(fn($w) => finish($w)['events'], $workers);
    $reads = resp_reads_processed($contender['nodes']) - $reads - count($contender['nodes']);
    $all = array_merge(...$events);
    $seconds = (max(array_column($all, 3)) - min(array_column($all, 0))) / 1e9;
    return [$events, $seconds, $reads, session_count($contender, $sid)];
};
foreach ($contended as $who) {
    $walls = $p99s = $lost = $trips = [];
    for ($r = 0; $r < $contention['runs']; $r++) {
        [$events, $seconds, $reads, $count] = $contend($contenders[$who], $contention['processes'], $contention['increments'], 0);
        $total = $contention['processes'] * $contention['increments'];
        $walls[] = $seconds;
        $lost[] = $total - $count;
        $trips[] = $reads / $total;
        $p99s[] = max(array_map(fn($e) => percentile(array_map(fn($c) => $c[3] - $c[0], $e), 0.99), $events)) / 1e6;
    }
    $table['contention: lost updates (worst run)'][$who] = max($lost);
    $table['contention: wall s (median)'][$who] = round(median($walls), 3);
    $table['contention: worst process p99 ms (median)'][$who] = round(median($p99s), 1);
    if ($contenders[$who]['nodes']) $table['contention: round trips / request'][$who] = round(median($trips), 2);
}
$log('hand-over latency: 2 processes taking turns, 2 ms hold');
foreach ([...$locked, 'phpredis standalone locked', 'files'] as $who) {
    [$events] = $contend($contenders[$who], 2, $size(100, 10), 2000);
    $turns = [];
    foreach ($events as $p => $list) foreach ($list as $e) $turns[] = [$p, ...$e];
    usort($turns, fn($a, $b) => $a[2] <=> $b[2]);
    $latencies = [];
    for ($i = 1; $i < count($turns); $i++) {
        [$p, $call, $acquired] = $turns[$i];
        [$prev, , , $release] = $turns[$i - 1];
        // Only a process that was already waiting when the other began its release.
        if ($p !== $prev && $call < $release) $latencies[] = ($acquired - $release) / 1e6;
    }
    $table['hand-over p50 ms'][$who] = $latencies ? round(percentile($latencies, 0.5), 2) : 'n/a';
    $table['hand-over p90 ms'][$who] = $latencies ? round(percentile($latencies, 0.9), 2) : 'n/a';
}

// 6. Cold worker: the first request of a fresh process (connect and slot map included),
// timed inside the process; and the connections it opens, counted by every node.
$cold_runs = $size(21, 2);
$clusters = ['6 nodes' => explode(',', env('RCS_SEEDS'))];
if (getenv('RCS_SEEDS16')) $clusters['16 nodes'] = explode(',', getenv('RCS_SEEDS16'));
foreach ($clusters as $name => $all_nodes) {
    $log("cold workers, $name: $cold_runs fresh processes per contender, interleaved");
    $primaries_here = array_values(array_filter($all_nodes, fn($addr) => Resp::send($addr, ['ROLE'])[0] === 'master'));
    $path_here = implode('&', array_map(fn($addr) => "seed[]=$addr", $primaries_here));
    $cold = $name === '6 nodes' ? $contenders : [
        'ours locked' => ['nodes' => $primaries_here] + array_replace_recursive($contenders['ours locked'],
            ['ini' => ['session.save_path' => $path_here]]),
        'ours unlocked' => ['nodes' => $primaries_here] + array_replace_recursive($contenders['ours unlocked'],
            ['ini' => ['session.save_path' => $path_here]]),
        'phpredis cluster' => ['nodes' => $primaries_here] + array_replace_recursive($contenders['phpredis cluster'],
            ['ini' => ['session.save_path' => $path_here]]),
    ];
    $times = $connections = [];
    resp_connections_received($all_nodes);   // Resp's own connections, once
    // A primary runs a script for the first time by EVAL (NOSCRIPT first): load
    // ours on every primary beforehand, so that a cold server is not timed.
    for ($i = 0; $i < 3 * count($primaries_here); $i++) run($cold['ours locked'], 'cold', ['sid' => new_sid()]);
    for ($i = 0; $i < $cold_runs; $i++) {
        foreach ($cold as $who => $contender) {
            $here = (bool)array_intersect($contender['nodes'], $all_nodes);
            $before = $here ? resp_connections_received($all_nodes) : 0;
            $times[$who][] = run($contender, 'cold', ['sid' => new_sid()])['seconds'] * 1000;
            if ($here) $connections[$who][] = resp_connections_received($all_nodes) - $before;
        }
    }
    foreach ($times as $who => $list) {
        $table["first request of a process, $name, p50 ms"][$who] = round(median($list), 2);
        if (isset($connections[$who])) {
            $table["connections of a fresh process, $name, max"][$who] = max($connections[$who]);
        }
    }
}

// 7. FPM workers: nginx + php-fpm serving sessions spread over every primary
// of the largest cluster; the connections the cluster accepted, per worker.
$fpm = ['workers' => 4, 'requests' => $size(400, 40), 'sessions' => $size(64, 8)];
$fpm_cluster = array_key_last($clusters);
$fpm_nodes = $clusters[$fpm_cluster];
$fpm_path = implode('&', array_map(fn($addr) => "seed[]=$addr",
    array_filter($fpm_nodes, fn($addr) => Resp::send($addr, ['ROLE'])[0] === 'master')));
$fpm_row = "connections per FPM worker, $fpm_cluster, {$fpm['workers']} workers x "
    . ($fpm['requests'] / $fpm['workers']) . " requests";
$log("php-fpm: {$fpm['workers']} workers, {$fpm['requests']} requests on {$fpm['sessions']} sessions, $fpm_cluster");
$fpm_sids = array_map(fn($i) => new_sid(), range(1, $fpm['sessions']));
$cookies = array_map(fn($i) => 'PHPSESSID=' . $fpm_sids[$i % $fpm['sessions']], range(0, $fpm['requests'] - 1));
foreach (['ours locked' => ['redis.session.locking_enabled=1'], 'phpredis cluster' => []] as $who => $ini) {
    $dir = sys_get_temp_dir() . '/rcs-bench-fpm';
    $fpm_sh = __DIR__ . '/../scripts/fpm.sh';
    putenv($who === 'phpredis cluster' ? 'FPM_WITHOUT_EXTENSION=1' : 'FPM_WITHOUT_EXTENSION');
    exec(implode(' ', array_map('escapeshellarg', [$fpm_sh, 'start', $dir, env('RCS_FPM_PORT'), __DIR__ . '/fpm-app',
        $fpm['workers'], "session.save_path=\"$fpm_path\"", 'session.use_strict_mode=0', ...$ini])) . ' 2>&1', $out, $status);
    if ($status !== 0) throw new RuntimeException("fpm.sh start failed:\n" . implode("\n", $out));
    try {
        $before = resp_connections_received($fpm_nodes);
        $results = http_many((int)env('RCS_FPM_PORT'), array_fill(0, $fpm['requests'], '/'), $cookies, $fpm['workers']);
        $accepted = resp_connections_received($fpm_nodes) - $before;
        $failed = count(array_filter($results, fn($result) => $result[0] !== 200));
        if ($failed) fwrite(STDERR, "$who: $failed failed FPM requests\n");
        $table[$fpm_row][$who] = round($accepted / $fpm['workers'], 1);
    } finally {
        exec(implode(' ', array_map('escapeshellarg', [$fpm_sh, 'stop', $dir])));
    }
}
putenv('FPM_WITHOUT_EXTENSION');

// 8. Memory: resident size of one process across many locked cycles.
$log('memory: ' . end($memory_checkpoints) . ' locked cycles in one process');
$rss = run($contenders['ours locked'], 'memory', ['sid' => new_sid(), 'checkpoints' => $memory_checkpoints])['rss_kib'];
$table['RSS KiB after ' . implode(' / ', $memory_checkpoints) . ' cycles']['ours locked'] = implode(' / ', $rss);
$table['.so size KiB']['ours locked'] = round(filesize(env('RCS_EXT')) / 1024);

// The table, then the targets as ratios from this same run.
$who_all = array_keys($contenders);
echo '| scenario | ', implode(' | ', $who_all), " |\n|---|", str_repeat('---|', count($who_all)), "\n";
foreach ($table as $row => $values) {
    echo "| $row | ", implode(' | ', array_map(fn($w) => $values[$w] ?? '', $who_all)), " |\n";
}
$ratio = fn($a, $b) => $b ? round($a / $b, 2) : 'n/a';
$ins = $table['instructions / request (callgrind)'];
$cps = $table['cycles/s, one process (median)'];
$wall = $table['contention: wall s (median)'];
echo "\nRatios (same run):\n";
echo '- instructions, ours locked / phpredis cluster unlocked: ', $ratio($ins['ours locked'], $ins['phpredis cluster']), " (target <= 0.2)\n";
echo '- instructions, ours locked / phpredis standalone locked: ', $ratio($ins['ours locked'], $ins['phpredis standalone locked']), " (stretch <= 1)\n";
echo '- cycles/s, ours locked / phpredis cluster: ', $ratio($cps['ours locked'], $cps['phpredis cluster']), " (target >= 2)\n";
echo '- cycles/s, ours locked / phpredis cluster persistent: ', $ratio($cps['ours locked'], $cps['phpredis cluster persistent']), " (target >= 1)\n";
echo '- contention wall, ours locked / phpredis standalone locked: ', $ratio($wall['ours locked'], $wall['phpredis standalone locked']), " (target <= 0.5)\n";
foreach (array_keys($clusters) as $name) {
    $cold = $table["first request of a process, $name, p50 ms"];
    echo "- first request, $name, ours locked / phpredis cluster: ", $ratio($cold['ours locked'], $cold['phpredis cluster']), " (target <= 1.1)\n";
}
