--TEST--
A seed's host name is resolved within the hook's budget: a name server that answers in 5 s fails session_start() with a warning naming the host once the connect timeout is spent, not after 5 s; one that answers at once serves the session
--SKIPIF--
<?php
// The child PHP runs in a mount namespace of its own, where a resolv.conf of
// the test's stands at /etc/resolv.conf; its name server listens on port 53.
$probe = tempnam(sys_get_temp_dir(), 'rcs');
file_put_contents($probe, "nameserver 127.0.0.53\n");
$seen = shell_exec("unshare -m sh -c 'mount --bind \"\$0\" /etc/resolv.conf && cat /etc/resolv.conf' " . escapeshellarg($probe) . " 2>/dev/null");
unlink($probe);
if ($seen !== "nameserver 127.0.0.53\n") die('skip needs unshare -m and mount --bind (root)');
$port53 = @stream_socket_server('udp://127.53.0.' . random_int(1, 254) . ':53', $errno, $error, STREAM_SERVER_BIND);
if ($port53 === false) die("skip cannot listen on port 53: $error");
?>
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
// A name server of the test's, and the resolv.conf that names it.
$address = '127.53.' . random_int(0, 255) . '.' . random_int(1, 254);
$name_server = proc_open([PHP_BINARY, '-n', __DIR__ . '/inc/dns-server.php', $address,
    'rcs-slow.test=127.0.0.1@5', 'rcs-fast.test=127.0.0.1@0'], [0 => ['pipe', 'r'], 1 => ['pipe', 'w']], $pipes);
echo fgets($pipes[1]);
$resolv_conf = tempnam(sys_get_temp_dir(), 'rcs');
file_put_contents($resolv_conf, "nameserver $address\n");
$with_resolv_conf = ['unshare', '-m', 'sh', '-c', 'mount --bind "$0" /etc/resolv.conf && exec "$@"', $resolv_conf];
$live = rcs_seeds()[0][1];
// The save_path of this test without its seeds: auth (the ACL user's run) and prefix.
$rest = implode('&', array_filter(explode('&', rcs_save_path('prefix=' . urlencode(rcs_prefix()))),
    fn($part) => !str_starts_with($part, 'seed[]=')));
$warnings = 'set_error_handler(function ($type, $message) {
    echo "  ", preg_replace("/ \(path: .*\)$/", "", $message), "\n";
    return true;
});';

echo "A name server that answers in 5 s:\n";
echo rcs_wait(rcs_spawn($warnings . '
    $t = microtime(true);
    var_dump(session_start());
    $elapsed = microtime(true) - $t;
    // Before, getaddrinfo waited for the answer: 5 s, then the session started.
    echo $elapsed < 3.5 ? "gave up within the budget (2 s)" : "gave up after $elapsed s", "\n";',
    ['session.save_path' => "seed[]=rcs-slow.test:$live&timeout=1&read_timeout=1&$rest"], wrap: $with_resolv_conf));

echo "A name server that answers at once:\n";
echo rcs_wait(rcs_spawn($warnings . '
    session_id("dns-fast");
    var_dump(session_start());
    $_SESSION["n"] = 1;
    var_dump(session_write_close(), session_start(), $_SESSION["n"]);',
    ['session.save_path' => "seed[]=rcs-fast.test:$live&timeout=1&read_timeout=1&$rest"], wrap: $with_resolv_conf));

fclose($pipes[0]);
fclose($pipes[1]);
proc_close($name_server);
unlink($resolv_conf);
?>
--EXPECTF--
ready
A name server that answers in 5 s:
  session_start(): Couldn't map cluster keyspace using any provided seed: resolving rcs-slow.test timed out after %d ms
  session_start(): Failed to read session data: rediscluster
bool(false)
gave up within the budget (2 s)
A name server that answers at once:
bool(true)
bool(true)
bool(true)
int(1)
