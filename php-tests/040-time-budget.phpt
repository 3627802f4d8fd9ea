--TEST--
One time budget per PHP call: however many seeds hang or refuse, session_start() gives up within timeout + read_timeout; a hung seed ahead of a live one costs one read timeout
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
set_error_handler(function ($type, $message) {
    echo "  ", preg_replace('/ \(path: .*\)$/', '', $message), "\n";
    return true;
});
$port = fn($server) => (int)substr(strrchr(stream_socket_get_name($server, false), ':'), 1);
// Nodes that accept connections (the kernel does) and never answer.
$hung = [stream_socket_server('tcp://127.0.0.1:0'), stream_socket_server('tcp://127.0.0.1:0'),
    stream_socket_server('tcp://127.0.0.1:0')];
// Closed ports: refused at once.
$closed = [];
foreach (range(1, 3) as $_) {
    $server = stream_socket_server('tcp://127.0.0.1:0');
    $closed[] = $port($server);
    fclose($server);
}
$try = function (array $ports, string $timeouts) {
    $seeds = implode('&', array_map(fn($p) => "seed[]=127.0.0.1:$p", $ports));
    rcs_use_session(['session.save_path' => "$seeds&$timeouts"]);
    $t = microtime(true);
    var_dump(session_start());
    return microtime(true) - $t;
};
// Before, three hung seeds took seeds x 2 x the connect timeout: 6 s here.
$elapsed = $try(array_map($port, $hung), 'timeout=1&read_timeout=1');
echo "3 hung seeds: ", $elapsed >= 1.5 && $elapsed < 2.5 ? 'gave up within timeout + read_timeout (2 s)' : "$elapsed s", "\n";
$elapsed = $try($closed, 'timeout=1&read_timeout=1');
echo "3 refused seeds: ", $elapsed < 0.5 ? 'gave up at once' : "$elapsed s", "\n";
// A hung seed ahead of a live one costs one read timeout.
$live = array_map(fn($seed) => $seed[1], rcs_seeds());
session_id('budget');
$elapsed = $try([$port($hung[0]), $live[0]], 'timeout=1&read_timeout=1');
echo "hung seed first: ", $elapsed >= 0.8 && $elapsed < 1.8 ? 'one read timeout' : "$elapsed s", "\n";
session_write_close();
?>
--EXPECTF--
  session_start(): Couldn't map cluster keyspace using any provided seed: %s
  session_start(): Failed to read session data: rediscluster
bool(false)
3 hung seeds: gave up within timeout + read_timeout (2 s)
  session_start(): Couldn't map cluster keyspace using any provided seed: %s
  session_start(): Failed to read session data: rediscluster
bool(false)
3 refused seeds: gave up at once
bool(true)
hung seed first: one read timeout
