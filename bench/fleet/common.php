<?php
// What the nginx + php-fpm benchmarks share (bench/fleet/fleet.php, bench/fleet/http.php):
// the node client, the load tool, CPU accounting of process trees, the table.
// The load reads the globals $clients, $http_port, $sample_every and $primaries,
// fpm_stop() $fpm_dir and $root, cluster_start() $root, $base and $nodes.
declare(strict_types=1);

function say(string $message): void { fwrite(STDERR, "==> $message\n"); }

require __DIR__ . '/../../php-tests/inc/resp.php';

/** One node, reached again when it closed the connection (`timeout 1`) or refused it (`maxclients`). */
final class Node {
    /** Connections this benchmark opened to the node (the server counts them too). */
    public int $connects = 0;
    private bool $connected = false;
    public function __construct(public string $addr) {}

    public function cmd(string ...$args) {
        for ($try = 0; ; $try++) {
            try {
                // Resp connects on the first send after a forget().
                if (!$this->connected) $this->connects++;
                $this->connected = true;
                $reply = Resp::send($this->addr, $args);
                if ($reply instanceof RespError && str_starts_with($reply->message, 'ERR max number of clients')) {
                    throw new RuntimeException($reply->message);
                }
                return $reply;
            } catch (RuntimeException $e) {
                Resp::forget($this->addr);
                $this->connected = false;
                if ($try >= 2) throw $e;
                usleep(100000);
            }
        }
    }

    /** INFO fields of the sections named, as name => value. */
    public function info(string ...$sections): array {
        preg_match_all('/^([a-z_|0-9]+):(.*?)\r?$/m', (string)$this->cmd('INFO', ...$sections), $m);
        return array_combine($m[1], $m[2]);
    }
}

/** Starts the cluster of 6 nodes on $base ($nodes) and finds its primaries. */
function cluster_start(): void {
    global $root, $base, $nodes, $primaries, $cluster_up;
    sh(escapeshellarg("$root/scripts/cluster.sh") . " start redis $base");
    $cluster_up = true;
    $primaries = array_values(array_filter($nodes, fn($n) => $n->cmd('ROLE')[0] === 'master'));
}

/** Stops nginx and php-fpm: both signalled at once (each takes 1-2 s), then fpm.sh stop waits and cleans up. */
function fpm_stop(): void {
    global $fpm_dir, $root;
    foreach (['nginx', 'fpm'] as $name) {
        $pid = (int)@file_get_contents("$fpm_dir/$name.pid");
        if ($pid > 0) exec("kill $pid 2>/dev/null");
    }
    sh(escapeshellarg("$root/scripts/fpm.sh") . ' stop ' . escapeshellarg($fpm_dir));
}

function sh(string $cmd, array $env = []): string {
    $prefix = '';
    foreach ($env as $k => $v) $prefix .= "$k=" . escapeshellarg((string)$v) . ' ';
    exec("env $prefix$cmd 2>&1", $out, $status);
    if ($status !== 0) throw new RuntimeException("failed ($status): $cmd\n" . implode("\n", $out));
    return implode("\n", $out);
}

/** The stat fields (after the command name) of a master process and its children, by pid. */
function tree_stats(string $pid_file): array {
    $master = (int)@file_get_contents($pid_file);
    $stats = [];
    foreach ($master ? glob('/proc/[0-9]*/stat') : [] as $file) {
        $stat = @file_get_contents($file);
        if ($stat === false) continue;
        $f = explode(' ', substr($stat, (int)strrpos($stat, ')') + 2));
        if (count($f) < 15) continue;   // the process exited while being read
        $pid = (int)basename(dirname($file));
        if ($pid === $master || (int)$f[1] === $master) $stats[$pid] = $f;
    }
    return [$master, $stats];
}

/** CPU seconds of a master process (php-fpm's, nginx's) and its children, living and reaped. */
function tree_cpu(string $pid_file): float {
    [$master, $stats] = tree_stats($pid_file);
    $ticks = 0;
    foreach ($stats as $pid => $f) {
        $ticks += $f[11] + $f[12] + ($pid === $master ? $f[13] + $f[14] : 0);
    }
    return $ticks / 100;   // CLK_TCK
}

/** [busy, total, steal] jiffies of the whole machine (steal: the hypervisor ran another guest). */
function machine_cpu(): array {
    $f = array_map('intval', preg_split('/\s+/', trim(explode("\n", file_get_contents('/proc/stat'))[0])));
    $total = array_sum(array_slice($f, 1, 8));
    return [$total - $f[4] - $f[5] - $f[8], $total, $f[8]];
}

/** CPU seconds a Redis server spent (user + sys), from its INFO cpu fields. */
function server_cpu(array $info): float {
    return (float)$info['used_cpu_user'] + (float)$info['used_cpu_sys'];
}

/** CPU seconds of php-fpm, nginx, this process (the load tool) and the machine, and the time. */
function machine_snapshot(): array {
    global $fpm_dir;
    $r = getrusage();
    return [
        'fpm_cpu' => tree_cpu("$fpm_dir/fpm.pid"),
        'nginx_cpu' => tree_cpu("$fpm_dir/nginx.pid"),
        'machine' => machine_cpu(),
        'client_cpu' => $r['ru_utime.tv_sec'] + $r['ru_utime.tv_usec'] / 1e6 + $r['ru_stime.tv_sec'] + $r['ru_stime.tv_usec'] / 1e6,
        't' => microtime(true),
    ];
}

/** Per primary: clients minus this benchmark's own connection, RSS and client memory. */
function sample_primaries(): array {
    global $primaries;
    $out = [];
    foreach ($primaries as $n) {
        $i = $n->info('clients', 'memory');
        $out[] = ['conns' => (int)$i['connected_clients'] - 1, 'rss' => (int)$i['used_memory_rss'],
            'clients_mem' => (int)$i['mem_clients_normal'], 'connected' => (int)$i['connected_clients']];
    }
    return $out;
}

/**
 * The load: $clients virtual clients, each with its own cookie and at most one
 * request in flight, following $plan (a list of [seconds, load on?]). Calls
 * $on_start when the measured part begins (after $warm seconds of the plan) and
 * samples the primaries every $sample_every s.
 */
function load(array $plan, float $warm, callable $on_start): array {
    global $clients, $http_port, $sample_every;
    $mh = curl_multi_init();
    curl_multi_setopt($mh, CURLMOPT_MAXCONNECTS, $clients * 2);
    $sid = array_fill(0, $clients, null);
    $handles = $index = [];
    for ($i = 0; $i < $clients; $i++) {
        $ch = curl_init("http://127.0.0.1:$http_port/");
        curl_setopt_array($ch, [
            CURLOPT_RETURNTRANSFER => true, CURLOPT_TIMEOUT_MS => 10000, CURLOPT_CONNECTTIMEOUT_MS => 5000,
            CURLOPT_HEADERFUNCTION => function ($ch, string $line) use ($i, &$sid) {
                if (stripos($line, 'set-cookie:') === 0 && preg_match('/PHPSESSID=([^;\s]+)/', $line, $m)) $sid[$i] = $m[1];
                return strlen($line);
            },
        ]);
        $handles[$i] = $ch;
        $index[spl_object_id($ch)] = $i;
    }
    $busy = array_fill(0, $clients, false);
    $in_flight = 0;
    $issue = function (int $i) use (&$sid, &$busy, &$in_flight, $handles, $mh) {
        curl_setopt($handles[$i], CURLOPT_HTTPHEADER, $sid[$i] === null ? [] : ["Cookie: PHPSESSID={$sid[$i]}"]);
        curl_multi_add_handle($mh, $handles[$i]);
        $busy[$i] = true;
        $in_flight++;
    };
    $r = ['ok' => 0, 'failed' => 0, 'failed_kinds' => [], 'ok_by_sid' => [], 'lat' => [], 'samples' => [],
        'on_seconds' => 0.0, 'window_ok' => 0, 'window_done' => 0, 'done_since_start' => 0];
    $t0 = microtime(true);
    $ends = [];
    $t = $t0;
    foreach ($plan as [$seconds, $on]) { $t += $seconds; $ends[] = [$t, $on]; }
    $plan_end = $t;
    $start_at = $t0 + $warm;
    $started = false;
    $phase = 0;
    $was_on = false;
    $next_sample = $t0;
    while (true) {
        $now = microtime(true);
        if (!$started && $now >= $start_at) { $on_start(); $started = true; $start_at = microtime(true); }
        while ($phase < count($ends) && $now >= $ends[$phase][0]) $phase++;
        $on = $phase < count($ends) && $ends[$phase][1];
        if ($on && !$was_on && $phase > 0) {
            $r['samples'][] = ['on' => false, 'measured' => $started, 'at' => $now - $t0, 'p' => sample_primaries(), 'pause_end' => true];
        }
        $was_on = $on;
        if ($on) foreach ($busy as $i => $b) if (!$b) $issue($i);
        if ($phase >= count($ends) && $in_flight === 0) break;
        if ($now - $t0 > ($plan_end - $t0) + 30) break;   // bounded: requests time out after 10 s
        curl_multi_exec($mh, $running);
        while ($done = curl_multi_info_read($mh)) {
            $ch = $done['handle'];
            $i = $index[spl_object_id($ch)];
            $body = curl_multi_getcontent($ch);
            $code = curl_getinfo($ch, CURLINFO_HTTP_CODE);
            $us = curl_getinfo($ch, CURLINFO_TOTAL_TIME_T);
            curl_multi_remove_handle($mh, $ch);
            $busy[$i] = false;
            $in_flight--;
            $now = microtime(true);
            $in_window = $started && $now <= $plan_end;
            if ($started) $r['done_since_start']++;
            if ($done['result'] === CURLE_OK && $code === 200 && preg_match('/^\d+$/D', $body)) {
                $r['ok']++;
                $r['ok_by_sid'][$sid[$i]] = ($r['ok_by_sid'][$sid[$i]] ?? 0) + 1;
                if ($started) $r['lat'][] = $us;
                if ($in_window) $r['window_ok']++;
            } else {
                $r['failed']++;
                $kind = $done['result'] !== CURLE_OK ? 'curl: ' . curl_strerror($done['result']) : "HTTP $code" . ($code === 200 ? ' without counter' : '');
                $r['failed_kinds'][$kind] = ($r['failed_kinds'][$kind] ?? 0) + 1;
            }
            if ($in_window) $r['window_done']++;
            if ($on && $now < $ends[$phase][0]) $issue($i);
        }
        if ($now >= $next_sample) {
            $r['samples'][] = ['on' => $on, 'measured' => $started, 'at' => $now - $t0, 'p' => sample_primaries()];
            $next_sample += $sample_every;
        }
        if ($in_flight > 0) curl_multi_select($mh, 0.02);
        else usleep(10000);
    }
    foreach ($plan as [$seconds, $on]) if ($on) $r['on_seconds'] += $seconds;
    $r['on_seconds'] -= $warm;
    $r['sids'] = array_values(array_unique(array_filter($sid)));
    foreach ($handles as $ch) curl_close($ch);
    curl_multi_close($mh);
    return $r;
}

function percentile(array $values, float $p): float {
    if (!$values) return NAN;
    sort($values);
    return (float)$values[min(count($values) - 1, (int)floor($p * count($values)))];
}

/** A Markdown table of rows (arrays with the same keys). */
function table(array $rows): string {
    $keys = array_keys(array_merge(...array_map(fn($r) => array_fill_keys(array_keys($r), 0), $rows)));
    $out = '| ' . implode(' | ', $keys) . " |\n|" . str_repeat('---|', count($keys)) . "\n";
    foreach ($rows as $r) {
        $out .= '| ' . implode(' | ', array_map(fn($k) => (string)($r[$k] ?? ''), $keys)) . " |\n";
    }
    return $out;
}
