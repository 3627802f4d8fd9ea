--TEST--
A primary at maxclients (its connections filled): session_start() waits for a free connection with pauses that grow, within its budget (timeout + read_timeout), and keeps the slot map: a handful of connects and the slot map checked once, where each stuck request made ~16 and ~14 before; one warning naming the node and the setting, counted; with failover=error the session is read from a replica once the wait is over, the warning saying why
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$sid = 'full' . bin2hex(random_bytes(6));
$primary = rcs_primary_of(rcs_prefix() . $sid);
echo rcs_php("session_id('$sid'); session_start(); \$_SESSION['n'] = 1; var_dump(session_write_close());", rcs_locking());
$path = fn(string $extra = '') => rcs_save_path('prefix=' . urlencode(rcs_prefix()) . "&timeout=0.5&read_timeout=1$extra");
$request = <<<PHP
set_error_handler(function (\$type, \$message) { echo "warning: ", preg_replace('/ \\(path: .*\\)$/', '', \$message), "\\n"; return true; });
session_id('$sid');
\$t = microtime(true);
var_dump(session_start());
\$elapsed = microtime(true) - \$t;
echo 'waited most of the 1.5 s budget: ', json_encode(\$elapsed > 1.0 && \$elapsed < 5), "\\n";
echo 'counted: ', json_encode(rediscluster_session_stats()['node_connections']['refused_maxclients'] >= 2), "\\n";
if (session_status() === PHP_SESSION_ACTIVE) echo 'read: ', \$_SESSION['n'], "\\n";
PHP;

$held = rcs_fill_node($primary);
$measure = function (string $save_path) use ($primary, $request) {
    $rejected = resp_stats_sum([$primary], 'rejected_connections');
    $slot_maps = rcs_slot_map_fetches();
    echo rcs_php($request, rcs_locking(['session.save_path' => $save_path]));
    $rejected = resp_stats_sum([$primary], 'rejected_connections') - $rejected;
    $slot_maps = rcs_slot_map_fetches() - $slot_maps;
    echo "connects refused: $rejected, CLUSTER SLOTS: $slot_maps\n";
    echo 'a few connects, retried: ', json_encode($rejected >= 2 && $rejected <= 8), "\n";
    // A new process may fetch the map once, if its siblings shared none, and
    // checks it once at the full node (a failover may have moved the slot).
    echo 'the slot map kept: ', json_encode($slot_maps <= 2), "\n";
};
$measure($path());
echo "== failover=error\n";
$measure($path('&failover=error'));

$held = [];
echo rcs_php("session_id('$sid'); var_dump(session_start()); echo \$_SESSION['n'], \"\\n\";", rcs_locking());
?>
--EXPECTF--
bool(true)
warning: session_start(): Error communicating with the Redis Cluster: %s refused the connection: max number of clients reached (raise maxclients on the node, or hold fewer connections to it)
warning: session_start(): Failed to read session data: rediscluster
bool(false)
waited most of the 1.5 s budget: true
counted: true
connects refused: %d, CLUSTER SLOTS: %d
a few connects, retried: true
the slot map kept: true
== failover=error
warning: session_start(): Session sha256:%x is read only: its primary could not serve it (max number of clients reached), so it was read from a replica (failover=error)
bool(true)
waited most of the 1.5 s budget: true
counted: true
read: 1
connects refused: %d, CLUSTER SLOTS: %d
a few connects, retried: true
the slot map kept: true
bool(true)
1
