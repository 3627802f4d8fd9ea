--TEST--
failover=error (and distribute, with a notice): a session whose primary is frozen, killed or CLUSTERDOWN is served read-only (locked, unlocked, strict mode) from a replica (or from the primary, which still serves reads) within timeout + read_timeout, its write, regenerate and destroy refused with a warning; a lagging replica is refused; primary and replica both down fail as before; failover=none fails as before; after the promotion the same worker writes again
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$cluster_sh = __DIR__ . '/../scripts/cluster.sh';
$flavor = rcs_env('RCS_FLAVOR');
$base = rcs_seeds()[0][1];
// scripts/cluster.sh ACTION for the node at $addr (kill-node, pause-node, resume-node).
$cluster_node = function (string $action, string $addr) use ($cluster_sh, $flavor, $base): void {
    exec(implode(' ', array_map('escapeshellarg', [$cluster_sh, $action, $flavor, (string)$base, substr(strrchr($addr, ':'), 1)])));
};
$nodes = array_map(fn($seed) => "{$seed[0]}:{$seed[1]}", rcs_seeds());
// Whether every node but $except answers CLUSTER SLOTS with a map that passes
// $check. A worker asks for its map whichever node it holds a connection to,
// or the first seed, and a change (a replica listed, a promotion) reaches the
// nodes one by one: what one node says, the one a worker asks may not yet.
$every_map = function (callable $check, string $except = '') use ($nodes): bool {
    foreach (array_diff($nodes, [$except]) as $node) {
        try {
            $map = Resp::send($node, ['CLUSTER', 'SLOTS']);
        } catch (Throwable) {
            Resp::forget($node);
            return false;
        }
        if (!is_array($map) || !$check($map)) return false;
    }
    return true;
};
// Two sessions on two primaries, and the first one's replica, once every
// replica is in sync and listed.
rcs_wait_until(fn() => rcs_cluster_settled()
    && $every_map(fn($map) => array_filter($map, fn($range) => !isset($range[3])) === []), 30);
$slots = rcs_cmd('CLUSTER', 'SLOTS');
$owner = function (string $sid) use ($slots): array {
    $slot = rcs_cmd('CLUSTER', 'KEYSLOT', rcs_prefix() . $sid);
    foreach ($slots as $range) {
        if ($slot >= $range[0] && $slot <= $range[1]) return $range;
    }
};
$a = 'failA' . bin2hex(random_bytes(4));
$range_a = $owner($a);
do {
    $b = 'failB' . bin2hex(random_bytes(4));
} while ($owner($b)[2] == $range_a[2]);
// An id nobody used, on A's primary.
do {
    $unknown = 'failU' . bin2hex(random_bytes(4));
} while ($owner($unknown)[2] != $range_a[2]);
$primary = "{$range_a[2][0]}:{$range_a[2][1]}";
$replica = "{$range_a[3][0]}:{$range_a[3][1]}";
$other = "{$owner($b)[2][0]}:{$owner($b)[2][1]}";
// Named for the cluster: suites on other clusters run beside this one.
file_put_contents(sys_get_temp_dir() . "/rcs-055-$base-" . getmypid(), json_encode(compact('primary', 'replica', 'nodes')));

// Both sessions hold n = 1 on their replicas too. WAIT up to 2 s: a replica
// that has just synced (this test's killed primary, restarted by --CLEAN--,
// when run-tests.php runs it again) is online for its primary, which starts
// streaming to it only at its next ACK, up to a second later (read_timeout=4:
// the extension caps WAIT at half of it).
echo rcs_php('foreach (' . var_export([$a, $b], true) . ' as $sid) {
    session_id($sid); session_start(); $_SESSION["n"] = 1; var_dump(session_write_close()); }',
    rcs_locking(['rediscluster_session.write_replicas' => '1', 'rediscluster_session.write_replicas_timeout' => '2000',
        'session.save_path' => rcs_save_path('read_timeout=4&prefix=' . urlencode(rcs_prefix()))]));

// distribute and distribute_slaves act as error: a notice, once per worker.
echo rcs_php('for ($i = 0; $i < 2; $i++) { session_id("' . $a . '"); var_dump(session_start()); session_write_close(); }',
    rcs_locking(['session.save_path' => rcs_save_path('failover=distribute_slaves&prefix=' . urlencode(rcs_prefix()))]));

// A worker that opens a session on each order ("SID MODE [ACTION]") and says what happened.
$worker = function (string $failover, array $ini = []) {
    return rcs_spawn('
        $warnings = [];
        set_error_handler(function ($type, $message) use (&$warnings) {
            $warnings[] = preg_replace("/^session_[a-z_]+\\(\\): /", "", $message); return true; });
        while (($line = fgets(STDIN)) !== false) {
            [$sid, $mode, $action] = explode(" ", trim($line)) + [2 => "write"];
            ini_set("redis.session.locking_enabled", $mode === "unlocked" ? "0" : "1");
            ini_set("session.use_strict_mode", $mode === "strict" ? "1" : "0");
            $warnings = [];
            // "-": a new visitor, no id.
            session_id($sid === "-" ? "" : $sid);
            $t = microtime(true);
            $started = session_start();
            $elapsed = microtime(true) - $t;
            // timeout + read_timeout, + 0.3 s for a loaded machine (as 053).
            $out = ["started" => $started, "within the budget" => $elapsed < 2.3 ? true : round($elapsed, 2)];
            if ($started && $action === "start") {
                // Its new id lies on any primary: only the start is told.
                session_abort();
                $warnings = [];
            } elseif ($started) {
                $out += ["read only" => rediscluster_session_read_only(), "n" => $_SESSION["n"] ?? null];
                $_SESSION["n"] = ($_SESSION["n"] ?? 0) + 1;
                $out["done"] = match ($action) {
                    "write" => session_write_close(),
                    "regenerate" => session_regenerate_id(),
                    "destroy" => session_destroy(),
                };
                if (session_status() === PHP_SESSION_ACTIVE) session_write_close();
            }
            $out["warnings"] = $warnings;
            // Not echoed: output would count as headers sent.
            fwrite(STDOUT, json_encode($out) . "\n");
        }', $ini + ['session.save_path' => rcs_save_path("failover=$failover&timeout=1&read_timeout=1&prefix=" . urlencode(rcs_prefix()))]);
};
$ask = function (array $worker, string $order): void {
    fwrite($worker[3], "$order\n");
    $reply = json_decode(fgets($worker[1]), true);
    $warnings = $reply['warnings'];
    unset($reply['warnings']);
    echo "  $order: ", json_encode($reply), "\n";
    foreach ($warnings as $warning) echo "    warning: $warning\n";
};
$stats = 'echo json_encode(rediscluster_session_stats()["fallback_reads"]);';

echo "primary frozen (SIGSTOP):\n";
// A loaded machine may take seconds to see the cluster down: the lag allowed
// is raised so that only the lagging case below meets it.
$error = $worker('error', ['rediscluster_session.fallback_max_lag' => '60']);
$none = $worker('none');
$cluster_node('pause-node', $primary);
$ask($error, "$a locked");
$ask($error, "$a unlocked");
$ask($error, "$a strict");
$ask($error, "$unknown strict");
$ask($error, "- strict start");
$ask($error, "$a locked regenerate");
$ask($error, "$a locked destroy");
$ask($none, "$a locked");
$cluster_node('resume-node', $primary);
echo "thawed:\n";
$ask($error, "$a locked");

echo "primary killed, its replica kept from taking over, the cluster down, reads allowed:\n";
foreach ($nodes as $node) {
    Resp::send($node, ['CONFIG', 'SET', 'cluster-node-timeout', '1000']);
    Resp::send($node, ['CONFIG', 'SET', 'cluster-allow-reads-when-down', 'yes']);
}
Resp::send($replica, ['CONFIG', 'SET', 'cluster-replica-no-failover', 'yes']);
$cluster_node('kill-node', $primary);
Resp::forget($primary);
echo "cluster down: ", var_export(rcs_wait_until(fn() => str_contains(Resp::send($other, ['CLUSTER', 'INFO']), 'cluster_state:fail'), 10), true), "\n";
$ask($error, "$a locked");
$ask($error, "$b locked");
$ask($error, "$b unlocked");
$ask($none, "$a locked");
$ask($none, "$b locked");
echo "fallback reads: ", rcs_php($stats . '
    foreach (' . var_export([$a, $b], true) . ' as $sid) { session_id($sid); @session_start(); session_write_close(); }
    echo " ", json_encode(rediscluster_session_stats()["fallback_reads"]), "\n";',
    rcs_locking(['session.save_path' => rcs_save_path('failover=error&prefix=' . urlencode(rcs_prefix()))]));

echo "its replica lagging past fallback_max_lag=1:\n";
$lagging = $worker('error', ['rediscluster_session.fallback_max_lag' => '1']);
rcs_wait_until(fn() => preg_match('/master_link_down_since_seconds:([0-9]+)/', Resp::send($replica, ['INFO', 'replication']), $m) && $m[1] >= 2, 5);
$ask($lagging, "$a locked");

echo "its replica frozen too:\n";
$cluster_node('pause-node', $replica);
$ask($error, "$a locked");
$cluster_node('resume-node', $replica);

echo "the replica takes over:\n";
Resp::send($replica, ['CONFIG', 'SET', 'cluster-replica-no-failover', 'no']);
// Every live node names the replica as A's primary: $other is ok some
// milliseconds before the node the worker asks for its map has heard of the
// promotion, and a map from that one still names the killed primary (the
// worker then reads A read-only from its "replica", the new primary).
$promoted = fn($map) => array_filter($map, fn($range) => $range[0] <= $range_a[0] && $range_a[0] <= $range[1]
    && "{$range[2][0]}:{$range[2][1]}" === $replica) !== [];
echo "cluster ok: ", var_export(rcs_wait_until(fn() => str_contains(Resp::send($other, ['CLUSTER', 'INFO']), 'cluster_state:ok')
    && $every_map($promoted, $primary), 20), true), "\n";
$ask($error, "$a locked");
$ask($error, "$a locked");
$ask($error, "$b locked");
echo rcs_wait($error), rcs_wait($none), rcs_wait($lagging);
?>
--CLEAN--
<?php
require __DIR__ . '/inc/setup.php';
foreach (glob(sys_get_temp_dir() . '/rcs-055-' . rcs_seeds()[0][1] . '-*') as $file) {
    ['primary' => $primary, 'replica' => $replica, 'nodes' => $nodes] = json_decode(file_get_contents($file), true);
    unlink($file);
    $node = fn(string $action, string $addr) => exec(implode(' ', array_map('escapeshellarg',
        [__DIR__ . '/../scripts/cluster.sh', $action, rcs_env('RCS_FLAVOR'), (string)rcs_seeds()[0][1], substr(strrchr($addr, ':'), 1)])) . ' 2>&1');
    $node('resume-node', $primary);
    $node('resume-node', $replica);
    // The killed primary comes back, as a replica of the node that took over.
    try { Resp::send($primary, ['PING']); } catch (Throwable) {
        Resp::send($replica, ['CONFIG', 'SET', 'cluster-replica-no-failover', 'no']);
        $node('start-node', $primary);
    }
    foreach ($nodes as $node) {
        try {
            Resp::send($node, ['CONFIG', 'SET', 'cluster-replica-no-failover', 'no']);
            Resp::send($node, ['CONFIG', 'SET', 'cluster-allow-reads-when-down', 'no']);
        } catch (Throwable) {}
    }
    // Healthy again, every replica in sync, before the node timeout goes back up.
    rcs_wait_until('rcs_cluster_settled', 30);
    foreach ($nodes as $node) {
        try { Resp::send($node, ['CONFIG', 'SET', 'cluster-node-timeout', '15000']); } catch (Throwable) {}
    }
}
?>
--EXPECTF--
bool(true)
bool(true)

Notice: session_start(): rediscluster: failover=distribute and distribute_slaves act as failover=error: a session is read from a replica only when its primary cannot serve it in %s on line %d
bool(true)
bool(true)
primary frozen (SIGSTOP):
  %s locked: {"started":true,"within the budget":true,"read only":true,"n":1,"done":true}
    warning: Session sha256:%x is read only: its primary could not serve it (no answer in time), so it was read from a replica (failover=error)
    warning: Unable to write session: the session is read only (its primary could not serve it at session_start(), failover=error)
    warning: Failed to write session data%s
  %s unlocked: {"started":true,"within the budget":true,"read only":true,"n":1,"done":true}
    warning: Session sha256:%x is read only: its primary could not serve it (no answer in time), so it was read from a replica (failover=error)
    warning: Unable to write session: the session is read only (its primary could not serve it at session_start(), failover=error)
    warning: Failed to write session data%s
  %s strict: {"started":true,"within the budget":true,"read only":true,"n":1,"done":true}
    warning: Session sha256:%x is read only: its primary could not serve it (no answer in time), so it was read from a replica (failover=error)
    warning: Unable to write session: the session is read only (its primary could not serve it at session_start(), failover=error)
    warning: Failed to write session data%s
  %s strict: {"started":true,"within the budget":true,"read only":true,"n":null,"done":true}
    warning: Session sha256:%x is read only: its primary could not serve it (no answer in time), so it was read from a replica (failover=error)
    warning: Unable to write session: the session is read only (its primary could not serve it at session_start(), failover=error)
    warning: Failed to write session data%s
  - strict start: {"started":true,"within the budget":true}
  %s locked regenerate: {"started":true,"within the budget":true,"read only":true,"n":1,"done":false}
    warning: Session sha256:%x is read only: its primary could not serve it (no answer in time), so it was read from a replica (failover=error)
    warning: Unable to write session: the session is read only (its primary could not serve it at session_start(), failover=error)
    warning: Session write failed%s
  %s locked destroy: {"started":true,"within the budget":true,"read only":true,"n":1,"done":false}
    warning: Session sha256:%x is read only: its primary could not serve it (no answer in time), so it was read from a replica (failover=error)
    warning: Unable to destroy session: the session is read only (its primary could not serve it at session_start(), failover=error)
    warning: Session object destruction failed
  %s locked: {"started":false,"within the budget":true}
    warning: Error communicating with the Redis Cluster: the node did not answer in time
    warning: Failed to read session data: rediscluster (path: %sfailover=none%s)
thawed:
  %s locked: {"started":true,"within the budget":true,"read only":false,"n":1,"done":true}
primary killed, its replica kept from taking over, the cluster down, reads allowed:
cluster down: true
  %s locked: {"started":true,"within the budget":true,"read only":true,"n":2,"done":true}
    warning: Session sha256:%x is read only: its primary could not serve it (connection refused), so it was read from a replica (failover=error)
    warning: Unable to write session: the session is read only (its primary could not serve it at session_start(), failover=error)
    warning: Failed to write session data%s
  %s locked: {"started":true,"within the budget":true,"read only":true,"n":1,"done":true}
    warning: Session sha256:%x is read only: its primary could not serve it (the cluster is down), so it was read from its primary, without a lock (failover=error)
    warning: Unable to write session: the session is read only (its primary could not serve it at session_start(), failover=error)
    warning: Failed to write session data%s
  %s unlocked: {"started":true,"within the budget":true,"read only":false,"n":1,"done":true}
    warning: Error communicating with the Redis Cluster: the cluster did not settle in time%s
    warning: Failed to write session data%s
  %s locked: {"started":false,"within the budget":true}
    warning: Error communicating with the Redis Cluster: Connection refused (os error 111)
    warning: Failed to read session data: rediscluster (path: %sfailover=none%s)
  %s locked: {"started":false,"within the budget":true}
    warning: Error communicating with the Redis Cluster: the cluster did not settle in time%s
    warning: Failed to read session data: rediscluster (path: %sfailover=none%s)
fallback reads: {"primary":0,"replica":0} {"primary":1,"replica":1}
its replica lagging past fallback_max_lag=1:
  %s locked: {"started":false,"within the budget":true}
    warning: Error communicating with the Redis Cluster: Connection refused (os error 111); failover=error: no replica could serve it: replica %s lost its primary %d s ago (rediscluster_session.fallback_max_lag=1)
    warning: Failed to read session data: rediscluster (path: %sfailover=error%s)
its replica frozen too:
  %s locked: {"started":false,"within the budget":true}
    warning: Error communicating with the Redis Cluster: Connection refused (os error 111); failover=error: no replica could serve it: the node did not answer in time
    warning: Failed to read session data: rediscluster (path: %sfailover=error%s)
the replica takes over:
cluster ok: true
  %s locked: {"started":true,"within the budget":true,"read only":false,"n":2,"done":true}
  %s locked: {"started":true,"within the budget":true,"read only":false,"n":3,"done":true}
  %s locked: {"started":true,"within the budget":true,"read only":false,"n":1,"done":true}
