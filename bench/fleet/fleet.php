<?php
// The fleet benchmark: a php-fpm pool of many static children behind nginx, as
// many concurrent clients each keeping its own session cookie, on a local
// 3-primary + 3-replica cluster; every run side by side in one table.
// Started by bench/fleet.sh, which installs, provides these and cleans up:
//   FLEET_ROOT the checkout, FLEET_BASE_PORT the cluster's first port,
//   FLEET_HTTP_PORT nginx's port, FLEET_CHILDREN, FLEET_CLIENTS, FLEET_DIR (work dir)
//   php -n -d extension=curl bench/fleet/fleet.php [--smoke]
// It is a benchmark: nothing is asserted, figures are reported.
declare(strict_types=1);

$smoke = in_array('--smoke', $argv, true);
$root = getenv('FLEET_ROOT');
$base = (int)getenv('FLEET_BASE_PORT');
$http_port = (int)getenv('FLEET_HTTP_PORT');
$children = (int)getenv('FLEET_CHILDREN');
$clients = (int)getenv('FLEET_CLIENTS');
$work = getenv('FLEET_DIR');
if (!$root || !$base || !$http_port || !$children || !$clients || !$work) {
    fwrite(STDERR, "run bench/fleet.sh\n");
    exit(1);
}
// Seconds: [full, smoke].
$size = fn($full, $small) => $smoke ? $small : $full;
$warm = $size(5.0, 0.3);          // load before the measured window
$recycle_warm = $size(10.0, 0.3); // pm.max_requests: past the first generation (256 × 50 requests)
$measure = $size(8.0, 1.0);       // the measured window
$settle = $size(2.0, 0.3);        // after the load, before the idle sample
$bursts = $size(4, 2);            // the timeout scenario: bursts of $burst s, pauses of $pause s
$burst = $size(3.0, 0.5);
// Longer than the servers' `timeout 1`: Redis closes a client idle for more
// than 1 s by its clock of whole seconds, checked once a second, so between
// 1 and 3 s after its last command; 3 s pauses close every idle connection.
$pause = $size(3.0, 2.0);
$sample_every = $size(0.5, 0.25);
$fresh_cluster = getenv('FLEET_FRESH_CLUSTER') !== false ? getenv('FLEET_FRESH_CLUSTER') === '1' : !$smoke;
$max_requests = 50;
$maxclients = 64;
$fpm_dir = "$work/fpm";
@mkdir("$work/logs", 0777, true);

require __DIR__ . '/common.php';

$nodes = array_map(fn($i) => new Node('127.0.0.1:' . ($base + $i)), range(0, 5));
$primaries = [];
$cluster_up = false;

/** Undoes a scenario's settings where the cluster is kept between runs (--smoke). */
function cluster_reset(): void {
    global $nodes, $primaries;
    foreach ($nodes as $n) $n->cmd('CONFIG', 'SET', 'timeout', '0', 'maxclients', '10000');
    foreach ($primaries as $n) $n->cmd('FLUSHALL');
}

function set_all(string $name, string $value): void {
    global $nodes;
    foreach ($nodes as $n) {
        $r = $n->cmd('CONFIG', 'SET', $name, $value);
        if ($r !== 'OK') throw new RuntimeException("CONFIG SET $name $value on {$n->addr}: " . ($r->message ?? ''));
    }
}

/** Proportional set size of the php-fpm master and children, MB. */
function fpm_pss(string $pid_file): array {
    [$master, $stats] = tree_stats($pid_file);
    $kb = 0;
    foreach (array_keys($stats) as $pid) {
        if (preg_match('/^Pss:\s+(\d+)/m', (string)@file_get_contents("/proc/$pid/smaps_rollup"), $m)) $kb += (int)$m[1];
    }
    return [$kb / 1024, count($stats) - (isset($stats[$master]) ? 1 : 0)];
}

/** Counters to difference over the measured window. */
function snapshot(): array {
    global $nodes, $primaries;
    $s = ['slots' => 0, 'shards' => 0, 'conns' => 0, 'server_cpu' => 0.0, 'replica_cpu' => 0.0, 'own' => 0];
    foreach ($nodes as $n) {
        $info = $n->info('commandstats', 'stats', 'cpu');
        preg_match('/calls=(\d+)/', $info['cmdstat_cluster|slots'] ?? '', $m);
        $s['slots'] += (int)($m[1] ?? 0);
        preg_match('/calls=(\d+)/', $info['cmdstat_cluster|shards'] ?? '', $m);
        $s['shards'] += (int)($m[1] ?? 0);
        if (in_array($n, $primaries, true)) {
            $s['conns'] += (int)$info['total_connections_received'];
            $s['server_cpu'] += server_cpu($info);
            $s['own'] += $n->connects;
        } else {
            $s['replica_cpu'] += server_cpu($info);
        }
    }
    return $s + machine_snapshot();
}

/** The session's counter as stored: follows MOVED from any primary. */
function stored_n(string $key): int {
    global $primaries, $nodes;
    $node = $primaries[0];
    for ($hop = 0; $hop < 5; $hop++) {
        $v = $node->cmd('GET', $key);
        if ($v instanceof RespError && preg_match('/^MOVED \d+ (\S+)/', $v->message, $m)) {
            foreach ($nodes as $n) if ($n->addr === $m[1]) $node = $n;
            continue;
        }
        if ($v instanceof RespError) throw new RuntimeException("GET $key: {$v->message}");
        return $v !== null && preg_match('/(?:^|;|\})n\|i:(\d+);/', $v, $mm) ? (int)$mm[1] : 0;
    }
    throw new RuntimeException("GET $key: too many redirects");
}

/** This extension's pool counters from the app's /metrics (empty for phpredis). */
function pool_metrics(): array {
    global $http_port;
    $ch = curl_init("http://127.0.0.1:$http_port/metrics");
    curl_setopt_array($ch, [CURLOPT_RETURNTRANSFER => true, CURLOPT_TIMEOUT => 10]);
    $text = (string)curl_exec($ch);
    curl_close($ch);
    preg_match_all('/^rediscluster_session_(\w+?)(?:_total)?(?:\{\w+="(\w+)"\})? ([0-9.e+]+)$/m', $text, $m, PREG_SET_ORDER);
    $out = [];
    foreach ($m as [, $name, $label, $value]) $out[$name . ($label !== '' ? ".$label" : '')] = (float)$value;
    return $out;
}

/** PHP warnings and errors the workers logged: [count, [message => count]]. */
function fpm_warnings(string $log, int $from): array {
    $count = 0; $kinds = [];
    foreach (explode("\n", (string)file_get_contents($log, false, null, $from)) as $line) {
        if (!preg_match('/PHP (Warning|Fatal error|Notice|Deprecated):\s*(.*)$/', $line, $m)) continue;
        $count++;
        // One kind per message: numbers, ports, pids and session ids taken out.
        $message = preg_replace('/ in \/\S+(?: on line \d+|:\d+)$/', '', $m[2]);
        $kind = $m[1] . ': ' . preg_replace(['/\b[0-9a-z]{26,}\b/i', '/\d+/'], ['…', 'N'], substr($message, 0, 200));
        $kinds[$kind] = ($kinds[$kind] ?? 0) + 1;
    }
    arsort($kinds);
    return [$count, $kinds];
}

$seeds = fn() => implode('&', array_map(fn($n) => "seed[]={$n->addr}", $GLOBALS['primaries']));
$handlers = [
    'ours persistent=1' => ['ours' => true, 'persistent' => 1],
    'ours persistent=0' => ['ours' => true, 'persistent' => 0],
    'phpredis persistent=0' => ['ours' => false, 'persistent' => 0],
    'phpredis persistent=1' => ['ours' => false, 'persistent' => 1],
];
$runs = [];
foreach ($handlers as $name => $h) $runs[] = ['scenario' => 'steady', 'name' => $name] + $h;
foreach ($handlers as $name => $h) $runs[] = ['scenario' => 'timeout 1, bursts', 'name' => $name] + $h;
foreach ($handlers as $name => $h) $runs[] = ['scenario' => "maxclients $maxclients", 'name' => $name] + $h;
$runs[] = ['scenario' => "pm.max_requests=$max_requests", 'name' => 'ours persistent=1, shared map (default)'] + $handlers['ours persistent=1'];
$runs[] = ['scenario' => "pm.max_requests=$max_requests", 'name' => 'ours persistent=1, shared_slot_map=0', 'unshared' => true] + $handlers['ours persistent=1'];
$runs[] = ['scenario' => "pm.max_requests=$max_requests", 'name' => 'phpredis persistent=0'] + $handlers['phpredis persistent=0'];
$runs[] = ['scenario' => "pm.max_requests=$max_requests", 'name' => 'phpredis persistent=1'] + $handlers['phpredis persistent=1'];

// --smoke proves every path runs in under a minute: every handler once, each
// other scenario with fewer handlers (stopping php-fpm and nginx takes 2 s a run).
if ($smoke) {
    $keep = ['timeout 1, bursts' => ['ours persistent=1', 'phpredis persistent=1'],
        "maxclients $maxclients" => ['ours persistent=0'],
        "pm.max_requests=$max_requests" => ['ours persistent=1, shared map (default)', 'ours persistent=1, shared_slot_map=0']];
    $runs = array_values(array_filter($runs, fn($r) => !isset($keep[$r['scenario']]) || in_array($r['name'], $keep[$r['scenario']], true)));
}
// FLEET_ONLY=steady,timeout,...: only the scenarios whose names start so.
if (getenv('FLEET_ONLY')) {
    $only = explode(',', getenv('FLEET_ONLY'));
    $runs = array_values(array_filter($runs, fn($r) => array_filter($only, fn($o) => str_starts_with($r['scenario'], trim($o)))));
}
$rows = [];
$pool_rows = [];
$notes = [];
$fpm_memory = null;
$t_start = microtime(true);
try {
    if (!$fresh_cluster) cluster_start();
    foreach ($runs as $k => $run) {
        $label = "{$run['scenario']} | {$run['name']}";
        say(sprintf('run %d/%d: %s (%.0f s so far)', $k + 1, count($runs), $label, microtime(true) - $t_start));
        if ($fresh_cluster) cluster_start(); else cluster_reset();
        $timeout_scenario = str_starts_with($run['scenario'], 'timeout');
        $maxclients_scenario = str_starts_with($run['scenario'], 'maxclients');
        $recycle = str_starts_with($run['scenario'], 'pm.max_requests');
        if ($timeout_scenario) set_all('timeout', '1');
        // Base memory with nothing connected (this benchmark's connection aside).
        $empty = sample_primaries();
        if ($maxclients_scenario) set_all('maxclients', (string)$maxclients);

        $prefix = 'FLEET' . $k . ':';
        $path = $seeds() . "&timeout=1&read_timeout=1&persistent={$run['persistent']}&prefix=$prefix"
            . (!empty($run['unshared']) ? '&shared_slot_map=0' : '');
        $ini = ["session.save_path=\"$path\"", 'redis.session.locking_enabled=1',
            'redis.session.lock_wait_time=20000', 'redis.session.lock_retries=100', 'session.gc_probability=0'];
        if (!$run['ours'] && $run['persistent']) $ini[] = 'redis.clusters.cache_slots=1';
        $env = [];
        if (!$run['ours']) $env['FPM_WITHOUT_EXTENSION'] = '1';
        if ($recycle) $env['FPM_MAX_REQUESTS'] = (string)$max_requests;
        sh(implode(' ', array_map('escapeshellarg', ["$root/scripts/fpm.sh", 'start', $fpm_dir, (string)$http_port,
            __DIR__, (string)$children, ...$ini])), $env);
        // What the workers log from here on (not fpm.sh's own first request).
        $log_from = filesize("$fpm_dir/fpm.log");

        $plan = [];
        if ($timeout_scenario) {
            for ($b = 0; $b < $bursts; $b++) {
                if ($b) $plan[] = [$pause, false];
                $plan[] = [$burst, true];
            }
            $warm_here = 0.0;
        } else {
            // Recycling: warm up past the first generation of workers (they all
            // start together, and would all be replaced inside the window).
            $warm_here = $recycle ? $recycle_warm : $warm;
            $plan[] = [$warm_here + $measure, true];
        }
        $before = null;
        $load = load($plan, $warm_here, function () use (&$before) { $before = snapshot(); });
        $after = snapshot();
        if ($fpm_memory === null) $fpm_memory = fpm_pss("$fpm_dir/fpm.pid");
        $peak = sample_primaries();
        usleep((int)($settle * 1e6));
        $idle = sample_primaries();
        $pool = $run['ours'] ? pool_metrics() : [];
        fpm_stop();
        $log_copy = "$work/logs/run$k-fpm.log";
        file_put_contents("$work/logs/run$k-samples.json", json_encode(['run' => $label, 'samples' => $load['samples']]));
        copy("$fpm_dir/fpm.log", $log_copy);
        [$warnings, $warning_kinds] = fpm_warnings($log_copy, $log_from);

        // Nothing lost: each session's stored n against its successful responses.
        $lost = 0; $lost_sessions = 0; $unacked = 0;
        foreach ($load['ok_by_sid'] as $sid => $ok) {
            $n = stored_n($prefix . $sid);
            if ($n < $ok) { $lost += $ok - $n; $lost_sessions++; }
            if ($n > $ok) $unacked += $n - $ok;
        }

        // Connections per primary: under load (samples in the load's measured
        // part), and in the pauses (timeout scenario) or after the load.
        $under = array_filter($load['samples'], fn($s) => $s['on'] && $s['measured']);
        $per_primary = fn($samples, $key) => array_merge(...array_map(fn($s) => array_column($s['p'], $key), $samples ?: [['p' => []]]));
        $conns_under = $per_primary($under, 'conns');
        $conns_mean = $conns_under ? array_sum($conns_under) / count($conns_under) : NAN;
        $conns_max = $conns_under ? max($conns_under) : NAN;
        if ($timeout_scenario) {
            // Sampled as each pause ends: what the pause left connected.
            $paused = array_filter($load['samples'], fn($s) => !empty($s['pause_end']));
            $idle_conns = $per_primary($paused, 'conns');
        } else {
            $idle_conns = array_column($idle, 'conns');
        }
        $idle_mean = $idle_conns ? array_sum($idle_conns) / count($idle_conns) : NAN;
        // Server memory: RSS per primary at the end of the load against the empty
        // cluster's, and the clients' memory as the server counts it, per connection.
        $rss_empty = array_sum(array_column($empty, 'rss')) / count($empty);
        // RSS: the largest a primary reached (mean over primaries of each one's largest sample).
        $rss_max = [];
        foreach (array_merge($load['samples'], [['p' => $peak]]) as $s) {
            foreach ($s['p'] as $j => $p) $rss_max[$j] = max($rss_max[$j] ?? 0, $p['rss']);
        }
        $rss_peak = array_sum($rss_max) / count($rss_max);
        $peak_conns = max($conns_max, array_sum(array_column($peak, 'conns')) / count($peak));
        // The server's own count of its normal clients' memory, per connected client, under load.
        $per_client = [];
        foreach ($under as $s) foreach ($s['p'] as $p) $per_client[] = $p['clients_mem'] / max(1, $p['connected']);

        $done = max(1, $load['done_since_start']);
        $busy = $after['machine'][0] - $before['machine'][0];
        $total = max(1, $after['machine'][1] - $before['machine'][1]);
        $steal = $after['machine'][2] - $before['machine'][2];
        $rows[] = [
            'scenario' => $run['scenario'],
            'handler' => $run['name'],
            'req/s' => round($load['window_ok'] / max(0.001, $load['on_seconds'])),
            'p50 ms' => round(percentile($load['lat'], 0.50) / 1000, 1),
            'p99 ms' => round(percentile($load['lat'], 0.99) / 1000, 1),
            'failed' => $load['failed'] . ' / ' . ($load['ok'] + $load['failed']),
            'FPM log warnings/errors' => $warnings,
            'lost' => $lost . ($lost ? " ($lost_sessions sessions)" : ''),
            'conns/primary under load (mean, max)' => sprintf('%.0f, %d', $conns_mean, $conns_max),
            'conns/primary idle' => sprintf('%.0f', $idle_mean) . ($timeout_scenario ? ' (pauses)' : ''),
            'new conns / req' => sprintf('%.2f', ($after['conns'] - $before['conns'] - ($after['own'] - $before['own'])) / $done),
            'CLUSTER SLOTS / 1k req' => sprintf('%.1f', ($after['slots'] - $before['slots']) / $done * 1000),
            'FPM CPU µs/req' => round(($after['fpm_cpu'] - $before['fpm_cpu']) * 1e6 / $done),
            'primaries CPU µs/req' => round(($after['server_cpu'] - $before['server_cpu']) * 1e6 / $done),
            'replicas CPU µs/req' => round(($after['replica_cpu'] - $before['replica_cpu']) * 1e6 / $done),
            'nginx CPU µs/req' => round(($after['nginx_cpu'] - $before['nginx_cpu']) * 1e6 / $done),
            'load tool CPU µs/req' => round(($after['client_cpu'] - $before['client_cpu']) * 1e6 / $done),
            'machine CPU µs/req' => round($busy / 100 * 1e6 / $done),
            'RSS/primary MB (empty → max)' => sprintf('%.1f → %.1f', $rss_empty / 1048576, $rss_peak / 1048576),
            'RSS Δ KB / max conn' => $peak_conns >= 1 ? sprintf('%.1f', ($rss_peak - $rss_empty) / 1024 / $peak_conns) : '–',
            'client mem KB/conn' => $per_client ? sprintf('%.1f', array_sum($per_client) / count($per_client) / 1024) : '–',
            'machine CPU busy' => sprintf('%.0f%%', 100 * $busy / $total),
            'CPU steal' => sprintf('%.0f%%', 100 * $steal / $total),
        ];
        if ($run['ours']) {
            $pool_rows[] = [
                'scenario' => $run['scenario'], 'handler' => $run['name'],
                'sessions opened' => (int)($pool['requests'] ?? 0),
                'node conns opened' => (int)($pool['node_connections.opened'] ?? 0),
                'closed_idle' => (int)($pool['node_connections.closed_idle'] ?? 0),
                'replaced' => (int)($pool['node_connections.replaced'] ?? 0),
                'refused_maxclients' => (int)($pool['node_connections.refused_maxclients'] ?? 0),
                'slot maps fetched' => (int)($pool['slot_maps.fetched'] ?? 0),
                'slot maps shared' => (int)($pool['slot_maps.shared'] ?? 0),
                'errors' => implode(' ', array_map(fn($k) => substr($k, 7) . '=' . (int)$pool[$k],
                    array_filter(array_keys($pool), fn($k) => str_starts_with($k, 'errors.') && $pool[$k] > 0))) ?: '0',
            ];
        }
        $note = [];
        foreach ($load['failed_kinds'] as $kind => $n) $note[] = "failed: $n × $kind";
        foreach (array_slice($warning_kinds, 0, 6, true) as $kind => $n) $note[] = "log: $n × $kind";
        if (count($warning_kinds) > 6) $note[] = 'log: ' . (count($warning_kinds) - 6) . ' other kinds';
        if ($unacked) $note[] = "$unacked writes stored whose response failed (not lost)";
        if ($note) $notes[$label] = $note;
        if ($fresh_cluster) { sh(escapeshellarg("$root/scripts/cluster.sh") . " stop redis $base"); $cluster_up = false; }
    }
} finally {
    // bench/fleet.sh's trap stops them too; this leaves nothing between runs.
    @exec(escapeshellarg("$root/scripts/fpm.sh") . ' stop ' . escapeshellarg($fpm_dir) . ' 2>&1');
    if ($cluster_up) @exec(escapeshellarg("$root/scripts/cluster.sh") . " stop redis $base 2>&1");
}

$cores = (int)trim((string)shell_exec('nproc'));
$out = sprintf("## Fleet benchmark%s\n\n", $smoke ? ' (--smoke: tiny sizes, the figures mean nothing)' : '');
$out .= sprintf("php-fpm: %d static children (pool PSS %.0f MB, %d children counted), %d concurrent clients each with its own cookie "
    . "and one request in flight, nginx, %d cores; Redis %s cluster, 3 primaries + 3 replicas%s. "
    . "Runs: %g s warm-up (pm.max_requests runs: %g s), %g s measured; timeout runs: %d bursts of %g s with %g s pauses, all measured.\n\n",
    $children, $fpm_memory[0] ?? 0, $fpm_memory[1] ?? 0, $clients, $cores,
    trim((string)shell_exec("redis-server --version | sed 's/.*v=\\([^ ]*\\).*/\\1/'")),
    $fresh_cluster ? ', a new one for every run' : ', one for every run (reset between runs)',
    $warm, $recycle_warm, $measure, $bursts, $burst, $pause);
$out .= table($rows) . "\n";
if ($pool_rows) $out .= "This extension's pool counters (rediscluster_session_metrics(), since the pool started, warm-up included):\n\n" . table($pool_rows) . "\n";
if ($notes) {
    $out .= "Failures and FPM log lines, by kind:\n\n";
    foreach ($notes as $label => $lines) {
        $out .= "- $label\n";
        foreach ($lines as $line) $out .= "  - " . str_replace('|', '\|', $line) . "\n";
    }
    $out .= "\n";
}
$out .= sprintf("Total %.0f s. FPM logs: %s/logs/.\n", microtime(true) - $t_start, $work);
file_put_contents("$work/fleet.md", $out);
echo $out;
