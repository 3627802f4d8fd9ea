--TEST--
rediscluster_session_metrics() under php-fpm (4 static workers): every additive counter is the sum of the workers' rediscluster_session_stats(), the processes gauge counts the workers that used the handler, and the text parses as Prometheus exposition format
--SKIPIF--
<?php
if (getenv('RCS_NO_FPM')) die('skip ' . getenv('RCS_NO_FPM'));
?>
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
require __DIR__ . '/inc/http.php';
const WORKERS = 4;
$fpm = __DIR__ . '/../scripts/fpm.sh';
$dir = sys_get_temp_dir() . '/rcs-fpm-metrics-' . getmypid();
$port = rcs_seeds()[0][1] + 1092;
$save_path = rcs_save_path('prefix=' . urlencode(rcs_prefix()) . '&timeout=2&read_timeout=2');
exec(implode(' ', array_map('escapeshellarg', [$fpm, 'start', $dir, $port, __DIR__ . '/fpm-app', WORKERS,
    "session.save_path=\"$save_path\"", 'redis.session.locking_enabled=1', 'redis.session.lock_wait_time=50000',
    'redis.session.lock_retries=100', 'session.use_strict_mode=0'])) . ' 2>&1', $out, $status);
if ($status !== 0) die("fpm.sh start failed:\n" . implode("\n", $out));
try {
    // Load: 8 sessions, 120 requests, 8 at a time (so locks are waited for).
    $cookies = array_map(fn($i) => 'PHPSESSID=metrics' . ($i % 8) . rcs_prefix(), range(0, 119));
    $cookies = array_map(fn($c) => preg_replace('/[^A-Za-z0-9=]/', '', $c), $cookies);
    $statuses = array_count_values(array_column(http_many($port, array_fill(0, 120, '/'), $cookies, 8), 0));
    echo "responses: ", json_encode($statuses), "\n";

    // Every worker's own counters: parallel calls reach all of them, in as
    // many rounds as a loaded machine's scheduling takes (bounded).
    $workers = [];
    for ($round = 0; $round < 100 && count($workers) < WORKERS; $round++) {
        foreach (http_many($port, array_fill(0, 2 * WORKERS, '/?stats=1'), array_fill(0, 2 * WORKERS, ''), WORKERS) as [, $body]) {
            $reply = json_decode($body, true);
            $workers[$reply['worker']] = $reply['stats'];
        }
    }
    echo "workers reporting: ", count($workers), "\n";
    $text = http_many($port, ['/?metrics=1'], [''], 1)[0][1];
    $metrics = [];
    foreach (explode("\n", trim($text)) as $line) {
        if ($line !== '' && $line[0] !== '#') {
            [$name, $value] = explode(' ', $line);
            $metrics[$name] = (float)$value;
        }
    }
    $sum = fn(callable $pick) => array_sum(array_map($pick, $workers));
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
    echo "locks taken: ", $metrics['rediscluster_session_locks_acquired_total'] >= 120 ? 'at least one per request' : $metrics['rediscluster_session_locks_acquired_total'], "\n";
    $used = count(array_filter($workers, fn($s) => $s['connects'] > 0));
    echo "processes: ", $metrics['rediscluster_session_processes'] == $used ? 'the workers that used the handler' : $metrics['rediscluster_session_processes'] . " of $used", "\n";
    $parse = proc_open(['/usr/bin/python3', '-c', 'import sys
from prometheus_client.parser import text_string_to_metric_families
families = list(text_string_to_metric_families(sys.stdin.read()))
print(len(families), "families,", sum(len(f.samples) for f in families), "samples parsed")'], [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['redirect', 1]], $pipes);
    fwrite($pipes[0], $text);
    fclose($pipes[0]);
    echo "prometheus_client: ", trim(stream_get_contents($pipes[1])), "\n";
    proc_close($parse);
    echo "FPM log: ", trim(file_get_contents("$dir/fpm.log")) === '' ? 'clean' : file_get_contents("$dir/fpm.log"), "\n";
} finally {
    exec(implode(' ', array_map('escapeshellarg', [$fpm, 'stop', $dir])));
}
?>
--EXPECTF--
responses: {"200":120}
workers reporting: 4
locks_acquired_total: sum of the workers
lock_waits_total: sum of the workers
acquire_failures_total{kind="timeout"}: sum of the workers
acquire_failures_total{kind="rejected"}: sum of the workers
writes_refused_lock_lost_total: sum of the workers
releases_total{cmd="lua"}: sum of the workers
release_fallbacks_total: sum of the workers
connects_total: sum of the workers
errors_total{kind="io"}: sum of the workers
lock_wait_seconds_sum: sum of the workers
lock_wait_seconds_count: sum of the workers
locks taken: at least one per request
processes: the workers that used the handler
prometheus_client: %d families, %d samples parsed
FPM log: clean
