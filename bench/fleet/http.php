<?php
// Locked requests behind nginx + php-fpm: requests per second, p99 and each
// primary's CPU per request of this extension locked and unlocked, phpredis's
// cluster handler (persistent=0 and 1, unlocked: it has no lock) and its
// standalone handler locked (on a plain Redis server), in rounds that
// interleave the contenders, each round opening with an idle window whose
// server CPU (the drift: cron, cluster bus, replication pings) is subtracted.
// Started by `bench/fleet.sh --http [--smoke]`, which installs, provides the
// environment of bench/fleet/fleet.php plus FLEET_STANDALONE_PORT, and cleans up.
// HTTP_ROUNDS (default 5) and HTTP_WINDOW (seconds, default 10) size it.
// It is a benchmark: nothing is asserted, figures are reported.
declare(strict_types=1);

$smoke = in_array('--smoke', $argv, true);
$root = getenv('FLEET_ROOT');
$base = (int)getenv('FLEET_BASE_PORT');
$http_port = (int)getenv('FLEET_HTTP_PORT');
$standalone_port = (int)getenv('FLEET_STANDALONE_PORT');
$children = (int)getenv('FLEET_CHILDREN');
$clients = (int)getenv('FLEET_CLIENTS');
$work = getenv('FLEET_DIR');
if (!$root || !$base || !$http_port || !$standalone_port || !$children || !$clients || !$work) {
    fwrite(STDERR, "run bench/fleet.sh --http\n");
    exit(1);
}
$setting = fn(string $name, string $default) => getenv($name) !== false && getenv($name) !== '' ? getenv($name) : $default;
$rounds = $smoke ? 1 : (int)$setting('HTTP_ROUNDS', '5');
$window = $smoke ? 1.0 : (float)$setting('HTTP_WINDOW', '10');
$warm = $smoke ? 0.3 : 2.0;
if ($rounds < 1 || $window <= 0) {
    fwrite(STDERR, "HTTP_ROUNDS must be at least 1 and HTTP_WINDOW a number of seconds above 0\n");
    exit(1);
}
// The load samples the primaries' clients every $sample_every s: once a window is enough here.
$sample_every = 1000.0;
$fpm_dir = "$work/fpm";
@mkdir($work, 0777, true);

require __DIR__ . '/common.php';

$nodes = array_map(fn($i) => new Node('127.0.0.1:' . ($base + $i)), range(0, 5));
$standalone = new Node("127.0.0.1:$standalone_port");
$primaries = [];
$cluster_up = false;

/** CPU seconds of every server (the cluster's nodes and the plain one) by address, with the processes' and the time. */
function cpu_snapshot(): array {
    global $nodes, $standalone;
    $servers = [];
    foreach ([...$nodes, $standalone] as $n) $servers[$n->addr] = server_cpu($n->info('cpu'));
    return ['servers' => $servers] + machine_snapshot();
}

$median = function (array $values): float {
    sort($values);
    $n = count($values);
    return $n % 2 ? (float)$values[intdiv($n, 2)] : ($values[$n / 2 - 1] + $values[$n / 2]) / 2;
};
$spread = fn(array $values, string $format) => sprintf("{$format} ({$format}–{$format})", $median($values), min($values), max($values));

$t_start = microtime(true);
$windows = [];   // contender => list of per-round figures
$drift = [];     // round => server address => CPU seconds per second, idle
try {
    cluster_start();
    $seeds = implode('&', array_map(fn($n) => "seed[]={$n->addr}", $primaries));
    $cluster_path = fn(string $prefix, string $extra = '') => "session.save_path=\"$seeds&timeout=1&read_timeout=1&prefix=$prefix$extra\"";
    // Each: [this extension loaded?, the cluster's primaries (or the plain server) serve it, INI settings for a key prefix].
    $contenders = [
        'ours locked' => [true, true, fn($p) => [$cluster_path($p), 'redis.session.locking_enabled=1']],
        'ours unlocked' => [true, true, fn($p) => [$cluster_path($p), 'redis.session.locking_enabled=0']],
        'phpredis cluster persistent=0' => [false, true, fn($p) => [$cluster_path($p)]],
        'phpredis cluster persistent=1' => [false, true, fn($p) => [$cluster_path($p, '&persistent=1'), 'redis.clusters.cache_slots=1']],
        // phpredis 6's polling (lock_wait_time 20 ms) and enough retries never to give up here.
        'phpredis standalone locked' => [false, false, fn($p) => [
            'session.save_handler=redis', "session.save_path=\"tcp://{$standalone->addr}?prefix=$p&timeout=1&read_timeout=1\"",
            'redis.session.locking_enabled=1', 'redis.session.lock_wait_time=20000', 'redis.session.lock_retries=1000',
            'redis.session.lock_expire=30']],
    ];
    $names = array_keys($contenders);
    for ($round = 0; $round < $rounds; $round++) {
        // The drift: the servers' CPU over a window as long, with nothing served.
        say(sprintf('round %d/%d: idle window (%.0f s so far)', $round + 1, $rounds, microtime(true) - $t_start));
        $before = cpu_snapshot();
        usleep((int)($window * 1e6));
        $after = cpu_snapshot();
        foreach ($after['servers'] as $addr => $cpu) {
            $drift[$round][$addr] = ($cpu - $before['servers'][$addr]) / ($after['t'] - $before['t']);
        }
        // Each round in another order, so that a slow moment of the machine does not always hit the same contender.
        $order = [...array_slice($names, $round % count($names)), ...array_slice($names, 0, $round % count($names))];
        foreach ($order as $name) {
            [$ours, $on_cluster, $ini] = $contenders[$name];
            say(sprintf('round %d/%d: %s (%.0f s so far)', $round + 1, $rounds, $name, microtime(true) - $t_start));
            $prefix = 'HTTP' . $round . '_' . array_search($name, $names, true) . ':';
            $settings = [...$ini($prefix), 'session.gc_probability=0'];
            sh(implode(' ', array_map('escapeshellarg', ["$root/scripts/fpm.sh", 'start', $fpm_dir, (string)$http_port,
                __DIR__, (string)$children, ...$settings])), $ours ? [] : ['FPM_WITHOUT_EXTENSION' => '1']);
            $before = null;
            $load = load([[$warm + $window, true]], $warm, function () use (&$before) { $before = cpu_snapshot(); });
            $after = cpu_snapshot();
            fpm_stop();
            $done = max(1, $load['done_since_start']);
            $elapsed = $after['t'] - $before['t'];
            // µs per request a server spent beyond its idle drift over the same time.
            $cost = fn(Node $n) => (($after['servers'][$n->addr] - $before['servers'][$n->addr]) - $drift[$round][$n->addr] * $elapsed) * 1e6 / $done;
            $served_by = $on_cluster ? $primaries : [$standalone];
            $replicas = $on_cluster ? array_filter($nodes, fn($n) => !in_array($n, $primaries, true)) : [];
            $per_primary = array_map($cost, $served_by);
            $part = fn(string $key) => ($after[$key] - $before[$key]) * 1e6 / $done;
            $windows[$name][$round] = [
                'req/s' => $load['window_ok'] / max(0.001, $load['on_seconds']),
                'p99' => percentile($load['lat'], 0.99) / 1000,
                'failed' => $load['failed'],
                'requests' => $load['ok'] + $load['failed'],
                'primaries' => array_sum($per_primary),
                'per_primary' => $per_primary,
                'replicas' => array_sum(array_map($cost, $replicas)),
                'fpm' => $part('fpm_cpu'),
                'nginx' => $part('nginx_cpu'),
                'load tool' => $part('client_cpu'),
                'machine' => ($after['machine'][0] - $before['machine'][0]) / 100 * 1e6 / $done,
                'busy' => ($after['machine'][0] - $before['machine'][0]) / max(1, $after['machine'][1] - $before['machine'][1]),
                'steal' => ($after['machine'][2] - $before['machine'][2]) / max(1, $after['machine'][1] - $before['machine'][1]),
            ];
        }
    }
} finally {
    // bench/fleet.sh's trap stops them too.
    @exec(escapeshellarg("$root/scripts/fpm.sh") . ' stop ' . escapeshellarg($fpm_dir) . ' 2>&1');
    if ($cluster_up) @exec(escapeshellarg("$root/scripts/cluster.sh") . " stop redis $base 2>&1");
}

$column = fn(string $name, string $key) => array_column($windows[$name], $key);
$rows = [];
foreach ($windows as $name => $w) {
    $per_primary = array_map(fn($j) => sprintf('%.0f', $median(array_map(fn($r) => $r['per_primary'][$j], $w))), array_keys($w[0]['per_primary']));
    $rows[] = [
        'contender' => $name,
        'req/s, median (min–max)' => $spread($column($name, 'req/s'), '%.0f'),
        'p99 ms' => $spread($column($name, 'p99'), '%.1f'),
        'failed' => array_sum($column($name, 'failed')) . ' / ' . array_sum($column($name, 'requests')),
        'primaries CPU µs/req (sum)' => $spread($column($name, 'primaries'), '%.0f'),
        'each primary µs/req' => implode(' / ', $per_primary),
        'replicas CPU µs/req' => $name === 'phpredis standalone locked' ? '–' : sprintf('%.0f', $median($column($name, 'replicas'))),
        'php-fpm CPU µs/req' => sprintf('%.0f', $median($column($name, 'fpm'))),
        'nginx µs/req' => sprintf('%.0f', $median($column($name, 'nginx'))),
        'load tool µs/req' => sprintf('%.0f', $median($column($name, 'load tool'))),
        'machine CPU µs/req' => sprintf('%.0f', $median($column($name, 'machine'))),
        'machine busy, steal' => sprintf('%.0f%%, %.0f%%', 100 * $median($column($name, 'busy')), 100 * $median($column($name, 'steal'))),
    ];
}
// Ours locked against each of phpredis's, round by round (the same round: the same state of the machine).
$ratio_rows = [];
foreach (['phpredis cluster persistent=0', 'phpredis cluster persistent=1', 'phpredis standalone locked'] as $other) {
    foreach (['req/s' => 'requests/s, ours locked ÷ ', 'primaries' => 'primaries\' CPU µs/req, ours locked ÷ '] as $key => $label) {
        $per_round = array_map(fn($ours, $theirs) => fdiv($ours, $theirs), $column('ours locked', $key), $column($other, $key));
        $ratio_rows[] = ['ratio' => $label . $other, 'median (min–max)' => $spread($per_round, '%.2f'),
            'per round' => implode(', ', array_map(fn($v) => sprintf('%.2f', $v), $per_round))];
    }
}
$drift_us = array_map(fn($addr) => sprintf('%.0f', $median(array_column($drift, $addr)) * 1e6),
    array_map(fn($n) => $n->addr, [...$primaries, $standalone]));

$out = sprintf("## Locked requests behind nginx + php-fpm%s\n\n", $smoke ? ' (--smoke: tiny windows, the figures mean nothing)' : '');
$out .= sprintf("php-fpm: %d static children, %d concurrent clients each with its own cookie and one request in flight, nginx, %d cores; "
    . "Redis %s, a cluster of 3 primaries + 3 replicas and a plain server; %d rounds, each an idle window and the %d contenders "
    . "in a rotated order, each %g s warm-up and %g s measured. Idle drift subtracted (median, µs of CPU per second): primaries %s, plain server %s.\n\n",
    $children, $clients, (int)trim((string)shell_exec('nproc')),
    trim((string)shell_exec("redis-server --version | sed 's/.*v=\\([^ ]*\\).*/\\1/'")),
    $rounds, count($windows), $warm, $window, implode(' / ', array_slice($drift_us, 0, -1)), end($drift_us));
$out .= table($rows) . "\n" . table($ratio_rows) . "\n";
$out .= sprintf("Total %.0f s.\n", microtime(true) - $t_start);
file_put_contents("$work/http.md", $out);
echo $out;
