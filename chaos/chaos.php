<?php
// The failover chaos test: locked session cycles in several PHP processes
// while the cluster fails over, each phase with sessions of its own:
//   graceful  CLUSTER FAILOVER on the replica of the shared session's primary
//   kill      SIGKILL of the shared session's primary (its replica takes over)
//   restart   the killed node started again (it rejoins as a replica)
//   lagging   the replica frozen and cut off for 0.5 s, then its primary
//             SIGKILLed, so the promoted replica misses that half second's writes
//   lagging, write_replicas=1   the same with every write waiting for its replica
//   kill failover=error  the kill again with failover=error, read_timeout=1,
//             write_replicas=1 and cluster-allow-reads-when-down on: sessions
//             are served read-only meanwhile; no session_start() may fail
//   kill failover=none   the same without failover=error, for comparison
//   reshard   (r1) the hot sessions' slots moved to another primary key by key,
//             100 ms between keys, and back 7 s later
//   atomic migration  (r3, Valkey 9) the same slots moved whole by the server
//             (CLUSTER MIGRATESLOTS), and back 6 s later; a stall of 0.5 s at most
//   scale-out (r2, full run) ~300k filler keys; a fourth primary with a replica
//             is added and rebalanced onto, then emptied and removed again
//   mixed     (m) a rolling deploy: half the workers on the previous release
//             (RCS_EXT_PREVIOUS), half on this one, on the same sessions
//   stall     (s, first) the primary of two sessions stopped (SIGSTOP) 22
//             times, 0.5-5 s each, while three workers on each session hold
//             its lock 1-4 s in turn, two of them queued; no failover, and
//             every call waits the stalls out: no write of a live holder may
//             be refused, no update lost, no lock broken, and at least 20
//             stalls must overlap a lock held with a waiter queued
//   mixed stall  (sm, full run) the same with the previous release in half
//             the workers, as in (m): its holders may lose their lock to a
//             stall (its lease is the lock's TTL); this release's keep theirs
// Prints a table; exits 1 if a hard rule broke: a PHP process crashed or hung,
// a failure came without a warning, an acknowledged update was lost in the
// graceful phase or with write_replicas=1, a lock outlived its TTL, a session
// stalled too long or too many requests failed (see the end).
//   RCS_EXT=... php -n chaos/chaos.php FLAVOR BASE_PORT [--short] [--only=PHASE,...]
require __DIR__ . '/lib.php';

[, $flavor, $base] = $argv;
$short = in_array('--short', $argv, true);
$root = dirname(__DIR__);
$nodes = array_map(fn($i) => '127.0.0.1:' . ($base + $i), range(0, 5));
$workers = $short ? 4 : 6;
$lock_expire = 10;
$before_event = 2.0;
// Each phase: seconds of load, and INI for its workers (save_path: what
// goes after the default one's parameters, and wins).
$read_only_ini = fn(string $failover) => ['rediscluster_session.write_replicas' => '1',
    'save_path' => "failover=$failover&read_timeout=1"];
$phases = [
    'graceful' => [$short ? 6 : 10, []],
    'kill' => [$short ? 8 : 12, []],
    'restart' => [$short ? 6 : 10, []],
    'lagging' => [$short ? 8 : 12, []],
    'lagging, write_replicas=1' => [$short ? 8 : 12, ['rediscluster_session.write_replicas' => '1']],
    'kill failover=none' => [$short ? 8 : 12, $read_only_ini('none')],
    'kill failover=error' => [$short ? 8 : 12, $read_only_ini('error')],
    // (r1) The hot sessions' slots move to another primary key by key, and back 7 s later.
    'reshard' => [14, []],
];
// (r3) On a server with atomic slot migration (Valkey 9), the hot slots move whole, and back.
if (any_node(['CLUSTER', 'GETSLOTMIGRATIONS']) !== null) $phases['atomic migration'] = [12, []];
// (r2) Scale-out and back under load: a fourth primary takes a share of ~300k keys, then gives it back.
if (!$short) $phases['scale-out'] = [70, []];
// (m) A rolling deploy: the previous release and this one on the same sessions.
if (getenv('RCS_EXT_PREVIOUS')) $phases['mixed'] = [$short ? 8 : 15, []];
// (s) Stalls. The node timeout (6 s, set below) is above the longest stall (5 s): no failover. A
// call's budget (timeout + read_timeout) is spent by the time its primary does not serve, so it
// covers every stall a waiter waits through in its turn: two holds, with up to 12 s of stalls in
// the first (one that delays its take, 2 s in its 4 s of work, after 1 s of serving, and one that
// delays its write) and 7 s in the second. A lock is held up to 14 s (lock_expire 20 s).
const STALL_COUNT = 22;
$stall_ini = ['save_path' => 'timeout=2&read_timeout=20', 'redis.session.lock_expire' => '20',
    'redis.session.lock_retries' => '3000'];
// Workers run until the last stall is over: 2.75 s each on average, and 1 s of serving after it.
$stall_seconds = $before_event + STALL_COUNT * (2.75 + 1) + 3;
// First: its logs of savers live lock_expire, which the check of locks left at the end waits out.
// The short run stalls Redis only: the lease is judged on the client, and a stopped process is
// the same whatever the server (1 min 35 s a server).
if (!$short || $flavor === 'redis') $phases = ['stall' => [$stall_seconds, $stall_ini]] + $phases;
if (getenv('RCS_EXT_PREVIOUS')) $phases['mixed stall'] = [$stall_seconds, $stall_ini];
// (m), (sm): every other worker runs the previous release.
$previous = fn(int $i) => $i % 2 === 1;
// Two sessions on one primary, three workers on each: a holder, the waiter next in line and one
// queued behind it.
$beside = [];
$stall_options = ['workers' => 6, 'hold' => [1000, 4000], 'alone' => true,
    'own' => function (int $i, string $prefix, string $shared) use (&$beside): string {
        if ($i < 3) return $shared;
        $primary = slot_owners(key_slot($prefix . $shared))[0];
        while (!isset($beside[$shared]) || slot_owners(key_slot($prefix . $beside[$shared]))[0] !== $primary) {
            $beside[$shared] = 'beside' . bin2hex(random_bytes(8));
        }
        return $beside[$shared];
    }];
$options = ['mixed' => ['previous' => $previous], 'stall' => $stall_options,
    'mixed stall' => $stall_options + ['previous' => $previous]];


$killed = null;
$events = [
    'graceful' => function (int $slot) {
        // A loaded machine may still be syncing the replica: CLUSTER SLOTS lists it once it is online.
        wait_for(fn() => slot_owners($slot)[1] !== [], 30);
        [$primary, $replicas] = slot_owners($slot);
        if ($replicas === []) throw new RuntimeException("slot $slot's primary $primary has no replica to fail over to");
        $reply = Resp::send($replicas[0], ['CLUSTER', 'FAILOVER']);
        $took = wait_for(fn() => slot_owners($slot)[0] === $replicas[0], 10);
        return ["CLUSTER FAILOVER on $replicas[0] ($reply): primary moved", $took];
    },
    'kill' => $kill = function (int $slot) use (&$killed) {
        [$primary] = slot_owners($slot);
        $killed = $primary;
        cluster_script('kill-node', $primary);
        Resp::forget($primary);
        $took = wait_for(fn() => ($owner = slot_owners($slot)[0]) !== null && $owner !== $primary, 20);
        return ["SIGKILL $primary: replica promoted", $took];
    },
    'restart' => function (int $slot) use (&$killed) {
        return ["restarted $killed: back as a replica in sync", restart_node($killed)];
    },
];
$events['lagging'] = function (int $slot) use (&$killed) {
    [$primary, $replicas] = slot_owners($slot);
    cluster_script('pause-node', $replicas[0]);
    // Cut the replication link too: what the primary already sent would
    // otherwise wait in the frozen replica's socket buffer and arrive anyway.
    Resp::send($primary, ['CLIENT', 'KILL', 'TYPE', 'replica']);
    usleep(500000);
    cluster_script('kill-node', $primary);
    Resp::forget($primary);
    cluster_script('resume-node', $replicas[0]);
    $killed = $primary;
    $took = wait_for(fn() => ($owner = slot_owners($slot)[0]) !== null && $owner !== $primary, 20);
    return ["$replicas[0] frozen and cut off 0.5 s, then SIGKILL $primary: replica promoted", $took];
};
$events['lagging, write_replicas=1'] = $events['lagging'];
$events['kill failover=none'] = $events['kill failover=error'] = $kill;
$events['scale-out'] = function () {
    global $base;
    $started = microtime(true);
    $filled = fill_cluster(300_000);
    [$primary, $replica] = ['127.0.0.1:' . ($base + 6), '127.0.0.1:' . ($base + 7)];
    $seed = any_live_primary();
    cluster_script('start-node', $primary);
    cluster_script('start-node', $replica);
    wait_for(fn() => node_answers($primary) && node_answers($replica), 10);
    $cli = fn(string ...$args) => cluster_cli([...$args]);
    $cli('--cluster', 'add-node', $primary, $seed);
    $agree = fn() => cluster_agrees_on($primary) && cluster_check($seed);
    wait_for($agree, 30);
    $primary_id = node_id($primary);
    $cli('--cluster', 'add-node', $replica, $seed, '--cluster-slave', '--cluster-master-id', $primary_id);
    $ready = fn(string $addr) => str_contains((string)Resp::send($addr, ['CLUSTER', 'INFO']), 'cluster_state:ok');
    wait_for(fn() => cluster_healthy() && $ready($primary) && $ready($replica) && cluster_agrees_on($replica)
        && cluster_check($seed), 30);
    $out_started = microtime(true);
    $cli('--cluster', 'rebalance', $seed, '--cluster-use-empty-masters', '--cluster-yes');
    $out = microtime(true) - $out_started;
    $moved = Resp::send($primary, ['DBSIZE']);
    wait_for(fn() => cluster_check($seed), 30);
    $in_started = microtime(true);
    $cli('--cluster', 'rebalance', $seed, '--cluster-weight', "$primary_id=0", '--cluster-yes');
    $in = microtime(true) - $in_started;
    wait_for(fn() => cluster_check($seed), 30);
    $cli('--cluster', 'del-node', $seed, node_id($replica));
    $cli('--cluster', 'del-node', $seed, $primary_id);
    foreach ([$primary, $replica] as $node) {
        try { cluster_script('kill-node', $node); } catch (Throwable) {}
        Resp::forget($node);
    }
    wait_for('cluster_healthy', 20);
    return ["$filled filler keys; $primary + replica added, rebalanced onto it ($moved keys, " . round($out, 1)
        . ' s), emptied again (' . round($in, 1) . ' s) and removed', microtime(true) - $started];
};
$events['mixed'] = fn() => ['previous release in workers 1, 3, 5, this one in 0, 2, 4', 0.0];
$events['reshard'] = function (int $slot, array $slots) {
    [$from] = slot_owners($slot);
    $to = other_primary($from);
    $started = microtime(true);
    $windows = [migrate_slots($slots, $from, $to)];
    usleep((int)max(0, (7 - (microtime(true) - $started)) * 1e6));
    $windows[] = migrate_slots($slots, $to, $from);
    $GLOBALS['migration_window'] = max($windows);
    return [count($slots) . " slots moved $from -> $to key by key (" . MIGRATION_PAUSE_MS . " ms between keys) and back,"
        . ' longest window ' . round(max($windows), 2) . ' s', microtime(true) - $started];
};

$events['atomic migration'] = function (int $slot, array $slots) {
    [$from] = slot_owners($slot);
    $to = other_primary($from);
    $started = microtime(true);
    $took = [migrate_slots_atomically($slots, $from, $to)];
    usleep((int)max(0, (6 - (microtime(true) - $started)) * 1e6));
    $took[] = migrate_slots_atomically($slots, $to, $from);
    return [count($slots) . " slots moved $from -> $to by CLUSTER MIGRATESLOTS and back, each move done in "
        . implode(' s and ', array_map(fn($t) => round($t, 2), $took)) . ' s', microtime(true) - $started];
};

/** Whether process $pid is stopped (SIGSTOP). */
function stopped(int $pid): bool {
    $stat = (string)@file_get_contents("/proc/$pid/stat");
    return substr($stat, strrpos($stat, ')') + 2, 1) === 'T';
}
// A lock held with a waiter queued.
const HELD_WITH_WAITER = "return redis.call('EXISTS', KEYS[1]) == 1 and redis.call('ZCARD', KEYS[2]) > 0 and 1 or 0";
// (s) The primary stopped STALL_COUNT times, 0.5-5 s each (spread evenly over the range, in random
// order: every run has its long stalls), serving 1 s after each. $stalls: each one's [stopped
// ns, resumed ns, the sessions whose lock was held with a waiter queued just before the stop].
$stalls = [];
$events['stall'] = $events['mixed stall'] = function (int $slot, array $hot, array $locks) use (&$stalls) {
    [$primary] = slot_owners($slot);
    preg_match('/process_id:(\d+)/', Resp::send($primary, ['INFO', 'server']), $m);
    $pid = (int)$m[1];
    $lengths = array_map(fn($k) => 0.5 + 4.5 * $k / (STALL_COUNT - 1), range(0, STALL_COUNT - 1));
    shuffle($lengths);
    $started = microtime(true);
    foreach ($lengths as $length) {
        $busy = array_keys(array_filter($locks,
            fn($lock) => Resp::send($primary, ['EVAL', HELD_WITH_WAITER, 2, $lock, "{$lock}_FIFO"]) === 1));
        exec("kill -STOP $pid");
        // Stopped: whatever is sent to it from here on is served after the resume.
        if (wait_for(fn() => stopped($pid), 5) === null) throw new RuntimeException("$primary (pid $pid) did not stop");
        $stopped = hrtime(true);
        usleep((int)($length * 1e6));
        $resumed = hrtime(true);
        exec("kill -CONT $pid");
        $stalls[] = [$stopped, $resumed, $busy];
        usleep(1000000);
        if (slot_owners($slot)[0] !== $primary) {
            throw new RuntimeException("$primary failed over after a stall of $length s: the node timeout must be above it");
        }
    }
    return ["SIGSTOP $primary " . count($stalls) . ' times, 0.5-5 s each (' . round(array_sum($lengths), 1)
        . ' s in all), 1 s between', microtime(true) - $started];
};

/**
 * A stall phase's figures over the workers $in (fn(int $worker): bool): how many stalls a
 * hold of theirs overlapped on a session whose lock was held with a waiter queued (its
 * session_start() returned before the resume, so its lock was taken before the stop, and
 * its write was sent after the stop, so it was served after the resume), their refused
 * writes and failed starts, the acknowledged updates they lost, the locks they broke
 * (null where the previous release counts none).
 */
function stall_figures(array $row, array $stalls, callable $in): array {
    $workers = array_filter($row['by worker'], $in, ARRAY_FILTER_USE_KEY);
    $overlapped = 0;
    foreach ($stalls as [$stopped, $resumed, $busy]) {
        foreach ($workers as $figures) {
            foreach ($figures['holds'] as [$sid, $from, $to]) {
                if (in_array($sid, $busy, true) && $from < $resumed && $to > $stopped) {
                    $overlapped++;
                    continue 3;
                }
            }
        }
    }
    $broken = array_column($workers, 'locks broken');
    return ['overlapped' => $overlapped, 'refused writes' => array_sum(array_column($workers, 'failed write')),
        'failed starts' => array_sum(array_column($workers, 'failed start')),
        'lost acked' => array_sum(array_column($workers, 'lost acked')),
        'locks broken' => in_array(null, $broken, true) ? null : array_sum($broken)];
}

// --only=PHASE,PHASE runs just those (the lagging phases need the kill phase before them).
foreach ($argv as $arg) {
    if (str_starts_with($arg, '--only=')) {
        $phases = array_intersect_key($phases, array_flip(explode(',', substr($arg, 7))));
    }
}
$rows = [];
foreach ($phases as $name => [$seconds, $phase_ini]) {
    log_line("$flavor: phase $name, " . ($options[$name]['workers'] ?? $workers) . " workers, {$seconds} s");
    $fails_over = in_array($name, ['kill', 'restart', 'lagging', 'lagging, write_replicas=1'], true)
        || str_starts_with($name, 'kill failover=');
    set_node_timeout($fails_over ? 1000 : (str_ends_with($name, 'stall') ? 6000 : 15000));
    $reads_when_down = str_starts_with($name, 'kill failover=');
    set_on_every_node('cluster-allow-reads-when-down', $reads_when_down ? 'yes' : 'no');
    $stalls = [];
    $rows[] = run_phase($name, $seconds, $phase_ini, $events[$name], $options[$name] ?? []) + ['stalls' => $stalls];
    if (str_starts_with($name, 'lagging') || $reads_when_down) {
        restart_node($killed);   // the next phase needs its replica back
    }
}

$stuck = stuck_locks();

print_table($rows, $stuck, "\n$flavor ($workers workers, locked cycles, lock_expire=$lock_expire s, timeout=0.5 and read_timeout=2 but"
    . " read_timeout=1 in the failover= phases, cluster-node-timeout 1 s in kill, restart, lagging and failover=, 15 s elsewhere;"
    . " the stall phases: 6 workers holding each lock 1-4 s, lock_expire=20 s, timeout=2, read_timeout=20, cluster-node-timeout 6 s)");

$broken = [];
foreach ($rows as $row) {
    array_push($broken, ...process_breaks($row));
    // The target is the promotion time plus 1 s; 2 s leaves room for a noisy machine. A lock
    // left behind by a failed write would stall its session for the lock TTL (10 s).
    $allowed = ($row['no primary s'] ?? INF) + 2;
    if ($row['phase'] === 'scale-out') {
        // redis-cli moves a slot's few keys in one MIGRATE: each window is milliseconds.
        $allowed = 1.0;
    }
    if ($row['phase'] === 'mixed') {
        // Nobody waits longer than lock_retries x lock_wait_time (250 x 20 ms).
        $allowed = 5.0;
    }
    if ($row['phase'] === 'atomic migration') {
        // The server pauses the slots' writes only for the hand-over itself.
        $allowed = 0.5;
    }
    if (str_ends_with($row['phase'], 'stall')) {
        // A hold (4 s) between a take whose reply a stall delayed and a write a stall delayed (5 s each).
        $allowed = 4 + 2 * 5 + 2;
    }
    if ($row['migration window s'] !== '') {
        // The target is the slot's migration window plus 0.5 s; 1 s leaves room for a noisy machine.
        $allowed = $row['migration window s'] + 1;
    }
    // With write_replicas, the primary promoted after a kill refuses every
    // write until the killed node is back as its replica (the next phase):
    // there the sessions must still be served (read) within the bound, and
    // their refused writes are counted below.
    $refuses_writes = isset($phases[$row['phase']][1]['rediscluster_session.write_replicas']) && ($row['no primary s'] ?? 0) > 0;
    $stall = $row[$refuses_writes ? 'longest unserved s' : 'longest session stall s'];
    if ($stall > $allowed) {
        $broken[] = "{$row['phase']}: a session " . ($refuses_writes ? 'went unserved' : 'stalled') . " $stall s (allowed $allowed s)";
    }
    // Requests ride a failover out for up to read_timeout (2 s): none fails while a primary is
    // there, and each worker fails about once per 2 s without one; failing fast would fail hundreds.
    $without_primary = $row['no primary s'] ?? INF;
    // With write_replicas, every write while the replica is cut off fails on purpose.
    $allowed = $without_primary > 0 ? $workers * ((int)ceil($without_primary / 2) + 1) : 0;
    $failed = $row['failed start'] + $row['failed write'];
    // Those phases compare failover=error's failures with failover=none's, and the stall phases
    // count theirs by release (below).
    if ($failed > $allowed && !str_contains($row['phase'], 'write_replicas') && !str_contains($row['phase'], 'failover=')
        && !str_ends_with($row['phase'], 'stall')) {
        $broken[] = "{$row['phase']}: $failed failed requests (allowed $allowed)";
    }
}
$by_phase = array_column($rows, null, 'phase');
if (($by_phase['graceful']['lost acked'] ?? 0)) $broken[] = 'graceful failover lost acknowledged updates';
foreach (['reshard', 'atomic migration', 'scale-out', 'mixed', 'stall', 'mixed stall'] as $phase) {
    if (isset($by_phase[$phase]) && $by_phase[$phase]['lost acked']) $broken[] = "$phase lost acknowledged updates";
}
if (($by_phase['lagging, write_replicas=1']['lost acked'] ?? 0)) $broken[] = 'write_replicas=1 lost acknowledged updates';
foreach (['kill failover=none', 'kill failover=error'] as $phase) {
    if ($by_phase[$phase]['lost acked'] ?? 0) $broken[] = "$phase (write_replicas=1) lost acknowledged updates";
}
// failover=error: every session_start() serves the session, read-only while
// its primary cannot, each within the budget (timeout 0.5 s + read_timeout
// 1 s; 0.5 s more for a noisy machine). A session goes unserved longer only
// behind a write that was in flight at the kill: it rides out its budget, then
// its close's release the grace (0.5 s), so that no lock is left to its TTL;
// 3.5 s was set when the release had a budget of its own.
if ($row = $by_phase['kill failover=error'] ?? null) {
    if ($row['failed start']) $broken[] = "kill failover=error: {$row['failed start']} session_start() failed";
    if ($row['longest start s'] > 2.0) $broken[] = "kill failover=error: a session_start() took {$row['longest start s']} s (allowed 2 s)";
    if ($row['longest unserved s'] > 3.5) $broken[] = "kill failover=error: a session went unserved {$row['longest unserved s']} s (allowed 3.5 s)";
    if (!$row['served read-only']) $broken[] = 'kill failover=error: no session was served read-only: the scenario did not bite';
}
// Without write_replicas the frozen replica must have cost acknowledged updates,
// or the phase above proved nothing.
if (isset($by_phase['lagging']) && !$by_phase['lagging']['lost acked']) $broken[] = 'the lagging phase lost nothing: the scenario did not bite';
// The stall phases: the stalls must have bitten, and no live holder of this release may lose its
// lock, its write or an update; the previous release's holders may lose theirs to a stall (its
// lease is the lock's TTL): their figures are reported apart. Failed starts are reported, not
// broken rules: a stall of more than about a second costs a live waiter its place in the queue
// (its deadline there runs on the server's clock), so one passed over again and again can wait
// past its budget or lock_retries.
$describe = fn(array $f) => "{$f['refused writes']} refused writes, {$f['failed starts']} failed starts, "
    . "{$f['lost acked']} updates lost, " . ($f['locks broken'] ?? 'uncounted') . ' locks broken';
foreach (['stall' => fn() => false, 'mixed stall' => $previous] as $phase => $is_previous) {
    if (!$row = $by_phase[$phase] ?? null) continue;
    $overlapped = stall_figures($row, $row['stalls'], fn() => true)['overlapped'];
    $ours = stall_figures($row, $row['stalls'], fn(int $i) => !$is_previous($i));
    echo "$phase: " . count($row['stalls']) . " stalls, $overlapped overlapped a lock held with a waiter queued; ";
    if ($phase === 'mixed stall') {
        $theirs = stall_figures($row, $row['stalls'], $is_previous);
        echo "the previous release's holders (in {$theirs['overlapped']}): ", $describe($theirs),
            "; this release's (in {$ours['overlapped']}): ";
    }
    echo $describe($ours), "\n";
    if ($overlapped < 20) $broken[] = "$phase: $overlapped stalls overlapped a lock held with a waiter queued (at least 20): the scenario did not bite";
    if ($ours['refused writes']) $broken[] = "$phase: {$ours['refused writes']} writes of live holders refused";
    if ($ours['lost acked']) $broken[] = "$phase: {$ours['lost acked']} acknowledged updates of live holders lost";
    if ($ours['locks broken']) $broken[] = "$phase: {$ours['locks broken']} locks of live holders broken";
}
if ($stuck) $broken[] = "$stuck locks outlived their TTL";
foreach ($broken as $why) echo "BROKEN: $why\n";
exit($broken ? 1 : 0);