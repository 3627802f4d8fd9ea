<?php
// What the chaos drivers share (chaos/chaos.php, chaos/partition.php): the
// cluster seen through $nodes, PHP workers (chaos/worker.php) doing locked
// session cycles, one phase's run and its figures, slot moves, the lock check
// and the table. The including script sets the globals: $flavor, $base,
// $root, $nodes (the original nodes' host:port), $workers, $lock_expire,
// $before_event.
require __DIR__ . '/../php-tests/inc/resp.php';

function log_line(string $text): void {
    fwrite(STDERR, "chaos: $text\n");
}

/** A reply from the first node that answers, or null. */
function any_node(array $args) {
    global $nodes;
    foreach ($nodes as $addr) {
        try {
            $reply = Resp::send($addr, $args);
            if (!$reply instanceof RespError) return $reply;
        } catch (Throwable) {
            Resp::forget($addr);
        }
    }
    return null;
}

/** [primary, replicas] of the slot, from CLUSTER SLOTS on a live node. */
function slot_owners(int $slot): array {
    return owners_in(any_node(['CLUSTER', 'SLOTS']), $slot);
}

/** [primary, replicas] of the slot in a CLUSTER SLOTS reply, or [null, []]. */
function owners_in(?array $slots_reply, int $slot): array {
    foreach ($slots_reply ?? [] as $range) {
        if ($slot >= $range[0] && $slot <= $range[1]) {
            $addr = fn($node) => "{$node[0]}:{$node[1]}";
            return [$addr($range[2]), array_map($addr, array_slice($range, 3))];
        }
    }
    return [null, []];
}

function wait_for(callable $condition, float $seconds): ?float {
    $start = microtime(true);
    while (microtime(true) - $start < $seconds) {
        if ($condition()) return microtime(true) - $start;
        usleep(50000);
    }
    return null;
}

function cluster_healthy(): bool {
    global $nodes;
    $up = 0;
    foreach ($nodes as $addr) {
        try {
            $info = Resp::send($addr, ['CLUSTER', 'INFO']);
            if (!is_string($info) || !str_contains($info, 'cluster_state:ok')) return false;
            $up++;
        } catch (Throwable) {
            Resp::forget($addr);
        }
    }
    return $up >= count($nodes) - 1;
}

function cluster_script(string $action, string $addr): void {
    global $root, $flavor, $base;
    $port = (int)substr(strrchr($addr, ':'), 1);
    exec(escapeshellarg("$root/scripts/cluster.sh") . " $action $flavor $base $port 2>&1", $out, $status);
    if ($status !== 0) throw new RuntimeException("cluster.sh $action $port: " . implode("\n", $out));
}

/** The session's counter as stored, read from its slot's primary. */
function stored_count(string $key): ?int {
    return stored_int($key, 'n');
}

/** The session's integer $name as stored (0 if the session or the value is missing), or null if unreadable. */
function stored_int(string $key, string $name): ?int {
    [$primary] = slot_owners(any_node(['CLUSTER', 'KEYSLOT', $key]));
    $data = $primary ? Resp::send($primary, ['GET', $key]) : null;
    if ($data === null) return 0;
    if (!is_string($data)) return null;
    return preg_match('/(?:^|;|\})' . preg_quote($name, '/') . '\|i:(\d+);/', $data, $m) ? (int)$m[1] : 0;
}

/** Starts a worker; $command_prefix runs it elsewhere (`ip netns exec NS`). */
function spawn_worker(array $job, string $prefix, array $phase_ini, string $ext, array $command_prefix = []): array {
    global $nodes;
    $save_path = implode('&', array_map(fn($a) => "seed[]=$a", $nodes))
        . '&timeout=0.5&read_timeout=2&prefix=' . urlencode($prefix)
        . (isset($phase_ini['save_path']) ? '&' . $phase_ini['save_path'] : '');
    unset($phase_ini['save_path']);
    $ini = $phase_ini + [
        'session.save_handler' => 'rediscluster', 'session.save_path' => $save_path,
        'session.use_cookies' => '0', 'session.use_only_cookies' => '0', 'session.cache_limiter' => '',
        'session.use_strict_mode' => '0', 'session.gc_probability' => '0',
        'redis.session.locking_enabled' => '1', 'redis.session.lock_expire' => (string)$GLOBALS['lock_expire'],
        'redis.session.lock_wait_time' => '20000', 'redis.session.lock_retries' => '250',
    ];
    $cmd = [...$command_prefix, PHP_BINARY, '-n', '-d', "extension=$ext"];
    foreach ($ini as $k => $v) array_push($cmd, '-d', "$k=\"$v\"");
    array_push($cmd, __DIR__ . '/worker.php', json_encode($job));
    $proc = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
    stream_set_blocking($pipes[1], false);
    return ['proc' => $proc, 'out' => $pipes[1], 'err' => $pipes[2], 'buffer' => ''];
}

/** Waits for a worker until $deadline; returns [result or null, how it ended]. */
function finish_worker(array $w, float $deadline): array {
    while (true) {
        $w['buffer'] .= stream_get_contents($w['out']);
        $status = proc_get_status($w['proc']);
        if (!$status['running']) {
            $w['buffer'] .= stream_get_contents($w['out']);
            $err = stream_get_contents($w['err']);
            proc_close($w['proc']);
            if ($status['signaled']) return [null, "crashed (signal {$status['termsig']}) $err"];
            if ($status['exitcode'] !== 0) return [null, "exited {$status['exitcode']}: $err"];
            return [json_decode(trim($w['buffer']), true), 'ok'];
        }
        if (microtime(true) > $deadline) {
            proc_terminate($w['proc'], 9);
            proc_close($w['proc']);
            return [null, 'hung'];
        }
        usleep(20000);
    }
}

/**
 * Runs one phase: workers on fresh sessions, $event after $before_event
 * seconds, called with the slot of the shared session, the hot slots and
 * [session id => lock key] of every session of the phase.
 * $options: 'workers' => N, instead of $workers; 'hold' => [min, max] ms,
 * how long each locked request holds its lock before it writes; 'previous'
 * => fn(int $worker): bool, whether worker $worker runs the previous release
 * (RCS_EXT_PREVIOUS); 'command' => fn(int $worker): array, a command prefix for worker
 * $worker (its network namespace); 'own' => fn(int $worker, string $prefix,
 * string $shared): string, the id of its own session (default: random);
 * 'alone' => true: each worker works on its own session only, not on the shared one too;
 * 'groups' => [label => fn(int $worker): bool, ...]: the workers in groups,
 * each with a shared session of its own (on the first one's primary) and INI
 * of its own ('ini' => [label => INI]); then one row per group ("NAME, label")
 * instead of one; 'acks' => DIR: the workers publish their acknowledged
 * writes in a new directory in DIR and count the reads older than them.
 */
function run_phase(string $name, float $seconds, array $phase_ini, callable $event, array $options = []): array {
    global $before_event;
    $workers = $options['workers'] ?? $GLOBALS['workers'];
    $previous = $options['previous'] ?? fn() => false;
    $prefix = 'CHAOS:' . preg_replace('/\W+/', '-', $name) . ':' . bin2hex(random_bytes(3)) . ':';
    $groups = $options['groups'] ?? ['' => fn() => true];
    $group_of = function (int $i) use ($groups): string {
        foreach ($groups as $label => $in) if ($in($i)) return $label;
        throw new LogicException("worker $i is in no group");
    };
    $shared = [];
    foreach (array_keys($groups) as $label) {
        do {
            $id = 'shared' . bin2hex(random_bytes(8));
        } while ($shared && slot_owners(key_slot($prefix . $id))[0] !== slot_owners(key_slot($prefix . reset($shared)))[0]);
        $shared[$label] = $id;
    }
    $acks = null;
    if (isset($options['acks'])) mkdir($acks = $options['acks'] . '/' . bin2hex(random_bytes(6)));
    $start_ns = hrtime(true) + 300_000_000;
    $procs = [];
    $own = [];
    for ($i = 0; $i < $workers; $i++) {
        $label = $group_of($i);
        $own[] = isset($options['own']) ? $options['own']($i, $prefix, $shared[$label]) : "own$i" . bin2hex(random_bytes(8));
        $job = ['own' => $own[$i], 'shared' => isset($options['alone']) ? $own[$i] : $shared[$label], 'worker' => $i,
            'seconds' => $seconds, 'start_ns' => $start_ns, 'acks' => $acks, 'hold' => $options['hold'] ?? null];
        $ext = getenv($previous($i) ? 'RCS_EXT_PREVIOUS' : 'RCS_EXT');
        $procs[] = spawn_worker($job, $prefix, ($options['ini'][$label] ?? []) + $phase_ini, $ext,
            isset($options['command']) ? $options['command']($i) : []);
    }
    time_nanosleep(0, 300_000_000);
    usleep((int)($before_event * 1e6));
    $slot = any_node(['CLUSTER', 'KEYSLOT', $prefix . reset($shared)]);
    // The hot sessions: the shared one and one worker's own on the same primary.
    $hot = [$slot];
    foreach ($own as $sid) {
        $own_slot = any_node(['CLUSTER', 'KEYSLOT', $prefix . $sid]);
        if ($own_slot !== $slot && slot_owners($own_slot)[0] === slot_owners($slot)[0]) {
            $hot[] = $own_slot;
            break;
        }
    }
    $GLOBALS['migration_window'] = null;
    $locks = [];
    foreach ([...$own, ...$shared] as $sid) $locks[$sid] = '{' . $prefix . $sid . '}_LOCK';
    $event_ns = hrtime(true);
    [$event_text, $event_seconds] = $event($slot, $hot, $locks);
    $finished = [];
    foreach ($procs as $i => $w) {
        [$result, $how] = finish_worker($w, microtime(true) + $seconds + 30);
        $finished[$group_of($i)][] = [$result, $how];
    }
    wait_for('cluster_healthy', 30);
    $rows = [];
    foreach ($finished as $label => $group) {
        $row_name = $label === '' ? $name : "$name, $label";
        $rows[] = phase_row($row_name, $prefix, $group, $event_ns, $start_ns + (int)($seconds * 1e9), $event_text, $event_seconds);
    }
    return isset($options['groups']) ? $rows : $rows[0];
}

/** One phase's figures from its workers' [result, how it ended]. */
function phase_row(string $name, string $prefix, array $finished, int $event_ns, int $end_ns, string $event_text, ?float $event_seconds): array {
    $ended = array_column($finished, 1);
    $results = array_filter(array_column($finished, 0));

    $acked = [];
    $done = [];
    $served = [];
    $read_only = 0;
    $stale = ['read_only' => 0, 'locked' => 0];
    $longest_start = $longest_write = 0;
    $failures = ['start' => 0, 'write' => 0];
    $silent = 0;
    $texts = [];
    foreach ($results as $r) {
        foreach ($r['acked'] as $sid => $n) $acked[$sid] = ($acked[$sid] ?? 0) + $n;
        foreach ($r['done'] as $sid => $times) $done[$sid] = array_merge($done[$sid] ?? [], $times);
        foreach ($r['served'] as $sid => $times) $served[$sid] = array_merge($served[$sid] ?? [], $times);
        $read_only += $r['read_only'];
        foreach ($r['stale'] ?? [] as $how => $n) $stale[$how] += $n;
        $longest_start = max($longest_start, $r['longest_start']);
        $longest_write = max($longest_write, $r['longest_write'] ?? 0);
        foreach ($r['failures'] as [, $stage, $warnings]) {
            $failures[$stage]++;
            if (!$warnings) $silent++;
            foreach ($warnings as $text) {
                $text = preg_replace('/\d+\.\d+\.\d+\.\d+:\d+/', 'HOST:PORT', $text);
                $texts[$text] = ($texts[$text] ?? 0) + 1;
            }
        }
    }
    // Exactly: what the workers' reads found missing, and what they acknowledged
    // after their last read of the session that the final value lacks. Each
    // worker's own figures too: a mixed pool's are split by release.
    $lost_exactly = 0;
    $by_worker = [];
    foreach ($results as $r) {
        $lost_here = array_sum($r['lost'] ?? []);
        foreach ($r['unchecked'] ?? [] as $sid => $seqs) {
            if (!$seqs) continue;
            $last = stored_int($prefix . $sid, "w{$r['worker']}");
            $lost_here += $last === null ? count($seqs) : count(array_filter($seqs, fn($s) => $s > $last));
        }
        $lost_exactly += $lost_here;
        $failed = array_count_values(array_column($r['failures'], 1));
        $by_worker[$r['worker']] = ['lost acked' => $lost_here, 'failed start' => $failed['start'] ?? 0,
            'failed write' => $failed['write'] ?? 0, 'locks broken' => $r['locks_broken'] ?? null, 'holds' => $r['holds'] ?? []];
    }
    $lost = $unacked_stored = 0;
    foreach ($acked as $sid => $n) {
        $stored = stored_count($prefix . $sid);
        if ($stored === null) {
            $lost += $n;
            continue;
        }
        $lost += max(0, $n - $stored);
        $unacked_stored += max(0, $stored - $n);
    }
    // The longest time a session went without a successful request (or
    // without a session_start() that served it, read-only included), from
    // the event on to the workers' end (every session is busy all the time,
    // so any gap is a stall; one never served again stalled until the end).
    $longest_gap = function (array $by_session) use ($event_ns, $end_ns): int {
        $gap = 0;
        foreach ($by_session as $times) {
            sort($times);
            $previous = $event_ns;
            foreach (array_filter($times, fn($t) => $t >= $event_ns) as $t) {
                $gap = max($gap, $t - $previous);
                $previous = $t;
            }
            $gap = max($gap, $end_ns - $previous);
        }
        return $gap;
    };
    $stall = $longest_gap($done);
    $served_stall = $longest_gap($served);
    return [
        'phase' => $name,
        'event' => $event_text . ' after ' . ($event_seconds === null ? 'never' : round($event_seconds, 2) . ' s'),
        // How long the session's slot had no primary: only a kill leaves one.
        'no primary s' => str_starts_with($name, 'kill') || str_starts_with($name, 'lagging') ? $event_seconds : 0.0,
        'migration window s' => $GLOBALS['migration_window'] === null ? '' : round($GLOBALS['migration_window'], 2),
        'ok' => array_sum($acked),
        'failed start' => $failures['start'],
        'failed write' => $failures['write'],
        'silent failures' => $silent,
        // The final counter alone can hide a loss (behind a write that failed but was stored), never add one.
        'lost acked' => max($lost, $lost_exactly),
        'lost acked by count' => $lost,
        'stored, not acked' => $unacked_stored,
        'longest session stall s' => round($stall / 1e9, 2),
        'served read-only' => $read_only,
        // Reads older than a write another worker had acknowledged before they began (with 'acks').
        'stale read-only' => $stale['read_only'],
        'stale locked' => $stale['locked'],
        'longest unserved s' => round($served_stall / 1e9, 2),
        'longest start s' => round($longest_start / 1e9, 2),
        'longest write s' => round($longest_write / 1e9, 2),
        'crashed or hung' => count(array_filter($ended, fn($how) => $how !== 'ok')),
        'by worker' => $by_worker,
        'ended' => array_values(array_filter($ended, fn($how) => $how !== 'ok')),
        'warnings' => $texts,
    ];
}

function any_live_primary(): string {
    global $nodes;
    foreach ($nodes as $node) {
        try {
            if (Resp::send($node, ['ROLE'])[0] === 'master') return $node;
        } catch (Throwable) {
            Resp::forget($node);
        }
    }
    throw new RuntimeException('no live primary');
}

function node_answers(string $addr): bool {
    try {
        return Resp::send($addr, ['PING']) === 'PONG';
    } catch (Throwable) {
        Resp::forget($addr);
        return false;
    }
}

/** Every original node knows $addr. */
function cluster_agrees_on(string $addr): bool {
    global $nodes;
    foreach ($nodes as $node) {
        try {
            if (!str_contains(Resp::send($node, ['CLUSTER', 'NODES']), $addr)) return false;
        } catch (Throwable) {
            Resp::forget($node);
        }
    }
    return true;
}

/** `--cluster check`: every node agrees on the configuration and every slot is served. */
function cluster_check(string $seed): bool {
    try {
        cluster_cli(['--cluster', 'check', $seed]);
        return true;
    } catch (RuntimeException) {
        return false;
    }
}

/** Runs the flavor's CLI (redis-cli or valkey-cli) with $args. */
function cluster_cli(array $args): void {
    global $root, $flavor, $base;
    $command = escapeshellarg("$root/scripts/cluster.sh") . " cli $flavor $base "
        . implode(' ', array_map('escapeshellarg', $args));
    exec("$command 2>&1", $out, $status);
    if ($status !== 0) throw new RuntimeException("$command: " . implode("\n", array_slice($out, -15)));
}

/** Redis Cluster's hash slot of a key without braces. */
function key_slot(string $key): int {
    $crc = 0;
    for ($i = 0, $n = strlen($key); $i < $n; $i++) {
        $crc ^= ord($key[$i]) << 8;
        for ($bit = 0; $bit < 8; $bit++) {
            $crc = $crc & 0x8000 ? (($crc << 1) ^ 0x1021) & 0xFFFF : ($crc << 1) & 0xFFFF;
        }
    }
    return $crc % 16384;
}

/** Stores $count small keys, pipelined to each slot's primary; returns how many. */
function fill_cluster(int $count): int {
    $owner = [];
    foreach (any_node(['CLUSTER', 'SLOTS']) as $range) {
        for ($slot = $range[0]; $slot <= $range[1]; $slot++) $owner[$slot] = "{$range[2][0]}:{$range[2][1]}";
    }
    $batches = [];
    for ($i = 0; $i < $count; $i++) {
        $key = "CHAOS:filler:$i";
        $batches[$owner[key_slot($key)]][] = "*3\r\n$3\r\nSET\r\n$" . strlen($key) . "\r\n$key\r\n$6\r\nfiller\r\n";
    }
    $stored = 0;
    foreach ($batches as $addr => $commands) {
        $socket = stream_socket_client("tcp://$addr", $errno, $error, 2);
        foreach (array_chunk($commands, 1000) as $chunk) {
            fwrite($socket, implode('', $chunk));
            foreach ($chunk as $_) $stored += fgets($socket) === "+OK\r\n" ? 1 : 0;
        }
        fclose($socket);
    }
    return $stored;
}

/** Pause between two keys of a migrating slot: it widens the window clients must ride out. */
const MIGRATION_PAUSE_MS = 100;
/** The shortest time a slot migrates: a few hundred ms, like a slot of a few keys per session. */
const MIGRATION_MIN_WINDOW = 0.5;

function node_id(string $addr): string {
    return Resp::send($addr, ['CLUSTER', 'MYID']);
}

/** A primary other than $addr. */
function other_primary(string $addr): string {
    global $nodes;
    foreach ($nodes as $node) {
        if ($node !== $addr && Resp::send($node, ['ROLE'])[0] === 'master') return $node;
    }
    throw new RuntimeException('no other primary');
}

/**
 * Moves $slots from $from to $to the classic way, all at once (IMPORTING and
 * MIGRATING, MIGRATE key by key with a pause, SETSLOT NODE everywhere);
 * returns the seconds the slots were migrating. Keys written meanwhile are
 * moved too. $after_key, called after each key moved, stops the move there
 * (the slots left migrating) when it returns true.
 */
function migrate_slots(array $slots, string $from, string $to, ?callable $after_key = null): float {
    global $nodes;
    [$host, $port] = explode(':', $to);
    $to_id = node_id($to);
    $from_id = node_id($from);
    $started = microtime(true);
    foreach ($slots as $slot) {
        Resp::send($to, ['CLUSTER', 'SETSLOT', $slot, 'IMPORTING', $from_id]);
        Resp::send($from, ['CLUSTER', 'SETSLOT', $slot, 'MIGRATING', $to_id]);
    }
    while (microtime(true) - $started < 20) {
        $keys = [];
        foreach ($slots as $slot) {
            $keys = array_merge($keys, Resp::send($from, ['CLUSTER', 'GETKEYSINSLOT', $slot, 1]));
        }
        // Hold the window open a while, as slots with more keys would.
        if (!$keys && microtime(true) - $started >= MIGRATION_MIN_WINDOW) break;
        foreach ($keys as $key) {
            $reply = Resp::send($from, ['MIGRATE', $host, $port, '', 0, 5000, 'REPLACE', 'KEYS', $key]);
            if ($reply instanceof RespError && !str_contains($reply->message, 'NOKEY')) {
                throw new RuntimeException("MIGRATE: $reply->message");
            }
            if ($after_key && $after_key()) return microtime(true) - $started;
        }
        usleep(MIGRATION_PAUSE_MS * 1000);
    }
    foreach ($slots as $slot) Resp::send($to, ['CLUSTER', 'SETSLOT', $slot, 'NODE', $to_id]);
    $window = microtime(true) - $started;
    foreach ($nodes as $node) {
        try {
            if ($node !== $to && Resp::send($node, ['ROLE'])[0] === 'master') {
                foreach ($slots as $slot) Resp::send($node, ['CLUSTER', 'SETSLOT', $slot, 'NODE', $to_id]);
            }
        } catch (Throwable) {
            Resp::forget($node);
        }
    }
    return $window;
}

/**
 * Moves $slots from $from to $to with Valkey 9's atomic slot migration: the
 * source copies them whole and hands them over in one step. Returns the
 * seconds until both nodes name $to as the owner.
 */
function migrate_slots_atomically(array $slots, string $from, string $to): float {
    $ranges = [];
    foreach ($slots as $slot) array_push($ranges, $slot, $slot);
    $reply = Resp::send($from, ['CLUSTER', 'MIGRATESLOTS', 'SLOTSRANGE', ...$ranges, 'NODE', node_id($to)]);
    if ($reply instanceof RespError) throw new RuntimeException("CLUSTER MIGRATESLOTS: $reply->message");
    $owned_by_to = function () use ($slots, $from, $to) {
        foreach ([$from, $to] as $node) {
            foreach (Resp::send($node, ['CLUSTER', 'SLOTS']) as $range) {
                foreach ($slots as $slot) {
                    if ($slot >= $range[0] && $slot <= $range[1] && "{$range[2][0]}:{$range[2][1]}" !== $to) return false;
                }
            }
        }
        return true;
    };
    $took = wait_for($owned_by_to, 20);
    if ($took === null) {
        $jobs = Resp::send($from, ['CLUSTER', 'GETSLOTMIGRATIONS']);
        throw new RuntimeException("CLUSTER MIGRATESLOTS did not finish in 20 s: " . json_encode($jobs));
    }
    return $took;
}

/** Starts a killed node again; seconds until it is an in-sync replica, or null. */
function restart_node(string $addr): ?float {
    cluster_script('start-node', $addr);
    return wait_for(function () use ($addr) {
        try {
            $role = Resp::send($addr, ['ROLE']);
            return is_array($role) && $role[0] === 'slave' && $role[3] === 'connected';
        } catch (Throwable) {
            Resp::forget($addr);
            return false;
        }
    }, 20);
}

/**
 * cluster-node-timeout on every node: 1 s where a phase wants a primary failed
 * over, 15 s elsewhere, so that a loaded machine never fails one over by
 * accident in a phase that counts acknowledged updates lost.
 */
function set_node_timeout(int $ms): void {
    set_on_every_node('cluster-node-timeout', (string)$ms);
}

function set_on_every_node(string $name, string $value): void {
    foreach (explode("\n", trim((string)any_node(['CLUSTER', 'NODES']))) as $line) {
        $addr = explode('@', explode(' ', $line)[1] ?? '')[0];
        try {
            if ($addr !== '') Resp::send($addr, ['CONFIG', 'SET', $name, $value]);
        } catch (Throwable) {
            Resp::forget($addr);
        }
    }
}

// Locks: every one left must carry a TTL, and none may outlive it.
function lock_keys(): array {
    global $nodes;
    $keys = [];
    foreach ($nodes as $addr) {
        try {
            if (Resp::send($addr, ['ROLE'])[0] !== 'master') continue;
            foreach (Resp::send($addr, ['KEYS', '*CHAOS:*_LOCK*']) as $key) $keys[$key] = $addr;
        } catch (Throwable) {
            Resp::forget($addr);
        }
    }
    return $keys;
}
/** Locks left: waits until the longest TTL left has run out; returns how many are still there, or have no TTL. */
function stuck_locks(): int {
    $ttls = [];
    foreach (lock_keys() as $key => $addr) $ttls[$key] = Resp::send($addr, ['PTTL', $key]);
    $without_ttl = count(array_filter($ttls, fn($ttl) => $ttl === -1));
    // Until the longest TTL left has run out (at least 1 s: a late command would show).
    usleep((1000 + max([0, ...$ttls])) * 1000);
    return count(lock_keys()) + $without_ttl;
}

/** The phases' table under $title, the locks left, and each phase's event, warnings and ended workers. */
function print_table(array $rows, int $stuck, string $title, array $columns = [
    'phase', 'ok', 'failed start', 'failed write', 'silent failures', 'lost acked', 'stored, not acked',
    'longest session stall s', 'served read-only', 'longest unserved s', 'longest start s', 'migration window s',
    'crashed or hung']): void {
    echo "$title\n\n";
    echo '| ', implode(' | ', $columns), " |\n|", str_repeat('---|', count($columns)), "\n";
    foreach ($rows as $row) echo '| ', implode(' | ', array_map(fn($c) => $row[$c], $columns)), " |\n";
    echo "\nlocks left after their TTL: $stuck\n";
    foreach ($rows as $row) {
        echo "- {$row['phase']}: {$row['event']}\n";
        foreach ($row['warnings'] as $text => $count) echo "    {$count}x $text\n";
        foreach ($row['ended'] as $how) echo "    worker $how\n";
    }
}

/** The rules every phase keeps: no PHP process crashed or hung, no failure without a warning. */
function process_breaks(array $row): array {
    $broken = [];
    if ($row['crashed or hung']) $broken[] = "{$row['phase']}: a PHP process crashed or hung";
    if ($row['silent failures']) $broken[] = "{$row['phase']}: a failure without a warning";
    return $broken;
}
