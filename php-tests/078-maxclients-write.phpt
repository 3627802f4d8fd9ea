--TEST--
A primary at maxclients between a locked session's read and its write (its connections closed, the node filled; the primary is the only seed): the write waits for a free connection within its budget and keeps the slot map (before, it gave up after 0.1 s with "Couldn't map cluster keyspace"), warns once naming the node and the setting; the close tries the release once and says that the next waiter takes the lock over a lease after it came, the lock gone once the node is freed, the data unchanged; unleased, the close waits its budget and releases the lock as soon as the node takes a connection; a lease the watchdog cannot renew at maxclients keeps its lock while nobody waits, and costs a few connects and no CLUSTER SLOTS
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$sid = 'fullw' . bin2hex(random_bytes(6));
$primary = rcs_primary_of(rcs_prefix() . $sid);
echo rcs_php("session_id('$sid'); session_start(); \$_SESSION['n'] = 1; var_dump(session_write_close());", rcs_locking());
// Its only seed is the full primary: no other node to ask for a map.
$save_path = preg_replace('/(seed\[\]=[^&]*&)+/', "seed[]=$primary&", rcs_save_path('prefix=' . urlencode(rcs_prefix()) . '&timeout=0.5&read_timeout=1'));
// Warnings printed without the save_path PHP quotes; one naming maxclients touches $marker, if given.
$collect = fn(string $marker = '') => 'set_error_handler(function ($type, $message) { echo "warning: ", preg_replace("/ \\\\([^()]*seed\\\\[\\\\][^()]*\\\\)$/", "", $message), "\n";'
    . ($marker === '' ? '' : ' if (str_contains($message, "max number of clients")) touch(' . var_export($marker, true) . ');')
    . ' return true; });';
// This session's connections to the node: all but this test's own and MONITORs.
$clients = function () use ($primary) {
    preg_match_all('/^id=\d+ (?!.*cmd=(?:monitor|client\|list))/m', Resp::send($primary, ['CLIENT', 'LIST', 'TYPE', 'normal']), $m);
    return count($m[0]);
};
$counts = fn() => [resp_stats_sum([$primary], 'rejected_connections'), rcs_slot_map_fetches()];
$write = ' $t = microtime(true); session_write_close(); $elapsed = microtime(true) - $t;'
    . ' echo "waited most of its 1.5 s budget: ", json_encode($elapsed > 1.0 && $elapsed < 8), "\n";';

echo "== the write\n";
$go = rcs_go_file();
$child = rcs_spawn($collect() . " session_id('$sid'); var_dump(session_start()); \$_SESSION['n'] = 2; " . rcs_hold_code($go) . $write,
    rcs_locking(['session.save_path' => $save_path]));
// The request's connection, lent to the watchdog for its renewals (it makes
// none of its own while that one serves), closes: a server's timeout, a middlebox.
var_dump(rcs_wait_until(fn() => rcs_lock_keys_left($sid) !== [] && $clients() === 1));
rcs_kill_clients($primary);
$held = rcs_fill_node($primary);
[$rejected, $slot_maps] = $counts();
touch($go);
echo rcs_wait($child);
[$rejected_after, $slot_maps_after] = $counts();
// The write's and the close's, and a renewal's that may have fallen due meanwhile.
echo 'a few connects: ', json_encode($rejected_after - $rejected <= 12), ', the slot map kept: ', json_encode($slot_maps_after === $slot_maps), "\n";
$held = [];
// The lock left behind: its heartbeat stands still, so the next request breaks it.
echo rcs_php("session_id('$sid'); session_start(); echo \$_SESSION['n'], \"\\n\";", rcs_locking());

echo "== unleased: the close waits for the node to release the lock\n";
$go = rcs_go_file();
$warned = rcs_go_file();
$child = rcs_spawn($collect($warned) . " session_id('$sid'); var_dump(session_start()); \$_SESSION['n'] = 3; " . rcs_hold_code($go) . $write,
    rcs_locking_unleased(['session.save_path' => $save_path, 'redis.session.lock_expire' => '60']));
var_dump(rcs_wait_until(fn() => rcs_lock_keys_left($sid) !== [] && $clients() === 1));
rcs_kill_clients($primary);
$held = rcs_fill_node($primary);
touch($go);
// The write gave up: the node takes connections again while the close tries to release.
var_dump(rcs_wait_until(fn() => file_exists($warned), 10));
$held = [];
echo rcs_wait($child);
echo 'released, not left to lock_expire: ', json_encode(rcs_lock_keys_left($sid) === []), "\n";
echo rcs_php("session_id('$sid'); session_start(); echo \$_SESSION['n'], \"\\n\";", rcs_locking());

echo "== the watchdog\n";
$go = rcs_go_file();
$child = rcs_spawn($collect() . " session_id('$sid'); var_dump(session_start()); " . rcs_hold_code($go) . ' session_abort();'
    . ' echo "renewals failed: ", json_encode(rediscluster_session_stats()["lease_renewal_failures"] > 0), "\n";',
    rcs_locking(['session.save_path' => $save_path]));
var_dump(rcs_wait_until(fn() => rcs_lock_keys_left($sid) !== [] && $clients() === 1));
rcs_kill_clients($primary);
$held = rcs_fill_node($primary);
[$rejected, $slot_maps] = $counts();
// Its heartbeat stands still unrenewed, but nobody waits to break the lock,
// which its backstop keeps; the watchdog tries a full node again at most
// every third of the lease (3 s: 9 tries and the first).
usleep(3000000);
var_dump(rcs_lock_keys_left($sid) !== []);
[$rejected_after, $slot_maps_after] = $counts();
echo 'a few connects: ', json_encode($rejected_after - $rejected <= 12), ', the slot map kept: ', json_encode($slot_maps_after === $slot_maps), "\n";
$held = [];
touch($go);
echo rcs_wait($child);
?>
--EXPECTF--
bool(true)
== the write
bool(true)
bool(true)
warning: session_write_close(): Error communicating with the Redis Cluster: %s refused the connection: max number of clients reached (raise maxclients on the node, or hold fewer connections to it)
warning: session_write_close(): Failed to write session data (rediscluster). Please verify that the current setting of session.save_path is correct
warning: session_write_close(): %s still refuses connections at maxclients; if the session lock is still held, its heartbeat no longer moves, so the next waiter takes it over 1000 ms after it came (rediscluster_session.lock_lease_ms)
waited most of its 1.5 s budget: true
a few connects: true, the slot map kept: true

Warning: session_start(): rediscluster: took over the lock of session sha256:%x: its holder's heartbeat stood still for 1000 ms while the server served (rediscluster_session.lock_lease_ms); a save of that holder stores nothing in %s on line %d
1
== unleased: the close waits for the node to release the lock
bool(true)
bool(true)
bool(true)
warning: session_write_close(): Error communicating with the Redis Cluster: %s refused the connection: max number of clients reached (raise maxclients on the node, or hold fewer connections to it)
warning: session_write_close(): Failed to write session data (rediscluster). Please verify that the current setting of session.save_path is correct
waited most of its 1.5 s budget: true
released, not left to lock_expire: true
1
== the watchdog
bool(true)
bool(true)
a few connects: true, the slot map kept: true
bool(true)
renewals failed: true
