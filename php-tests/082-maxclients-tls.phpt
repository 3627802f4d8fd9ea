--TEST--
A TLS node at maxclients closes a new connection in the TLS handshake, its refusal unsent: session_start() takes that for the refusal it is, waits for a free connection within its budget with pauses that grow, and names maxclients; before, each close read as a broken node, fetching the slot map again every time (about 30 connects refused in 1.5 s against a one-node cluster, 15 CLUSTER SLOTS against three primaries)
--SKIPIF--
<?php
if (!getenv('RCS_TLS_SEEDS')) die('skip needs a server with TLS and its certificates, as for the TLS cluster that scripts/test.sh starts (RCS_TLS_SEEDS, RCS_TLS_DIR)');
// The debug PHPs are built without it (scripts/php-builds.sh).
if (!extension_loaded('openssl')) die('skip needs PHP\'s openssl extension: the test speaks TLS to its own node to set it up');
?>
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
// A one-node TLS cluster of its own: filling a node of the shared TLS cluster
// would refuse the other stages' TLS tests.
$dir = rcs_env('RCS_TLS_DIR');
$data = sys_get_temp_dir() . '/rcs-082-' . getmypid();
@mkdir($data);
$server = trim((string)shell_exec('bash -c ' . escapeshellarg('. ' . __DIR__ . '/../scripts/lib.sh; server_binaries ' . rcs_env('RCS_FLAVOR') . '; echo $SERVER_BIN')));
$context = stream_context_create(['ssl' => ['cafile' => "$dir/ca.crt", 'verify_peer_name' => false]]);
$command = function ($socket, string ...$args): string {
    $out = '*' . count($args) . "\r\n";
    foreach ($args as $arg) $out .= '$' . strlen($arg) . "\r\n$arg\r\n";
    fwrite($socket, $out);
    $line = (string)fgets($socket);
    if ($line !== '' && $line[0] === '$') {
        $body = '';
        $length = (int)substr($line, 1) + 2;
        while (strlen($body) < $length && !feof($socket)) $body .= fread($socket, $length - strlen($body));
        return substr($body, 0, -2);
    }
    return rtrim(substr($line, 1));
};
$node = null;
register_shutdown_function(function () use (&$node, $data) {
    if ($node) {
        proc_terminate($node);
        proc_close($node);
    }
    shell_exec('rm -rf ' . escapeshellarg($data));
});
// A port (and its cluster bus port) another process may take first: tried again on another.
for ($try = 0, $admin = false; $try < 5 && $admin === false; $try++) {
    if ($node) {
        proc_terminate($node);
        proc_close($node);
    }
    $port = random_int(20000, 50000);
    @unlink("$data/nodes.conf");
    $node = proc_open([$server, '--port', '0', '--tls-port', (string)$port, '--tls-cluster', 'yes',
        '--tls-cert-file', "$dir/server.crt", '--tls-key-file', "$dir/server.key", '--tls-ca-cert-file', "$dir/ca.crt",
        '--tls-auth-clients', 'no', '--cluster-enabled', 'yes', '--cluster-config-file', "$data/nodes.conf",
        '--dir', $data, '--save', '', '--appendonly', 'no'], [1 => ['file', '/dev/null', 'w'], 2 => ['file', '/dev/null', 'w']], $pipes);
    $connect = fn() => @stream_socket_client("tls://127.0.0.1:$port", $errno, $error, 2, STREAM_CLIENT_CONNECT, $context);
    rcs_wait_until(function () use ($connect, &$admin) { return ($admin = $connect()) !== false; }, 5);
}
$admin !== false or exit("the TLS node did not start\n");
stream_set_timeout($admin, 5);
$command($admin, 'CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
rcs_wait_until(fn() => str_contains($command($admin, 'CLUSTER', 'INFO'), 'cluster_state:ok')) or exit("no cluster\n");

$save_path = "seed[]=127.0.0.1:$port&timeout=0.5&read_timeout=1&stream[cafile]=$dir/ca.crt&stream[verify_peer_name]=0";
$request = <<<'PHP'
set_error_handler(function ($type, $message) { echo "warning: ", preg_replace('/ \(path: .*\)$/', '', $message), "\n"; return true; });
session_id('tlsfull');
$t = microtime(true);
var_dump(session_start());
$elapsed = microtime(true) - $t;
echo 'waited most of the 1.5 s budget: ', json_encode($elapsed > 1.0 && $elapsed < 5), "\n";
echo 'counted: ', json_encode(rediscluster_session_stats()['node_connections']['refused_maxclients'] >= 2), "\n";
PHP;
echo rcs_php("session_id('tlsfull'); var_dump(session_start()); \$_SESSION['n'] = 1; session_write_close();", rcs_locking(['session.save_path' => $save_path]));

// Fill it: its clients (this one included) and the few held here.
preg_match('/^connected_clients:(\d+)/m', $command($admin, 'INFO', 'clients'), $m);
$command($admin, 'CONFIG', 'SET', 'maxclients', (string)($m[1] + 3));
$held = [];
while (count($held) < 50 && ($socket = $connect()) !== false) {
    stream_set_timeout($socket, 2);
    if ($command($socket, 'PING') !== 'PONG') break;
    $held[] = $socket;
}
echo 'filled: ', json_encode(count($held) >= 1 && count($held) < 50), "\n";
$command($admin, 'CONFIG', 'RESETSTAT');
echo rcs_php($request, rcs_locking(['session.save_path' => $save_path]));
preg_match('/^rejected_connections:(\d+)/m', $command($admin, 'INFO', 'stats'), $m);
echo 'a few connects, retried: ', json_encode($m[1] >= 2 && $m[1] <= 16), " ($m[1])\n";

$held = [];
$command($admin, 'CONFIG', 'SET', 'maxclients', '10000');
echo rcs_php("session_id('tlsfull'); var_dump(session_start()); echo \$_SESSION['n'], \"\\n\";", rcs_locking(['session.save_path' => $save_path]));
?>
--EXPECTF--
bool(true)
filled: true
warning: session_start(): Error communicating with the Redis Cluster: 127.0.0.1:%d closed the connection in the TLS handshake, as a node does at max number of clients (or a proxy whose node is down) (raise maxclients on the node, or hold fewer connections to it)
warning: session_start(): Failed to read session data: rediscluster
bool(false)
waited most of the 1.5 s budget: true
counted: true
a few connects, retried: true (%d)
bool(true)
1
