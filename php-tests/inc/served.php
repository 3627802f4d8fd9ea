<?php
// php-tests/fpm-app served the two ways PHP is served in production, nginx +
// php-fpm (scripts/fpm.sh) and Apache prefork + mod_php (scripts/apache.sh),
// and the checks 037, 047 and 067 make through either: concurrent requests on
// shared sessions, and the pool-wide metrics.
require_once __DIR__ . '/http.php';

/**
 * Starts scripts/$server.sh (fpm or apache) with everything in $dir, serving
 * $app (by default fpm-app) on $port with $workers workers, locking on, with
 * $env for the script; $ini after the defaults (a later setting wins). A
 * $patient server waits up to 100 x 50 ms for a lock, as a loaded machine
 * needs; otherwise neither lock_retries nor lock_wait_time is set. Dies with
 * the script's output if it fails.
 */
function served_start(string $server, string $dir, int $port, int $workers, array $ini = [], bool $patient = true,
                      ?string $app = null, array $env = []): void {
    $save_path = rcs_save_path('prefix=' . urlencode(rcs_prefix()) . '&timeout=2&read_timeout=2');
    $ini = array_merge(["session.save_path=\"$save_path\"", 'redis.session.locking_enabled=1', 'session.use_strict_mode=0',
        ...($patient ? ['redis.session.lock_wait_time=50000', 'redis.session.lock_retries=100'] : [])], $ini);
    // The app's real path: php-fpm finds no script under a root with "..".
    $command = ['env', ...array_map(fn($name, $value) => "$name=$value", array_keys($env), $env),
        __DIR__ . "/../../scripts/$server.sh", 'start', $dir, $port, realpath($app ?? __DIR__ . '/../fpm-app'), $workers, ...$ini];
    exec(implode(' ', array_map('escapeshellarg', $command)) . ' 2>&1', $out, $status);
    if ($status !== 0) die("$server.sh start failed:\n" . implode("\n", $out));
}

/**
 * A request holding session $sid's lock, then one to $path on the same
 * session: once that one queues (or has answered), the holder keeps the lock
 * 0.6 s more. Returns the second one's [status, body].
 */
function served_contend(int $port, string $sid, string $path): array {
    $go = rcs_go_file();
    $holder = http_send($port, '/?hold=' . urlencode($go), "PHPSESSID=$sid");
    rcs_wait_until(fn() => rcs_cmd('EXISTS', rcs_lock_key($sid)) === 1);
    $waiter = http_send($port, $path, "PHPSESSID=$sid");
    rcs_wait_until(fn() => rcs_cmd('ZCARD', rcs_lock_key($sid) . '_FIFO') >= 1 || http_answered($waiter));
    usleep(600000);
    touch($go);
    $answer = http_answer($waiter);
    http_answer($holder);
    return $answer;
}

/** Stops what served_start started and removes its directory. */
function served_stop(string $server, string $dir): void {
    exec(implode(' ', array_map('escapeshellarg', [__DIR__ . "/../../scripts/$server.sh", 'stop', $dir])));
    exec('rm -rf ' . escapeshellarg($dir));
}

/** GETs / $per_session times on each session id, $concurrency in flight; [status, body] by request. */
function served_load(int $port, array $sids, int $per_session, int $concurrency): array {
    $cookies = [];
    for ($r = 0; $r < $per_session; $r++) {
        foreach ($sids as $sid) $cookies[] = "PHPSESSID=$sid";
    }
    return http_many($port, array_fill(0, count($cookies), '/'), $cookies, $concurrency);
}

/** Connections each cluster node has accepted since it started, summed. */
function served_connections_received(): int {
    return resp_connections_received(array_map(fn($node) => "$node[0]:$node[1]", rcs_seeds()));
}

/**
 * $per_session requests on each of $sessions sessions, $concurrency at a time:
 * prints their statuses, how many workers served them, the connection sets
 * each worker and the cluster saw, the updates lost (counted from the stored
 * sessions) and the locks left.
 */
function served_concurrency(int $port, int $workers, int $sessions, int $per_session, int $concurrency): void {
    // A worker serving sessions on every slot: the seed and each primary, once.
    $one_set = 1 + count(rcs_primaries());
    $sids = array_map(fn($i) => "served$i" . bin2hex(random_bytes(8)), range(1, $sessions));
    $before = served_connections_received();
    $results = served_load($port, $sids, $per_session, $concurrency);
    $received = served_connections_received() - $before;

    echo "responses: ", json_encode(array_count_values(array_column($results, 0))), "\n";
    $connects = [];
    foreach ($results as [, $body]) {
        $reply = json_decode($body, true);
        $connects[$reply['worker']] = max($connects[$reply['worker']] ?? 0, $reply['connects']);
    }
    echo "workers that served: ", count($connects) >= 2 && count($connects) <= $workers ? "several" : count($connects), "\n";
    echo "connection sets per worker, at most: ", max($connects), "\n";
    echo "connections the cluster accepted: ",
        $received <= $workers * $one_set ? "at most one set per worker" : "$received, MORE THAN " . $workers * $one_set, "\n";
    $lost = 0;
    foreach ($sids as $sid) {
        preg_match('/visits\|i:(\d+);/', (string)rcs_cmd('GET', rcs_prefix() . $sid), $m);
        $lost += $per_session - (int)($m[1] ?? 0);
    }
    echo "lost updates: $lost\n";
    echo "locks left: ", count(rcs_keys(rcs_prefix() . '*_LOCK')), "\n";
}

/**
 * The pool-wide metrics after at least $requests sessions: prints whether each
 * additive counter of rediscluster_session_metrics() is the sum of every
 * worker's rediscluster_session_stats(), whether the processes gauge counts
 * the workers that used the handler, and what Prometheus's parser makes of it.
 */
function served_pool_metrics(int $port, int $workers, int $requests): void {
    // Every worker's own counters: parallel calls reach all of them, in as
    // many rounds as a loaded machine's scheduling takes (bounded).
    $stats = [];
    for ($round = 0; $round < 100 && count($stats) < $workers; $round++) {
        foreach (http_many($port, array_fill(0, 2 * $workers, '/?stats=1'), array_fill(0, 2 * $workers, ''), $workers) as [, $body]) {
            $reply = json_decode($body, true);
            $stats[$reply['worker']] = $reply['stats'];
        }
    }
    echo "workers reporting: ", count($stats), "\n";
    $text = http_many($port, ['/?metrics=1'], [''], 1)[0][1];
    $metrics = [];
    foreach (explode("\n", trim($text)) as $line) {
        if ($line !== '' && $line[0] !== '#') {
            [$name, $value] = explode(' ', $line);
            $metrics[$name] = (float)$value;
        }
    }
    $sum = fn(callable $pick) => array_sum(array_map($pick, $stats));
    $pairs = [
        'locks_acquired_total' => $sum(fn($s) => $s['locks_acquired']),
        'lock_waits_total' => $sum(fn($s) => $s['lock_waits']),
        'acquire_failures_total{kind="timeout"}' => $sum(fn($s) => $s['acquire_failures']),
        'acquire_failures_total{kind="rejected"}' => $sum(fn($s) => $s['waiters_rejected']),
        'writes_refused_lock_lost_total' => $sum(fn($s) => $s['writes_refused_lock_lost']),
        'releases_total{cmd="lua"}' => $sum(fn($s) => $s['releases']['lua']),
        'release_fallbacks_total' => $sum(fn($s) => $s['release_fallbacks']),
        'connects_total' => $sum(fn($s) => $s['connects']),
        'errors_total{kind="io"}' => $sum(fn($s) => $s['errors']['io']),
        'lock_wait_seconds_sum' => $sum(fn($s) => $s['lock_wait_us_total']) / 1e6,
        'lock_wait_seconds_count' => $sum(fn($s) => $s['locks_acquired'] + $s['acquire_failures']),
    ];
    foreach ($pairs as $name => $expected) {
        $got = $metrics["rediscluster_session_$name"] ?? null;
        echo "$name: ", $got !== null && abs($got - $expected) < 1e-6 ? 'sum of the workers' : "$got, workers say $expected", "\n";
    }
    $locks = $metrics['rediscluster_session_locks_acquired_total'];
    echo "locks taken: ", $locks >= $requests ? 'at least one per request' : "$locks for $requests requests", "\n";
    $used = count(array_filter($stats, fn($s) => $s['connects'] > 0));
    echo "processes: ", $metrics['rediscluster_session_processes'] == $used ? 'the workers that used the handler' : $metrics['rediscluster_session_processes'] . " of $used", "\n";
    $parse = proc_open(['/usr/bin/python3', '-c', 'import sys
from prometheus_client.parser import text_string_to_metric_families
families = list(text_string_to_metric_families(sys.stdin.read()))
print(len(families), "families,", sum(len(f.samples) for f in families), "samples parsed")'], [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['redirect', 1]], $pipes);
    fwrite($pipes[0], $text);
    fclose($pipes[0]);
    echo "prometheus_client: ", trim(stream_get_contents($pipes[1])), "\n";
    proc_close($parse);
}

/**
 * "clean", or what a server's log says but its notices (Apache logs its start
 * and stop at that level, whatever LogLevel says) and the lines holding one of
 * the $expected message codes.
 */
function served_log(string $path, string ...$expected): string {
    $lines = preg_grep('/^\[[^]]*\] \[[a-z_]+:notice\] /', explode("\n", trim((string)file_get_contents($path))), PREG_GREP_INVERT);
    $lines = array_filter($lines, fn($line) => !array_filter($expected, fn($code) => str_contains($line, "$code: ")));
    return trim(implode("\n", $lines)) === '' ? 'clean' : implode("\n", $lines);
}

/**
 * Proves the log check could fail: the app's deliberate warning, and how many
 * times it reached the log at $path. php-fpm's master copies a worker's output
 * into its log on its own schedule, after the response may have gone out:
 * waits for it (bounded).
 */
function served_warning_lines(int $port, string $path): int {
    http_many($port, ['/?warn=1'], [''], 1);
    $warned = fn() => substr_count((string)file_get_contents($path), 'deliberate warning from the served app');
    rcs_wait_until(fn() => $warned() >= 1, 10);
    return $warned();
}
