--TEST--
An unreachable or hung cluster: a warning and session_start() === false within the configured timeouts, no exception; hung and dead seeds ahead of live ones cost the worker one connect timeout, once
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
set_error_handler(function ($type, $message) {
    echo "  ", preg_replace('/ \(path: .*\)$/', '', $message), "\n";
    return true;
});

// Closed ports: refused at once.
$refused = stream_socket_server('tcp://127.0.0.1:0');
$closed_port = (int)substr(strrchr(stream_socket_get_name($refused, false), ':'), 1);
fclose($refused);
rcs_use_session(['session.save_path' => "seed[]=127.0.0.1:$closed_port&timeout=1"]);
$t = microtime(true);
var_dump(session_start());
var_dump(microtime(true) - $t < 3);

// A node that accepts connections but never answers: the read timeout applies.
$hung = stream_socket_server('tcp://127.0.0.1:0');   // the kernel accepts; nobody replies
$hung_port = (int)substr(strrchr(stream_socket_get_name($hung, false), ':'), 1);
rcs_use_session(['session.save_path' => "seed[]=127.0.0.1:$hung_port&timeout=0.5&read_timeout=0.5"]);
$t = microtime(true);
var_dump(session_start());
$elapsed = microtime(true) - $t;
var_dump($elapsed >= 0.4 && $elapsed < 4);

// A hung seed and a refused one ahead of live ones: the first request of the
// worker pays the connect timeout once, later ones nothing.
rcs_use_session(['session.save_path' => "seed[]=127.0.0.1:$hung_port&seed[]=127.0.0.1:$closed_port&"
    . rcs_save_path('timeout=0.5&read_timeout=0.5&prefix=' . urlencode(rcs_prefix()))]);
$t = microtime(true);
var_dump(session_start());
session_abort();
$first = microtime(true) - $t;
$t = microtime(true);
var_dump(session_start());
session_abort();
$second = microtime(true) - $t;
var_dump($first < 2.5, $second < 0.2);

// The same worker recovers when the save_path points at the live cluster.
rcs_use_session();
var_dump(session_start());
session_abort();
?>
--EXPECTF--
  session_start(): Couldn't map cluster keyspace using any provided seed: %s
  session_start(): Failed to read session data: rediscluster
bool(false)
bool(true)
  session_start(): Couldn't map cluster keyspace using any provided seed: %s
  session_start(): Failed to read session data: rediscluster
bool(false)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
