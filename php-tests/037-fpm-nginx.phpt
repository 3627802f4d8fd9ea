--TEST--
Behind nginx and php-fpm: concurrent requests on shared sessions lose no update, each worker keeps one connection set, and the FPM log stays free of warnings
--SKIPIF--
<?php if (getenv('RCS_NO_FPM')) die('skip ' . getenv('RCS_NO_FPM')); ?>
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
require __DIR__ . '/inc/http.php';
const WORKERS = 4, SESSIONS = 4, REQUESTS_PER_SESSION = 60, CONCURRENCY = 16;
$fpm = __DIR__ . '/../scripts/fpm.sh';
$dir = sys_get_temp_dir() . '/rcs-fpm-' . getmypid();
$port = rcs_seeds()[0][1] + 1090;

/** Connections each cluster node has accepted since it started, summed. */
function connections_received(): int {
    return resp_connections_received(array_map(fn($node) => "$node[0]:$node[1]", rcs_seeds()));
}

// A fresh process connects only where its session goes: the seed it learns
// the slot map from, and the primary of its session's slot.
$before = connections_received();
rcs_php("session_id('fpmprobe'); session_start(); session_write_close();");
$one_session = connections_received() - $before;   // Resp keeps its own connections open
echo "connections of a fresh process with one session: ", $one_session >= 1 && $one_session <= 2 ? "1 or 2" : $one_session, "\n";
// A worker serving sessions on every slot: the seed and each primary, once.
$one_set = 1 + count(array_filter(rcs_seeds(), fn($node) => Resp::send("$node[0]:$node[1]", ['ROLE'])[0] === 'master'));

$save_path = rcs_save_path('prefix=' . urlencode(rcs_prefix()) . '&timeout=2&read_timeout=2');
exec(implode(' ', array_map('escapeshellarg', [$fpm, 'start', $dir, $port, __DIR__ . '/fpm-app', WORKERS,
    "session.save_path=\"$save_path\"", 'redis.session.locking_enabled=1', 'redis.session.lock_wait_time=50000', 'redis.session.lock_retries=100',
    'session.use_strict_mode=0'])) . ' 2>&1', $out, $status);
if ($status !== 0) die("fpm.sh start failed:\n" . implode("\n", $out));
try {
    $sids = array_map(fn($i) => "fpm$i" . bin2hex(random_bytes(8)), range(1, SESSIONS));
    $paths = $cookies = [];
    for ($r = 0; $r < REQUESTS_PER_SESSION; $r++) {
        foreach ($sids as $sid) {
            $paths[] = '/';
            $cookies[] = "PHPSESSID=$sid";
        }
    }
    $before = connections_received();
    $results = http_many($port, $paths, $cookies, CONCURRENCY);
    $received = connections_received() - $before;

    $statuses = array_count_values(array_column($results, 0));
    echo "responses: ", json_encode($statuses), "\n";
    $connects = [];
    foreach ($results as [, $body]) {
        $reply = json_decode($body, true);
        $connects[$reply['worker']] = max($connects[$reply['worker']] ?? 0, $reply['connects']);
    }
    echo "workers that served: ", count($connects) >= 2 && count($connects) <= WORKERS ? "several" : count($connects), "\n";
    echo "connection sets per worker, at most: ", max($connects), "\n";
    echo "connections the cluster accepted: ",
        $received <= WORKERS * $one_set ? "at most one set per worker" : "$received, MORE THAN " . WORKERS * $one_set, "\n";
    $lost = 0;
    foreach ($sids as $sid) {
        preg_match('/visits\|i:(\d+);/', (string)rcs_cmd('GET', rcs_prefix() . $sid), $m);
        $lost += REQUESTS_PER_SESSION - (int)($m[1] ?? 0);
    }
    echo "lost updates: $lost\n";
    echo "locks left: ", count(rcs_keys(rcs_prefix() . '*_LOCK')), "\n";
    echo "FPM log: ", trim(file_get_contents("$dir/fpm.log")) === '' ? 'clean' : file_get_contents("$dir/fpm.log"), "\n";
    echo "nginx log: ", trim(file_get_contents("$dir/nginx-error.log")) === '' ? 'clean' : file_get_contents("$dir/nginx-error.log"), "\n";

    // The log does catch a worker's warning: the check above could fail.
    // The FPM master copies the worker's output into its log on its own
    // schedule, after the response may have gone out: wait for it (bounded).
    http_many($port, ['/?warn=1'], [''], 1);
    $warned = fn() => substr_count((string)file_get_contents("$dir/fpm.log"), 'deliberate warning from the FPM test');
    rcs_wait_until(fn() => $warned() >= 1, 10);
    echo "after a deliberate warning: ", $warned(), " line\n";
} finally {
    exec(implode(' ', array_map('escapeshellarg', [$fpm, 'stop', $dir])));
    exec('rm -rf ' . escapeshellarg($dir));
}
?>
--EXPECT--
connections of a fresh process with one session: 1 or 2
responses: {"200":240}
workers that served: several
connection sets per worker, at most: 1
connections the cluster accepted: at most one set per worker
lost updates: 0
locks left: 0
FPM log: clean
nginx log: clean
after a deliberate warning: 1 line
