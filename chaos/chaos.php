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
// Prints a table; exits 1 if a hard rule broke: a PHP process crashed or hung,
// a failure came without a warning, an acknowledged update was lost in the
// graceful phase or with write_replicas=1, a lock outlived its TTL, a session
// stalled too long or too many requests failed (see the end).
//   RCS_EXT=... php -n chaos/chaos.php FLAVOR BASE_PORT [--short] [--only=PHASE,...]
require __DIR__ . '/../php-tests/inc/resp.php';

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
    foreach (any_node(['CLUSTER', 'SLOTS']) ?? [] as $range) {
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
    return $up >= 5;
}

function cluster_script(string $action, string $addr): void {
    global $root, $flavor, $base;
    $port = (int)substr(strrchr($addr, ':'), 1);
    exec(escapeshellarg("$root/scripts/cluster.sh") . " $action $flavor $base $port 2>&1", $out, $status);
    if ($status !== 0) throw new RuntimeException("cluster.sh $action $port: " . implode("\n", $out));
}

/** The session's counter as stored, read from its slot's primary. */
function stored_count(string $key): ?int {
    [$primary] = slot_owners(any_node(['CLUSTER', 'KEYSLOT', $key]));
    $data = $primary ? Resp::send($primary, ['GET', $key]) : null;
    return is_string($data) && preg_match('/n\|i:(\d+);/', $data, $m) ? (int)$m[1] : ($data === null ? 0 : null);
}

function spawn_worker(array $job, string $prefix, array $phase_ini, string $ext): array {
    global $nodes;
    $save_path = implode('&', array_map(fn($a) => "seed[]=$a", $nodes))
        . '&timeout=0.5&read_timeout=2&prefix=' . urlencode($prefix)
        . (isset($phase_ini['save_path']) ? '&' . $phase_ini['save_path'] : '');
    unset($phase_ini['save_path']);
    $ini = [
        'session.save_handler' => 'rediscluster', 'session.save_path' => $save_path,
        'session.use_cookies' => '0', 'session.use_only_cookies' => '0', 'session.cache_limiter' => '',
        'session.use_strict_mode' => '0', 'session.gc_probability' => '0',
        'redis.session.locking_enabled' => '1', 'redis.session.lock_expire' => (string)$GLOBALS['lock_expire'],
        'redis.session.lock_wait_time' => '20000', 'redis.session.lock_retries' => '250',
    ] + $phase_ini;
    $cmd = [PHP_BINARY, '-n', '-d', "extension=$ext"];
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

/** Runs one phase: workers on fresh sessions, $event after $before_event seconds. */
function run_phase(string $name, float $seconds, array $phase_ini, callable $event): array {
    global $workers, $before_event;
    $prefix = 'CHAOS:' . preg_replace('/\W+/', '-', $name) . ':' . bin2hex(random_bytes(3)) . ':';
    $shared = 'shared' . bin2hex(random_bytes(8));
    $start_ns = hrtime(true) + 300_000_000;
    $procs = [];
    $own = [];
    for ($i = 0; $i < $workers; $i++) {
        $own[] = "own$i" . bin2hex(random_bytes(8));
        $job = ['own' => $own[$i], 'shared' => $shared,
            'seconds' => $seconds, 'start_ns' => $start_ns];
        // (m): every other worker runs the previous release.
        $ext = $name === 'mixed' && $i % 2 ? getenv('RCS_EXT_PREVIOUS') : getenv('RCS_EXT');
        $procs[] = spawn_worker($job, $prefix, $phase_ini, $ext);
    }
    time_nanosleep(0, 300_000_000);
    usleep((int)($before_event * 1e6));
    $slot = any_node(['CLUSTER', 'KEYSLOT', $prefix . $shared]);
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
    $event_ns = hrtime(true);
    [$event_text, $event_seconds] = $event($slot, $hot);
    $ended = [];
    $results = [];
    foreach ($procs as $w) {
        [$result, $how] = finish_worker($w, microtime(true) + $seconds + 30);
        $ended[] = $how;
        if ($result) $results[] = $result;
    }
    wait_for('cluster_healthy', 30);

    $acked = [];
    $done = [];
    $served = [];
    $read_only = 0;
    $longest_start = 0;
    $failures = ['start' => 0, 'write' => 0];
    $silent = 0;
    $texts = [];
    foreach ($results as $r) {
        foreach ($r['acked'] as $sid => $n) $acked[$sid] = ($acked[$sid] ?? 0) + $n;
        foreach ($r['done'] as $sid => $times) $done[$sid] = array_merge($done[$sid] ?? [], $times);
        foreach ($r['served'] as $sid => $times) $served[$sid] = array_merge($served[$sid] ?? [], $times);
        $read_only += $r['read_only'];
        $longest_start = max($longest_start, $r['longest_start']);
        foreach ($r['failures'] as [, $stage, $warnings]) {
            $failures[$stage]++;
            if (!$warnings) $silent++;
            foreach ($warnings as $text) {
                $text = preg_replace('/\d+\.\d+\.\d+\.\d+:\d+/', 'HOST:PORT', $text);
                $texts[$text] = ($texts[$text] ?? 0) + 1;
            }
        }
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
    // the event on (every session is busy all the time, so any gap is a stall).
    $longest_gap = function (array $by_session) use ($event_ns): int {
        $gap = 0;
        foreach ($by_session as $times) {
            sort($times);
            $previous = $event_ns;
            foreach (array_filter($times, fn($t) => $t >= $event_ns) as $t) {
                $gap = max($gap, $t - $previous);
                $previous = $t;
            }
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
        'lost acked' => $lost,
        'stored, not acked' => $unacked_stored,
        'longest session stall s' => round($stall / 1e9, 2),
        'served read-only' => $read_only,
        'longest unserved s' => round($served_stall / 1e9, 2),
        'longest start s' => round($longest_start / 1e9, 2),
        'crashed or hung' => count(array_filter($ended, fn($how) => $how !== 'ok')),
        'ended' => array_values(array_filter($ended, fn($how) => $how !== 'ok')),
        'warnings' => $texts,
    ];
}

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
 * moved too.
 */
function migrate_slots(array $slots, string $from, string $to): float {
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

// --only=PHASE,PHASE runs just those (the lagging phases need the kill phase before them).
foreach ($argv as $arg) {
    if (str_starts_with($arg, '--only=')) {
        $phases = array_intersect_key($phases, array_flip(explode(',', substr($arg, 7))));
    }
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
$rows = [];
foreach ($phases as $name => [$seconds, $phase_ini]) {
    log_line("$flavor: phase $name, $workers workers, {$seconds} s");
    $fails_over = in_array($name, ['kill', 'restart', 'lagging', 'lagging, write_replicas=1'], true)
        || str_starts_with($name, 'kill failover=');
    set_node_timeout($fails_over ? 1000 : 15000);
    $reads_when_down = str_starts_with($name, 'kill failover=');
    set_on_every_node('cluster-allow-reads-when-down', $reads_when_down ? 'yes' : 'no');
    $rows[] = run_phase($name, $seconds, $phase_ini, $events[$name]);
    if (str_starts_with($name, 'lagging') || $reads_when_down) {
        restart_node($killed);   // the next phase needs its replica back
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
$ttls = [];
foreach (lock_keys() as $key => $addr) $ttls[$key] = Resp::send($addr, ['PTTL', $key]);
$without_ttl = count(array_filter($ttls, fn($ttl) => $ttl === -1));
// Until the longest TTL left has run out (at least 1 s: a late command would show).
usleep((1000 + max([0, ...$ttls])) * 1000);
$stuck = count(lock_keys()) + $without_ttl;

$columns = ['phase', 'ok', 'failed start', 'failed write', 'silent failures', 'lost acked', 'stored, not acked',
    'longest session stall s', 'served read-only', 'longest unserved s', 'longest start s', 'migration window s',
    'crashed or hung'];
echo "\n$flavor ($workers workers, locked cycles, lock_expire=$lock_expire s, timeout=0.5 and read_timeout=2 but"
    . " read_timeout=1 in the failover= phases, cluster-node-timeout 1 s in kill, restart, lagging and failover=, 15 s elsewhere)\n\n";
echo '| ', implode(' | ', $columns), " |\n|", str_repeat('---|', count($columns)), "\n";
foreach ($rows as $row) echo '| ', implode(' | ', array_map(fn($c) => $row[$c], $columns)), " |\n";
echo "\nlocks left after their TTL: $stuck\n";
foreach ($rows as $row) {
    echo "- {$row['phase']}: {$row['event']}\n";
    foreach ($row['warnings'] as $text => $count) echo "    {$count}x $text\n";
    foreach ($row['ended'] as $how) echo "    worker $how\n";
}

$broken = [];
foreach ($rows as $row) {
    if ($row['crashed or hung']) $broken[] = "{$row['phase']}: a PHP process crashed or hung";
    if ($row['silent failures']) $broken[] = "{$row['phase']}: a failure without a warning";
    // The target is the promotion time plus 1 s; 2 s leaves room for a noisy machine. A lock
    // left behind by a failed write would stall its session for the lock TTL (10 s).
    $allowed = ($row['no primary s'] ?? INF) + 2;
    if ($row['phase'] === 'scale-out') {
        // redis-cli moves a slot's few keys in one MIGRATE: each window is milliseconds.
        $allowed = 1.0;
    }
    if ($row['phase'] === 'mixed') {
        // The two releases do not hand the lock to each other's waiters; nobody
        // waits longer than lock_retries x lock_wait_time (250 x 20 ms).
        $allowed = 5.0;
    }
    if ($row['phase'] === 'atomic migration') {
        // The server pauses the slots' writes only for the hand-over itself.
        $allowed = 0.5;
    }
    if ($row['migration window s'] !== '') {
        // The target is the slot's migration window plus 0.5 s; 1 s leaves room for a noisy machine.
        $allowed = $row['migration window s'] + 1;
    }
    if ($row['longest session stall s'] > $allowed) {
        $broken[] = "{$row['phase']}: a session stalled {$row['longest session stall s']} s (allowed $allowed s)";
    }
    // Requests ride a failover out for up to read_timeout (2 s): none fails while a primary is
    // there, and each worker fails about once per 2 s without one; failing fast would fail hundreds.
    $without_primary = $row['no primary s'] ?? INF;
    // With write_replicas, every write while the replica is cut off fails on purpose.
    $allowed = $without_primary > 0 ? $workers * ((int)ceil($without_primary / 2) + 1) : 0;
    $failed = $row['failed start'] + $row['failed write'];
    // Those phases compare failover=error's failures with failover=none's (below).
    if ($failed > $allowed && !str_contains($row['phase'], 'write_replicas') && !str_contains($row['phase'], 'failover=')) {
        $broken[] = "{$row['phase']}: $failed failed requests (allowed $allowed)";
    }
}
$by_phase = array_column($rows, null, 'phase');
if (($by_phase['graceful']['lost acked'] ?? 0)) $broken[] = 'graceful failover lost acknowledged updates';
foreach (['reshard', 'atomic migration', 'scale-out', 'mixed'] as $phase) {
    if (isset($by_phase[$phase]) && $by_phase[$phase]['lost acked']) $broken[] = "$phase lost acknowledged updates";
}
if (($by_phase['lagging, write_replicas=1']['lost acked'] ?? 0)) $broken[] = 'write_replicas=1 lost acknowledged updates';
foreach (['kill failover=none', 'kill failover=error'] as $phase) {
    if ($by_phase[$phase]['lost acked'] ?? 0) $broken[] = "$phase (write_replicas=1) lost acknowledged updates";
}
// failover=error: every session_start() serves the session, read-only while
// its primary cannot, each within the budget (timeout 0.5 s + read_timeout
// 1 s; 0.5 s more for a noisy machine). A session goes unserved longer only
// behind a write that was in flight at the kill: it rides out its own budget,
// then its close's release another, so that no lock is left to its TTL.
if ($row = $by_phase['kill failover=error'] ?? null) {
    if ($row['failed start']) $broken[] = "kill failover=error: {$row['failed start']} session_start() failed";
    if ($row['longest start s'] > 2.0) $broken[] = "kill failover=error: a session_start() took {$row['longest start s']} s (allowed 2 s)";
    if ($row['longest unserved s'] > 3.5) $broken[] = "kill failover=error: a session went unserved {$row['longest unserved s']} s (allowed 3.5 s)";
    if (!$row['served read-only']) $broken[] = 'kill failover=error: no session was served read-only: the scenario did not bite';
}
// Without write_replicas the frozen replica must have cost acknowledged updates,
// or the phase above proved nothing.
if (isset($by_phase['lagging']) && !$by_phase['lagging']['lost acked']) $broken[] = 'the lagging phase lost nothing: the scenario did not bite';
if ($stuck) $broken[] = "$stuck locks outlived their TTL";
foreach ($broken as $why) echo "BROKEN: $why\n";
exit($broken ? 1 : 0);
