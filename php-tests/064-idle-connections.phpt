--TEST--
Kept connections the node closed: one closed while idle (the server's timeout) is found before use and replaced, one closed since its last use is found at send and the call repeated at once on a new connection, both with no warning and no new slot map, counted in node_connections; a node at maxclients gives a warning naming it and the setting, and session_start() fails within its budget, counted
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$sid = 'idle' . bin2hex(random_bytes(6));
$primary = rcs_primary_of(rcs_prefix() . $sid);
$forget_all = function () {
    foreach (rcs_seeds() as [$host, $port]) Resp::forget("$host:$port");
};
$set_timeout = function (int $seconds) {
    foreach (rcs_primaries() as $addr) Resp::send($addr, ['CONFIG', 'SET', 'timeout', (string)$seconds]);
};
register_shutdown_function(function () use ($forget_all, $set_timeout) {
    $forget_all();
    $set_timeout(0);
});

echo rcs_php(<<<PHP
set_error_handler(function (\$type, \$message) { echo "warning: \$message\\n"; return true; });
\$show = function (string \$what) {
    \$c = rediscluster_session_stats()['node_connections'];
    echo "\$what: opened \$c[opened], closed_idle \$c[closed_idle], replaced \$c[replaced]\\n";
};
// Clients of the node other than MONITORs (scripts/test.sh watches the primaries), by id.
\$clients = fn(string \$addr) => array_filter(explode("\\n", Resp::send(\$addr, ['CLIENT', 'LIST', 'TYPE', 'normal'])),
    fn(\$line) => \$line !== '' && !str_contains(\$line, 'cmd=monitor'));
\$normal_clients = fn(string \$addr) => count(\$clients(\$addr));
\$request = function (int \$n) {
    session_id('$sid');
    session_start();
    \$_SESSION['n'] = \$n;
    return session_write_close();
};
\$request(1);
\$opened = rediscluster_session_stats()['node_connections']['opened'];

// The servers close clients idle for 1 s: wait until only this helper's own connection is left.
foreach (rcs_primaries() as \$addr) Resp::send(\$addr, ['CONFIG', 'SET', 'timeout', '1']);
var_dump(rcs_wait_until(fn() => array_sum(array_map(\$normal_clients, rcs_primaries())) === count(rcs_primaries()), 20));
\$slot_maps = rcs_slot_map_fetches();
var_dump(\$request(2));
echo 'new slot maps: ', rcs_slot_map_fetches() - \$slot_maps, "\\n";
echo 'connections opened: ', rediscluster_session_stats()['node_connections']['opened'] - \$opened, "\\n";
\$show('idle');
foreach (rcs_primaries() as \$addr) Resp::send(\$addr, ['CONFIG', 'SET', 'timeout', '0']);

// Closed since its last use: killed between two requests that follow each other.
\$request(3);
// Every client but this helper's own and the MONITORs: this worker's kept connection among them.
foreach (\$clients('$primary') as \$line) {
    if (!str_contains(\$line, 'cmd=client|list') && preg_match('/^id=(\\d+) /', \$line, \$m)) {
        Resp::send('$primary', ['CLIENT', 'KILL', 'ID', \$m[1]]);
    }
}
\$slot_maps = rcs_slot_map_fetches();
var_dump(\$request(4));
echo 'new slot maps: ', rcs_slot_map_fetches() - \$slot_maps, "\\n";
\$c = rediscluster_session_stats()['node_connections'];
// Which of the two finds it depends on how long the kill took (a 100 ms idle threshold).
echo 'found closed and replaced: ', \$c['closed_idle'] + \$c['replaced'], "\\n";
session_id('$sid');
session_start();
echo 'data: ', \$_SESSION['n'], "\\n";
PHP, rcs_locking());
$forget_all();
$set_timeout(0);

echo "== maxclients\n";
[$host, $port] = explode(':', $primary);
$held = stream_socket_client("tcp://$primary", $errno, $errstr, 2);
$send = function (array $args) use ($held) {
    $out = '*' . count($args) . "\r\n";
    foreach ($args as $arg) $out .= '$' . strlen($arg) . "\r\n$arg\r\n";
    fwrite($held, $out);
    return trim(fgets($held));
};
$maxclients = Resp::send($primary, ['CONFIG', 'GET', 'maxclients'])[1];
register_shutdown_function(fn() => $send(['CONFIG', 'SET', 'maxclients', $maxclients]));
echo $send(['CONFIG', 'SET', 'maxclients', '1']), "\n";
echo rcs_php(<<<PHP
set_error_handler(function (\$type, \$message) { echo "warning: \$message\\n"; return true; });
session_id('$sid');
\$t = microtime(true);
var_dump(session_start());
echo 'within the budget: ', json_encode(microtime(true) - \$t < 5), "\\n";
echo 'counted: ', json_encode(rediscluster_session_stats()['node_connections']['refused_maxclients'] > 0), "\\n";
PHP, rcs_locking(['session.save_path' => rcs_save_path('prefix=' . urlencode(rcs_prefix()) . '&timeout=0.5&read_timeout=0.5')]));
echo $send(['CONFIG', 'SET', 'maxclients', $maxclients]), "\n";
echo rcs_php("session_id('$sid'); var_dump(session_start()); echo \$_SESSION['n'], \"\\n\";", rcs_locking());
?>
--EXPECTF--
bool(true)
bool(true)
new slot maps: 0
connections opened: 1
idle: opened %d, closed_idle 1, replaced 0
bool(true)
new slot maps: 0
found closed and replaced: 2
data: 4
== maxclients
+OK
warning: session_start(): Error communicating with the Redis Cluster: %s refused the connection: max number of clients reached (raise maxclients on the node, or hold fewer connections to it)
warning: session_start(): Failed to read session data: rediscluster (path: %s)
bool(false)
within the budget: true
counted: true
+OK
bool(true)
4
