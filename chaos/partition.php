<?php
// The partition chaos test (issue 30): locked session cycles while the
// network splits. Every node runs in a network namespace of its own
// (chaos/partition.sh makes them); the workers run in two more, one on each
// side of the split: even workers on the majority's side (PREFIXwa), odd ones
// on the minority's (PREFIXwb). The workers of a group (a write_replicas
// setting) share one session, whose primary P is the one cut off, and each
// minority worker's own session is on P too, so the lock is contended across
// the split. A cut drops packets silently, as a real partition does: a policy rule in the receiving namespace blackholes
// what comes from the other side (chaos/partition.sh moves the `local` rule
// behind it). Scenarios:
//   minority  P (and with 2 replicas, one of its replicas) and the minority
//             workers cut off from everything else, both ways, until the
//             majority has promoted and 1 s more; then healed
//   one-way   the same, but only what the minority sends is lost: P hears the
//             cluster, the cluster does not hear P
//   flapping  the minority cut and healed every second for 20 s
//   replica   P's replica(s) cut off from P (from P only) for 4 s while writes go on
//   failover=error  the minority split with failover=error (item 4 of the issue)
//   migration the hot slots migrating from P to another primary key by key; after
//             the first key, the minority cut as above; healed after the
//             promotion, then `redis-cli --cluster fix`, as an operator would
// each with write_replicas=0 and =1 (1 replica per primary), or =1 and =2 (2),
// at once, on sessions of their own.
// After each, the cluster healed, each primary given its replicas back and
// every replica in sync. Prints a table; exits 1 if a rule broke: a PHP
// process crashed or hung, a failure came without a warning, an acknowledged
// write was lost, or a locked read missed one, with write_replicas equal to
// the replicas per primary, a lock outlived its TTL, a session_start() or a
// write took longer than its budget, a split saw no promotion, a primary cut
// off from its replicas refused no write_replicas write.
//   RCS_EXT=... php -n chaos/partition.php FLAVOR BASE_PORT REPLICAS [--only=SCENARIO,...]
// PARTITION_NETNS and PARTITION_NET as chaos/partition.sh sets them.
require __DIR__ . '/lib.php';

[, $flavor, $base, $replicas] = $argv;
$replicas = (int)$replicas;
$root = dirname(__DIR__);
$netns = getenv('PARTITION_NETNS') ?: 'rcs0-';
$net = getenv('PARTITION_NET') ?: '10.77';
$nodes = array_map(fn($i) => "$net.1." . ($i + 1) . ':' . ($base + $i), range(0, 3 * (1 + $replicas) - 1));
$workers = 8;
$lock_expire = 10;
$before_event = 2.0;
$sides = ['majority' => ['ns' => "{$netns}wa", 'ip' => "$net.2.1"], 'minority' => ['ns' => "{$netns}wb", 'ip' => "$net.2.2"]];

function node_ns(string $addr): string {
    global $netns, $base;
    return $netns . 'n' . ((int)explode(':', $addr)[1] - $base);
}

function node_ip(string $addr): string {
    return explode(':', $addr)[0];
}

/** Policy rules in force: [namespace, source address]. */
$rules = [];

/** Drops (or, with $on false, lets in again) every packet from $sources arriving in $namespaces. */
function drop(array $sources, array $namespaces, bool $on): void {
    global $rules;
    foreach ($namespaces as $ns) {
        $lines = '';
        foreach ($sources as $ip) {
            $lines .= 'rule ' . ($on ? 'add' : 'del') . " from $ip/32 iif eth0 blackhole pref 100\n";
            if ($on) $rules["$ns $ip"] = [$ns, $ip];
            else unset($rules["$ns $ip"]);
        }
        $proc = proc_open(['ip', '-n', $ns, '-batch', '-'], [0 => ['pipe', 'r']], $pipes);
        fwrite($pipes[0], $lines);
        fclose($pipes[0]);
        if (proc_close($proc) !== 0) throw new RuntimeException("ip -n $ns -batch failed on:\n$lines");
    }
}

/** A side of a split: its nodes' and (unless null) workers' namespaces and addresses. */
function side(array $node_addrs, ?string $workers_side): array {
    global $sides;
    $workers = $workers_side === null ? [] : [$sides[$workers_side]];
    return ['ns' => [...array_map('node_ns', $node_addrs), ...array_column($workers, 'ns')],
        'ip' => [...array_map('node_ip', $node_addrs), ...array_column($workers, 'ip')]];
}

/** Cuts $a from $b: what $a sends $b is lost, and with $both what $b sends $a too. */
function cut(array $a, array $b, bool $both = true): void {
    drop($a['ip'], $b['ns'], true);
    if ($both) drop($b['ip'], $a['ns'], true);
}

function heal(): void {
    global $rules;
    $by_ns = [];
    foreach ($rules as [$ns, $ip]) $by_ns[$ns][] = $ip;
    foreach ($by_ns as $ns => $ips) drop($ips, [$ns], false);
}
register_shutdown_function('heal');

/** The slot's primary as $node sees it (CLUSTER SLOTS asked to it), or null. */
function owner_seen_by(string $node, int $slot): ?string {
    try {
        return owners_in(Resp::send($node, ['CLUSTER', 'SLOTS']), $slot)[0];
    } catch (Throwable) {
        Resp::forget($node);
        return null;
    }
}

function role(string $node): ?string {
    try {
        return Resp::send($node, ['ROLE'])[0];
    } catch (Throwable) {
        Resp::forget($node);
        return null;
    }
}

/** The split of the scenarios: P, and with 2 replicas one of P's replicas, on the minority's side. */
function split_of(int $slot): array {
    global $nodes, $replicas;
    [$primary, $primary_replicas] = slot_owners($slot);
    if (count($primary_replicas) !== $replicas) {
        throw new RuntimeException("$primary has " . count($primary_replicas) . " replicas, not $replicas");
    }
    $minority = $replicas > 1 ? [$primary, $primary_replicas[0]] : [$primary];
    $majority = array_values(array_diff($nodes, $minority));
    return [$primary, $minority, $majority];
}

/**
 * Until a majority node names a primary other than $primary for $slot; the
 * seconds, or null. Any of them: a node importing the slot (a migration's
 * target) keeps naming the old owner (Redis 7.0 ignores a new owner's claim
 * of a slot it imports), and is down meanwhile, since it sees the slot unserved.
 */
function wait_promoted(int $slot, string $primary, array $majority, float $seconds = 20): ?float {
    return wait_for(function () use ($slot, $primary, $majority) {
        foreach ($majority as $node) {
            $owner = owner_seen_by($node, $slot);
            if ($owner !== null && $owner !== $primary) return true;
        }
        return false;
    }, $seconds);
}

/**
 * After a heal: once every node sees the cluster ok, each primary given its
 * replicas back, as an operator would; then until every replica is in sync
 * (the next phase needs them all).
 */
function wait_settled(): void {
    global $nodes;
    wait_for('cluster_healthy', 30);
    restore_replicas();
    cluster_script('wait-ready', $nodes[0]);
}

/**
 * Gives each primary $replicas replicas again. A split leaves the promoted
 * primary with none for a while, and a replica of another primary migrates
 * to it (cluster-allow-replica-migration, on by default); once the cut-off
 * nodes rejoin, it has too many and the other too few, and a later split
 * could take a primary's only replica with it, leaving the majority none to
 * promote (seen with 2 replicas). Moves spare replicas with CLUSTER REPLICATE.
 */
function restore_replicas(): void {
    global $replicas;
    $followers = [];
    $spare = [];
    foreach (explode("\n", trim((string)any_node(['CLUSTER', 'NODES']))) as $line) {
        $fields = explode(' ', $line);
        $addr = explode('@', $fields[1])[0];
        if (!str_contains($fields[2], 'master')) {
            $followers[$fields[3]][] = $addr;
        } elseif (count($fields) > 8) {
            $followers[$fields[0]] ??= [];
        } else {
            $spare[] = $addr;
        }
    }
    foreach ($followers as $id => $list) {
        while (count($followers[$id]) > $replicas) $spare[] = array_pop($followers[$id]);
    }
    foreach ($followers as $id => $list) {
        for ($n = count($list); $n < $replicas && $spare; $n++) {
            $reply = Resp::send(array_shift($spare), ['CLUSTER', 'REPLICATE', $id]);
            if ($reply instanceof RespError) throw new RuntimeException("CLUSTER REPLICATE: $reply->message");
        }
    }
}

/**
 * The split: the minority cut off (both ways, or with $both false only what
 * it sends lost) until the majority has promoted and 1 s more, while the
 * minority's side refuses; then healed. Returns the seconds until the promotion.
 */
function split_until_promoted(int $slot, array $split, bool $both): ?float {
    [$primary, $minority, $majority] = $split;
    cut(side($minority, 'minority'), side($majority, 'majority'), $both);
    $took = wait_promoted($slot, $primary, $majority);
    usleep(1_000_000);
    heal();
    return $took;
}

// (a) both ways, (b) one way: P hears the cluster, the cluster does not hear P.
foreach (['minority' => true, 'one-way' => false] as $scenario => $both) {
    $events[$scenario] = function (int $slot) use ($both) {
        $split = split_of($slot);
        $took = split_until_promoted($slot, $split, $both);
        wait_settled();
        return [implode(' + ', $split[1]) . ' and the odd workers ' . ($both ? 'cut off both ways'
            : 'heard by nobody (they hear the rest)') . '; healed 1 s after the majority promoted'
            . " ({$split[0]}: " . role($split[0]) . ' now)', $took];
    };
}
$events['flapping'] = function (int $slot) {
    [$primary, $minority, $majority] = split_of($slot);
    $started = microtime(true);
    $promoted = null;
    while (microtime(true) - $started < 20) {
        cut(side($minority, 'minority'), side($majority, 'majority'));
        usleep(1_000_000);
        heal();
        $owner = owner_seen_by($majority[0], $slot);
        $promoted ??= $owner !== null && $owner !== $primary ? microtime(true) - $started : null;
        usleep(1_000_000);
    }
    wait_settled();
    return [implode(' + ', $minority) . ' and the odd workers cut off and healed every second for 20 s; '
        . ($promoted === null ? 'no failover' : 'a failover'), $promoted];
};
$events['replica'] = function (int $slot) {
    [$primary, $primary_replicas] = slot_owners($slot);
    cut(side([$primary], null), side($primary_replicas, null));
    usleep(4_000_000);
    heal();
    wait_settled();
    return ["$primary cut off from its replicas " . implode(', ', $primary_replicas) . ' for 4 s', 0.0];
};
$events['migration'] = function (int $slot, array $hot) {
    $split = [$primary, $minority] = split_of($slot);
    $to = other_primary($primary);
    $took = null;
    migrate_slots($hot, $primary, $to, function () use ($slot, $split, &$took) {
        $took = split_until_promoted($slot, $split, true);
        return true;
    });
    // What an operator does about the slots left open: `--cluster fix` until
    // `--cluster check` passes (3 tries), then SETSLOT STABLE on every node.
    // Meanwhile the target, which ignores the new owner's claim of a slot it
    // imports, sees that slot unserved and answers CLUSTERDOWN for its own.
    wait_for('cluster_healthy', 5);
    $fixes = 0;
    while (!cluster_check($to) && $fixes < 3) {
        $fixes++;
        try {
            cluster_cli(['--cluster', 'fix', $to, '--cluster-yes']);
        } catch (RuntimeException) {
        }
    }
    $fix = "redis-cli --cluster fix $fixes time(s)";
    if (!cluster_check($to)) {
        global $nodes;
        foreach ($nodes as $node) foreach ($hot as $hot_slot) Resp::send($node, ['CLUSTER', 'SETSLOT', $hot_slot, 'STABLE']);
        $fix .= ', then SETSLOT STABLE everywhere (' . (cluster_check($to) ? 'fixed' : 'still not fixed') . ')';
    }
    wait_settled();
    return [count($hot) . " slots migrating $primary -> $to key by key; after the first key, " . implode(' + ', $minority)
        . " and the odd workers cut off both ways, healed 1 s after the majority promoted; then $fix", $took];
};
// (4) The minority split again with failover=error (read_timeout=1, and
// cluster-allow-reads-when-down on the servers): the minority side's sessions
// are served read-only by P; how many of those reads miss a write the
// majority's side had already acknowledged ('stale read-only').
$events['failover=error'] = $events['minority'];
$seconds = ['minority' => 12, 'one-way' => 12, 'flapping' => 25, 'replica' => 10, 'migration' => 14, 'failover=error' => 12];
$scenario_ini = ['failover=error' => ['save_path' => 'failover=error&read_timeout=1']];
$events = array_merge(array_flip(['minority', 'one-way', 'failover=error', 'replica', 'flapping', 'migration']), $events);

$only = null;
foreach ($argv as $arg) {
    if (str_starts_with($arg, '--only=')) $only = explode(',', substr($arg, 7));
}
if ($only !== null && ($unknown = array_diff($only, array_keys($events)))) {
    fwrite(STDERR, 'no such scenario: ' . implode(', ', $unknown) . '; there are ' . implode(', ', array_keys($events)) . "\n");
    exit(2);
}
$settings = $replicas > 1 ? [1, 2] : [0, 1];
// Each side's workers share a /dev/shm of their own, as on a machine of their
// own: the slot map one side fetched must not reach the other side through
// the shared map file (PARTITION_SHM/wa and /wb, made by chaos/partition.sh).
$worker_command = function (int $i) use ($sides) {
    $side = $sides[$i % 2 ? 'minority' : 'majority']['ns'];
    $shm = getenv('PARTITION_SHM') . '/' . substr($side, -2);
    return ['ip', 'netns', 'exec', $side, 'sh', '-c', 'mount --bind "$0" /dev/shm && exec "$@"', $shm];
};
// The minority workers' own sessions live on the shared session's primary.
$own_on_shared_primary = function (int $i, string $prefix, string $shared): string {
    while (true) {
        $id = "own$i" . bin2hex(random_bytes(8));
        if ($i % 2 === 0 || slot_owners(key_slot($prefix . $id))[0] === slot_owners(key_slot($prefix . $shared))[0]) return $id;
    }
};
set_on_every_node('cluster-node-timeout', '1000');
// Both settings at once, each on sessions of its own: workers 0, 1, 4, 5 with
// the lower write_replicas, 2, 3, 6, 7 with the higher (and each group has
// workers on both sides).
$groups = $ini = [];
foreach ($settings as $g => $write_replicas) {
    $groups["write_replicas=$write_replicas"] = fn(int $i) => intdiv($i, 2) % 2 === $g;
    $ini["write_replicas=$write_replicas"] = ['rediscluster_session.write_replicas' => (string)$write_replicas];
}
$rows = $failed = [];
foreach ($events as $scenario => $event) {
    if ($only !== null && !in_array($scenario, $only, true)) continue;
    log_line("$flavor, $replicas replica(s) per primary: $scenario, $workers workers, {$seconds[$scenario]} s");
    set_on_every_node('cluster-allow-reads-when-down', isset($scenario_ini[$scenario]) ? 'yes' : 'no');
    try {
        $rows = [...$rows, ...run_phase($scenario, $seconds[$scenario], $scenario_ini[$scenario] ?? [], $event,
            ['command' => $worker_command, 'own' => $own_on_shared_primary, 'groups' => $groups, 'ini' => $ini,
                'acks' => getenv('PARTITION_SHM')])];
    } catch (Throwable $e) {
        // The cluster is left as it is: the scenarios after this one would measure it, not theirs.
        heal();
        $failed[] = "$scenario: " . $e->getMessage();
        log_line("$scenario failed: {$e->getMessage()}; the cluster as its first node sees it:\n"
            . any_node(['CLUSTER', 'NODES']));
        break;
    }
}
$stuck = stuck_locks();
print_table($rows, $stuck, "\n$flavor, $replicas replica(s) per primary ($workers workers, odd ones on the minority's side,"
    . " locked cycles, lock_expire=$lock_expire s, timeout=0.5, read_timeout=2, cluster-node-timeout 1 s)",
    ['phase', 'ok', 'failed start', 'failed write', 'silent failures', 'lost acked', 'lost acked by count', 'stored, not acked',
        'longest session stall s', 'longest start s', 'longest write s', 'served read-only', 'stale read-only', 'stale locked',
        'crashed or hung']);

$broken = $failed;
// A session_start() waits at most for the lock (lock_retries x lock_wait_time, 5 s) and its
// budget (timeout + read_timeout, 2.5 s); 1 s more for a noisy machine.
$start_budget = 250 * 0.02 + 0.5 + 2 + 1;
foreach ($rows as $row) {
    array_push($broken, ...process_breaks($row));
    if (str_ends_with($row['phase'], "write_replicas=$replicas") && $row['lost acked']) {
        $broken[] = "{$row['phase']}: {$row['lost acked']} acknowledged writes lost with write_replicas equal to the replicas per primary";
    }
    // A locked read older than an acknowledged write: that write was lost, or two primaries served the session.
    if (str_ends_with($row['phase'], "write_replicas=$replicas") && $row['stale locked']) {
        $broken[] = "{$row['phase']}: {$row['stale locked']} locked reads missed an acknowledged write";
    }
    // A split the majority never answered with a promotion tested nothing of what it was for.
    $scenario = explode(',', $row['phase'])[0];
    if (in_array($scenario, ['minority', 'one-way', 'failover=error', 'migration'], true) && str_ends_with($row['event'], 'after never')) {
        $broken[] = "{$row['phase']}: the majority promoted no replica within 20 s";
    }
    // Cut off from all its replicas, the primary must refuse every write_replicas>=1 write, with
    // a warning, in one budget (2.5 s; 1 s more for a noisy machine).
    if ($scenario === 'replica' && !str_ends_with($row['phase'], 'write_replicas=0')) {
        $refusals = array_sum(array_filter($row['warnings'], fn($text) => str_contains($text, '(rediscluster_session.write_replicas)'), ARRAY_FILTER_USE_KEY));
        if ($refusals === 0) $broken[] = "{$row['phase']}: no write was refused while the primary had no replica";
        if ($row['longest write s'] > 3.5) $broken[] = "{$row['phase']}: a write took {$row['longest write s']} s (allowed 3.5 s)";
    }
    if ($row['longest start s'] > $start_budget) {
        $broken[] = "{$row['phase']}: a session_start() took {$row['longest start s']} s (allowed $start_budget s)";
    }
    // A write and its release share a budget (2.5 s), with a grace of 0.5 s for the release;
    // 6 s (two budgets, 1 s more for a noisy machine) was set when each had a budget.
    if ($row['longest write s'] > 2 * 2.5 + 1) {
        $broken[] = "{$row['phase']}: a session write took {$row['longest write s']} s (allowed 6 s)";
    }
}
if ($stuck) $broken[] = "$stuck locks outlived their TTL";
foreach ($broken as $why) echo "BROKEN: $why\n";
exit($broken ? 1 : 0);
