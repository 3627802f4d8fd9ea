--TEST--
A node that announces a huge reply, or streams one in forever, on plain TCP and on TLS: a warning and session_start() === false within timeout + read_timeout, memory that follows the bytes that arrived, and the process lives on
--SKIPIF--
<?php if (!getenv('RCS_TLS_DIR')) die('skip needs the TLS certificates that scripts/test.sh makes (RCS_TLS_DIR)'); ?>
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$transports = ['plain TCP' => '', 'TLS' => getenv('RCS_TLS_DIR')];
foreach ($transports as $transport => $tls) {
    echo "$transport:\n";
    foreach (['bulk-200g', 'bulk-2^62', 'bulk-max', 'bulk-512m+1', 'bulk-400m', 'array-100m'] as $mode) {
        // The fake node needs OpenSSL, which the debug PHPs are built without: Debian's PHP then.
        $node = proc_open([extension_loaded('openssl') ? PHP_BINARY : 'php', '-n', __DIR__ . '/inc/fake-node.php', $mode, $tls],
            [1 => ['pipe', 'w']], $pipes);
        $port = (int)fgets($pipes[1]);
        $path = "seed[]=127.0.0.1:$port&timeout=1&read_timeout=1"
            . ($tls === '' ? '' : "&stream[cafile]=$tls/ca.crt");
        $out = rcs_php('
            set_error_handler(function ($type, $message) { echo "  ", $message, "\n"; return true; });
            $rss = getrusage()["ru_maxrss"];
            $t = microtime(true);
            session_id("hostile");
            $started = session_start();
            $elapsed = microtime(true) - $t;
            echo "  started: ", var_export($started, true), "\n";
            // A loaded machine adds scheduling delay, never a second budget.
            echo "  within timeout + read_timeout: ", var_export($elapsed < 2.3, true), "\n";
            $grown = (getrusage()["ru_maxrss"] - $rss) / 1024;
            echo "  memory grew under 64 MB: ", var_export($grown < 64, true), $grown < 64 ? "" : " ($grown MB)", "\n";
            echo "  alive\n";', ['session.save_path' => $path]);
        proc_terminate($node[0] ?? $node);
        proc_close($node);
        echo " $mode:\n", $out;
    }
}
?>
--EXPECTF--
plain TCP:
 bulk-200g:
  session_start(): Error communicating with the Redis Cluster: %sbulk string longer than 512 MiB
  session_start(): Failed to read session data: rediscluster (path: %s)
  started: false
  within timeout + read_timeout: true
  memory grew under 64 MB: true
  alive
 bulk-2^62:
  session_start(): Error communicating with the Redis Cluster: %sbulk string longer than 512 MiB
  session_start(): Failed to read session data: rediscluster (path: %s)
  started: false
  within timeout + read_timeout: true
  memory grew under 64 MB: true
  alive
 bulk-max:
  session_start(): Error communicating with the Redis Cluster: %sbulk string longer than 512 MiB
  session_start(): Failed to read session data: rediscluster (path: %s)
  started: false
  within timeout + read_timeout: true
  memory grew under 64 MB: true
  alive
 bulk-512m+1:
  session_start(): Error communicating with the Redis Cluster: %sbulk string longer than 512 MiB
  session_start(): Failed to read session data: rediscluster (path: %s)
  started: false
  within timeout + read_timeout: true
  memory grew under 64 MB: true
  alive
 bulk-400m:
  session_start(): Error communicating with the Redis Cluster: %sdid not answer in time
  session_start(): Failed to read session data: rediscluster (path: %s)
  started: false
  within timeout + read_timeout: true
  memory grew under 64 MB: true
  alive
 array-100m:
  session_start(): Error communicating with the Redis Cluster: %sdid not answer in time
  session_start(): Failed to read session data: rediscluster (path: %s)
  started: false
  within timeout + read_timeout: true
  memory grew under 64 MB: true
  alive
TLS:
 bulk-200g:
  session_start(): Error communicating with the Redis Cluster: %sbulk string longer than 512 MiB
  session_start(): Failed to read session data: rediscluster (path: %s)
  started: false
  within timeout + read_timeout: true
  memory grew under 64 MB: true
  alive
 bulk-2^62:
  session_start(): Error communicating with the Redis Cluster: %sbulk string longer than 512 MiB
  session_start(): Failed to read session data: rediscluster (path: %s)
  started: false
  within timeout + read_timeout: true
  memory grew under 64 MB: true
  alive
 bulk-max:
  session_start(): Error communicating with the Redis Cluster: %sbulk string longer than 512 MiB
  session_start(): Failed to read session data: rediscluster (path: %s)
  started: false
  within timeout + read_timeout: true
  memory grew under 64 MB: true
  alive
 bulk-512m+1:
  session_start(): Error communicating with the Redis Cluster: %sbulk string longer than 512 MiB
  session_start(): Failed to read session data: rediscluster (path: %s)
  started: false
  within timeout + read_timeout: true
  memory grew under 64 MB: true
  alive
 bulk-400m:
  session_start(): Error communicating with the Redis Cluster: %sdid not answer in time
  session_start(): Failed to read session data: rediscluster (path: %s)
  started: false
  within timeout + read_timeout: true
  memory grew under 64 MB: true
  alive
 array-100m:
  session_start(): Error communicating with the Redis Cluster: %sdid not answer in time
  session_start(): Failed to read session data: rediscluster (path: %s)
  started: false
  within timeout + read_timeout: true
  memory grew under 64 MB: true
  alive
