--TEST--
A TLS node that sends a byte every 0.2 s, of a reply's record or of its handshake: a warning and session_start() === false within timeout + read_timeout, not once the record is whole
--SKIPIF--
<?php if (!getenv('RCS_TLS_DIR')) die('skip needs the TLS certificates that scripts/test.sh makes (RCS_TLS_DIR)'); ?>
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$tls = rcs_env('RCS_TLS_DIR');
foreach (['reply', 'handshake'] as $mode) {
    // The node needs OpenSSL, which the debug PHPs are built without: Debian's PHP then.
    $node = proc_open([extension_loaded('openssl') ? PHP_BINARY : 'php', '-n', __DIR__ . '/inc/tls-trickle-node.php', $mode, $tls],
        [1 => ['pipe', 'w']], $pipes);
    $port = (int)fgets($pipes[1]);
    $out = rcs_php('
        set_error_handler(function ($type, $message) { echo "  ", $message, "\n"; return true; });
        $t = microtime(true);
        session_id("trickled");
        $started = session_start();
        $elapsed = microtime(true) - $t;
        echo "  started: ", var_export($started, true), "\n";
        // The budget is 2 s; a loaded machine adds scheduling delay, never a second budget.
        echo "  within timeout + read_timeout: ", var_export($elapsed < 4, true), $elapsed < 4 ? "" : sprintf(" (%.1f s)", $elapsed), "\n";',
        ['session.save_path' => "seed[]=127.0.0.1:$port&timeout=1&read_timeout=1&stream[cafile]=$tls/ca.crt"]);
    proc_terminate($node);
    proc_close($node);
    echo "$mode:\n", $out;
}
?>
--EXPECTF--
reply:
  session_start(): Error communicating with the Redis Cluster: %sdid not answer in time
  session_start(): Failed to read session data: rediscluster (path: %s)
  started: false
  within timeout + read_timeout: true
handshake:
  session_start(): Couldn't map cluster keyspace using any provided seed: %sdid not answer in time
  session_start(): Failed to read session data: rediscluster (path: %s)
  started: false
  within timeout + read_timeout: true
