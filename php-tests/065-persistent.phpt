--TEST--
persistent=0 as phpredis means it: a worker (php -S, several requests in one process) closes its connections at each request's end, after the session's final write and release, and keeps its slot map (no CLUSTER SLOTS after the first request); absent (or persistent=1) keeps them for the worker's life, as before
--SKIPIF--
<?php if (!function_exists('proc_open')) die('skip proc_open'); ?>
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$dir = sys_get_temp_dir() . '/rcs-persistent-' . bin2hex(random_bytes(4));
mkdir($dir);
// Each request: a locked session changed and left to the request's end (no explicit close).
file_put_contents("$dir/index.php", '<?php
session_id($_GET["sid"]);
session_start();
$_SESSION["n"] = ($_SESSION["n"] ?? 0) + 1;
echo json_encode(["n" => $_SESSION["n"], "opened" => rediscluster_session_stats()["node_connections"]["opened"]]);
');
$serve = function (string $persistent) use ($dir): array {
    $port = 20000 + random_int(0, 20000);
    $extra = $persistent === '' ? '' : "&persistent=$persistent";
    $ini = rcs_locking(['session.save_path' => rcs_save_path('prefix=' . urlencode(rcs_prefix()) . $extra)]);
    $cmd = rcs_php_command(rcs_session_ini($ini));
    array_push($cmd, '-S', "127.0.0.1:$port", '-t', $dir);
    $proc = proc_open($cmd, [1 => ['file', '/dev/null', 'w'], 2 => ['file', '/dev/null', 'w']], $pipes);
    rcs_wait_until(fn() => @fsockopen('127.0.0.1', $port) !== false);
    return [$proc, $port];
};
// The worker's connections as the primaries count them (clients other than this test's and MONITORs).
$clients = function () {
    $count = 0;
    foreach (rcs_primaries() as $addr) {
        foreach (explode("\n", Resp::send($addr, ['CLIENT', 'LIST', 'TYPE', 'normal'])) as $line) {
            if ($line !== '' && !str_contains($line, 'cmd=monitor') && !str_contains($line, 'cmd=client|list')) $count++;
        }
    }
    return $count;
};
$baseline = $clients();
foreach (['0' => 'persistent=0', '' => 'persistent absent', '1' => 'persistent=1'] as $value => $name) {
    echo "== $name\n";
    $sid = 'persist' . bin2hex(random_bytes(6));
    [$proc, $port] = $serve((string)$value);
    $before = $clients();
    $opened = [];
    for ($i = 1; $i <= 3; $i++) {
        // The first request fetches the map (twice if a seed that is a replica had an old one).
        if ($i === 2) $maps = rcs_slot_map_fetches();
        $reply = json_decode(file_get_contents("http://127.0.0.1:$port/?sid=$sid"), true);
        $opened[] = $reply['opened'];
        // The response may reach us before the request's end has run.
        $closed = $value === '0' ? rcs_wait_until(fn() => $clients() === $before) : $clients() === $before;
        echo "request $i: n=$reply[n], worker connections after it: ", $closed ? 'none' : 'kept', "\n";
    }
    echo 'slot maps fetched by requests 2 and 3: ', rcs_slot_map_fetches() - $maps, "\n";
    echo 'connections opened by requests 2 and 3: ', $opened[2] - $opened[0], "\n";
    proc_terminate($proc);
    proc_close($proc);
    // The server lets go of a dead worker's connections on its own schedule.
    rcs_wait_until(fn() => $clients() === $baseline);
}
array_map('unlink', glob("$dir/*"));
rmdir($dir);
?>
--EXPECT--
== persistent=0
request 1: n=1, worker connections after it: none
request 2: n=2, worker connections after it: none
request 3: n=3, worker connections after it: none
slot maps fetched by requests 2 and 3: 0
connections opened by requests 2 and 3: 2
== persistent absent
request 1: n=1, worker connections after it: kept
request 2: n=2, worker connections after it: kept
request 3: n=3, worker connections after it: kept
slot maps fetched by requests 2 and 3: 0
connections opened by requests 2 and 3: 0
== persistent=1
request 1: n=1, worker connections after it: kept
request 2: n=2, worker connections after it: kept
request 3: n=3, worker connections after it: kept
slot maps fetched by requests 2 and 3: 0
connections opened by requests 2 and 3: 0
