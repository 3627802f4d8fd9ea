--TEST--
A primary at maxclients that an operator failed over away from: a warm worker that shares no slot map checks the map once at the refusal and is served by the new primary at once (before: every session_start() waited its budget and failed, 18 refused connects for 3 requests)
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$sid = 'ff' . bin2hex(random_bytes(6));
$primary = rcs_primary_of(rcs_prefix() . $sid);
echo rcs_php("session_id('$sid'); session_start(); \$_SESSION['n'] = 1; session_write_close();", rcs_locking());
$replica = null;
foreach (rcs_seeds() as [$host, $port]) {
    $role = Resp::send("$host:$port", ['ROLE']);
    if ($role[0] === 'slave' && "{$role[1]}:{$role[2]}" === $primary) $replica = "$host:$port";
}
$save_path = rcs_save_path('prefix=' . urlencode(rcs_prefix()) . '&timeout=0.5&read_timeout=1&shared_slot_map=0');
$go = rcs_go_file();
register_shutdown_function(fn() => @unlink("$go.ready"));
// Warm (connected to the old primary, its map naming it), then it waits.
$child = rcs_spawn("set_error_handler(function (\$t, \$m) { echo 'warning: ', preg_replace('/ \\\\(path: .*\\\\)\$/', '', \$m), \"\\n\"; return true; });"
    . "session_id('$sid'); session_start(); session_write_close(); touch('$go.ready'); " . rcs_hold_code($go)
    . " for (\$i = 0; \$i < 3; \$i++) { session_id('$sid'); \$t = microtime(true); \$ok = session_start();"
    . " printf(\"served: %s, within 1 s: %s, n=%s\\n\", json_encode(\$ok), json_encode(microtime(true) - \$t < 1.0), \$_SESSION['n'] ?? '-');"
    . " if (\$ok) session_write_close(); }",
    rcs_locking(['session.save_path' => $save_path]));
rcs_wait_until(fn() => file_exists("$go.ready"), 30);
// TAKEOVER: no election, which the cluster refuses for a while after another failover of that shard.
Resp::send($replica, ['CLUSTER', 'FAILOVER', 'TAKEOVER']);
rcs_wait_until(fn() => Resp::send($primary, ['ROLE'])[0] === 'slave', 10);
echo 'failed over: ', json_encode(Resp::send($primary, ['ROLE'])[0] === 'slave'), "\n";
rcs_kill_clients($primary);
$maxclients = Resp::send($primary, ['CONFIG', 'GET', 'maxclients'])[1];
$held = rcs_fill_node($primary);
$refused = resp_stats_sum([$primary], 'rejected_connections');
touch($go);
echo rcs_wait($child);
$refused = resp_stats_sum([$primary], 'rejected_connections') - $refused;
echo 'a connect or two refused, not a wait per request: ', json_encode($refused <= 3), " ($refused)\n";
// The old primary back for the tests after this one; it refuses connections until its maxclients is.
$held = [];
rcs_wait_until(function () use ($primary, $maxclients) {
    try {
        return Resp::send($primary, ['CONFIG', 'SET', 'maxclients', $maxclients]) === 'OK';
    } catch (Throwable) {
        return false;
    }
}, 10);
Resp::send($primary, ['CLUSTER', 'FAILOVER', 'TAKEOVER']);
rcs_wait_until(fn() => Resp::send($primary, ['ROLE'])[0] === 'master', 10);
?>
--EXPECTF--
failed over: true
served: true, within 1 s: true, n=1
served: true, within 1 s: true, n=1
served: true, within 1 s: true, n=1
a connect or two refused, not a wait per request: true (%d)
