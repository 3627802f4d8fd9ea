--TEST--
Malformed save_path forms give a clear warning, session_start() returns false, and nothing is stored
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$seed = rcs_save_path();
$cases = [
    '',
    'tcp://127.0.0.1:6379',
    'seed=127.0.0.1:7000',
    'seed[]=nohost',
    'seed[]=127.0.0.1:notaport',
    "$seed&timeout=-1",
    "$seed&read_timeout=soon",
    "$seed&auth[]=a&auth[]=b&auth[]=c",
    "$seed&auth[x]=hunter2&auth[y]=b",
    "$seed&prefix[]=x",
    "$seed&stream[verify_peer]=maybe",
    "$seed&stream[peer_name]=redis.internal",
    "$seed&stream[local_cert]=/tmp/c.pem",
    "$seed&stream=1",
];
set_error_handler(function ($type, $message) {
    echo "  ", preg_replace('/ \(path: .*\)$/', '', $message), "\n";
    return true;
});
foreach ($cases as $path) {
    rcs_use_session(['session.save_path' => $path]);
    echo "[", str_replace($seed, "SEEDS", $path), "]\n";
    var_dump(session_start());
}
var_dump(rcs_keys(rcs_prefix() . '*'));
?>
--EXPECT--
[]
  session_start(): session.save_path needs one or more seed[]=host:port entries for the rediscluster handler
  session_start(): Failed to initialize storage module: rediscluster
bool(false)
[tcp://127.0.0.1:6379]
  session_start(): session.save_path needs one or more seed[]=host:port entries for the rediscluster handler
  session_start(): Failed to initialize storage module: rediscluster
bool(false)
[seed=127.0.0.1:7000]
  session_start(): session.save_path needs one or more seed[]=host:port entries for the rediscluster handler
  session_start(): Failed to initialize storage module: rediscluster
bool(false)
[seed[]=nohost]
  session_start(): Seed 'nohost' not in host:port format
  session_start(): Failed to initialize storage module: rediscluster
bool(false)
[seed[]=127.0.0.1:notaport]
  session_start(): Seed '127.0.0.1:notaport' not in host:port format
  session_start(): Failed to initialize storage module: rediscluster
bool(false)
[SEEDS&timeout=-1]
  session_start(): Can't set negative timeout values in session configuration
  session_start(): Failed to initialize storage module: rediscluster
bool(false)
[SEEDS&read_timeout=soon]
  session_start(): session.save_path: read_timeout='soon' is not a number of seconds
  session_start(): Failed to initialize storage module: rediscluster
bool(false)
[SEEDS&auth[]=a&auth[]=b&auth[]=c]
  session_start(): When passing an array as auth it must have one or two elements!
  session_start(): Failed to initialize storage module: rediscluster
bool(false)
[SEEDS&auth[x]=hunter2&auth[y]=b]
  session_start(): session.save_path: an auth array needs auth[]=user&auth[]=pass or auth[user]=..&auth[pass]=..
  session_start(): Failed to initialize storage module: rediscluster
bool(false)
[SEEDS&prefix[]=x]
  session_start(): session.save_path: prefix must be a single value
  session_start(): Failed to initialize storage module: rediscluster
bool(false)
[SEEDS&stream[verify_peer]=maybe]
  session_start(): session.save_path: stream[verify_peer] must be 0 or 1
  session_start(): Failed to initialize storage module: rediscluster
bool(false)
[SEEDS&stream[peer_name]=redis.internal]
  session_start(): session.save_path: stream[peer_name] is not supported: certificates are checked against each node's address; use stream[verify_peer_name]=0 to skip the name check
  session_start(): Failed to initialize storage module: rediscluster
bool(false)
[SEEDS&stream[local_cert]=/tmp/c.pem]
  session_start(): session.save_path: stream[local_cert] and stream[local_pk] go together
  session_start(): Failed to initialize storage module: rediscluster
bool(false)
[SEEDS&stream=1]
  session_start(): session.save_path: stream must be given as stream[option]=value
  session_start(): Failed to initialize storage module: rediscluster
bool(false)
array(0) {
}
