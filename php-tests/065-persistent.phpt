--TEST--
persistent=0 as phpredis means it: a worker (php -S, several requests in one process) closes its connections at the session's close and at each request's end, after the session's final write and release, and keeps its slot map (no CLUSTER SLOTS after the first request); absent (or persistent=1) keeps them for the worker's life, as before
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
foreach (['0' => 'persistent=0', '' => 'persistent absent', '1' => 'persistent=1'] as $value => $name) {
    echo "== $name\n";
    $sid = 'persist' . bin2hex(random_bytes(6));
    $extra = $value === '' ? '' : "&persistent=$value";
    [$proc, $port] = rcs_serve($dir, rcs_locking(['session.save_path' => rcs_save_path('prefix=' . urlencode(rcs_prefix()) . $extra)]));
    // The worker's own sockets to the nodes: other processes' connections come and go.
    $connections = fn() => rcs_connections_of(proc_get_status($proc)['pid']);
    $opened = [];
    for ($i = 1; $i <= 3; $i++) {
        // The first request fetches the map (twice if a seed that is a replica had an old one).
        if ($i === 2) $maps = rcs_slot_map_fetches();
        $reply = json_decode(file_get_contents("http://127.0.0.1:$port/?sid=$sid"), true);
        $opened[] = $reply['opened'];
        // The response may reach us before the request's end has run.
        $closed = $value === '0' ? rcs_wait_until(fn() => $connections() === 0) : $connections() === 0;
        echo "request $i: n=$reply[n], worker connections after it: ", $closed ? 'none' : 'kept', "\n";
    }
    echo 'slot maps fetched by requests 2 and 3: ', rcs_slot_map_fetches() - $maps, "\n";
    echo 'connections opened by requests 2 and 3: ', $opened[2] - $opened[0], "\n";
    proc_terminate($proc);
    proc_close($proc);
}
echo "== a long request after its session closed\n";
// phpredis frees its connection at the session's close: persistent=0 holds
// none while the rest of the request runs; persistent=1 keeps them.
foreach (['0', '1'] as $value) {
    $path = rcs_save_path('prefix=' . urlencode(rcs_prefix()) . "&persistent=$value");
    $child = rcs_spawn("session_id('longafter'); session_start(); \$_SESSION['n'] = 1; session_write_close();"
        . " while (ob_get_level()) ob_end_flush(); echo 'closed', PHP_EOL; fgets(STDIN);",
        rcs_locking(['session.save_path' => $path]));
    fgets($child[1]);
    $pid = proc_get_status($child[0])['pid'];
    $none = $value === '0' ? rcs_wait_until(fn() => rcs_connections_of($pid) === 0) : rcs_connections_of($pid) === 0;
    echo "persistent=$value: connections while the request goes on: ", $none ? 'none' : 'kept', "\n";
    fwrite($child[3], "go\n");
    rcs_wait($child);
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
== a long request after its session closed
persistent=0: connections while the request goes on: none
persistent=1: connections while the request goes on: kept
