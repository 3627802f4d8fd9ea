--TEST--
TLS (stream[...]) against a TLS-only cluster: cafile, mutual TLS, verify_peer=0; a wrong CA, a missing file or plain TCP fail with a clear warning; locking works over TLS
--SKIPIF--
<?php if (!getenv('RCS_TLS_SEEDS')) die('skip needs the TLS cluster that scripts/test.sh starts (RCS_TLS_SEEDS, RCS_TLS_DIR)'); ?>
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$dir = rcs_env('RCS_TLS_DIR');
$seeds = implode('&', array_map(fn($s) => "seed[]=$s", explode(',', rcs_env('RCS_TLS_SEEDS'))));
$path = fn(string $tls) => "$seeds&timeout=0.5&read_timeout=0.5&prefix=" . urlencode(rcs_prefix()) . ($tls === '' ? '' : "&$tls");
$collect = 'set_error_handler(function ($t, $m) { echo "  ", preg_replace("/ \\\\(path: .*\\\\)$/", "", $m), "\n"; return true; });';
$cycle = "$collect session_id('tls1'); var_dump(session_start()); \$_SESSION['n'] = (\$_SESSION['n'] ?? 0) + 1; echo 'n=', \$_SESSION['n'], \"\\n\"; session_write_close();";
foreach ([
    'cafile' => "stream[cafile]=$dir/ca.crt",
    'mutual TLS' => "stream[cafile]=$dir/ca.crt&stream[local_cert]=$dir/client.crt&stream[local_pk]=$dir/client.key",
    'verify_peer=0' => 'stream[verify_peer]=0',
    'verify_peer_name=0' => "stream[cafile]=$dir/ca.crt&stream[verify_peer_name]=0",
    'wrong CA' => "stream[cafile]=$dir/other-ca.crt",
    'missing cafile' => "stream[cafile]=$dir/missing.crt",
    'plain TCP' => '',
] as $label => $tls) {
    echo "$label:\n";
    $t = microtime(true);
    $out = rcs_php($cycle, rcs_locking(['session.save_path' => $path($tls)]));
    echo preg_replace(['/(Couldn\'t map cluster keyspace using any provided seed: ).*/', '/n=\d+/'], ['$1...', 'n=N'], $out);
    echo "  within 2 s: ", var_export(microtime(true) - $t < 2, true), "\n";
}

// Two processes x 50 locked increments over TLS: nothing lost.
$sid = 'tlscontention' . bin2hex(random_bytes(6));
$worker = "for (\$i = 0; \$i < 50; \$i++) { session_id('$sid'); session_start(); \$_SESSION['n'] = (\$_SESSION['n'] ?? 0) + 1; session_write_close(); }";
$ini = rcs_locking(['session.save_path' => $path("stream[cafile]=$dir/ca.crt")]);
$children = [rcs_spawn($worker, $ini), rcs_spawn($worker, $ini)];
echo implode('', array_map('rcs_wait', $children));
echo rcs_php("session_id('$sid'); session_start(['read_and_close' => true]); echo 'total: ', \$_SESSION['n'], \"\\n\";", $ini);
?>
--EXPECT--
cafile:
bool(true)
n=N
  within 2 s: true
mutual TLS:
bool(true)
n=N
  within 2 s: true
verify_peer=0:
bool(true)
n=N
  within 2 s: true
verify_peer_name=0:
bool(true)
n=N
  within 2 s: true
wrong CA:
  session_start(): Couldn't map cluster keyspace using any provided seed: ...
  session_start(): Failed to read session data: rediscluster
bool(false)
n=N
  within 2 s: true
missing cafile:
  session_start(): Couldn't map cluster keyspace using any provided seed: ...
  session_start(): Failed to read session data: rediscluster
bool(false)
n=N
  within 2 s: true
plain TCP:
  session_start(): Couldn't map cluster keyspace using any provided seed: ...
  session_start(): Failed to read session data: rediscluster
bool(false)
n=N
  within 2 s: true
total: 100
