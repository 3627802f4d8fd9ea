<?php
// Driver of bench/lease-cost.sh (which starts the cluster and sets the
// environment): what the lock's lease costs against lock_lease_ms=0, each part
// in one run with the two interleaved (issue 48, item 7).
//   php -n bench/lease-cost.php waiters     the primaries' CPU and the calls of held locks with waiters queued
//   php -n bench/lease-cost.php callgrind   client instructions per warm locked request
//   php -n bench/lease-cost.php cold        the first locked request of fresh processes
//   php -n bench/lease-cost.php cold-trace  the same under perf, and where the lease's extra time goes
require __DIR__ . '/../php-tests/inc/resp.php';

$part = $argv[1] ?? '';
$ext = getenv('RCS_EXT');
$nodes = explode(',', getenv('RCS_SEEDS'));
$primaries = array_values(array_filter($nodes, fn($addr) => Resp::send($addr, ['ROLE'])[0] === 'master'));
$seed_path = implode('&', array_map(fn($addr) => "seed[]=$addr", $primaries));
$env = fn(string $name, int $default) => (int)(getenv($name) ?: $default);

$session_ini = ['session.use_cookies' => 0, 'session.use_only_cookies' => 0, 'session.cache_limiter' => '',
    'session.use_strict_mode' => 0, 'session.lazy_write' => 1, 'session.gc_probability' => 0];
/** The INI of a locked request of this extension with `lock_lease_ms=$lease`, defaults otherwise. */
function ours(int $lease, array $more = []): array {
    global $ext, $seed_path, $session_ini;
    return ['extension' => $ext, 'session.save_handler' => 'rediscluster', 'session.save_path' => $seed_path,
        'redis.session.locking_enabled' => 1, 'rediscluster_session.lock_lease_ms' => $lease] + $more + $session_ini;
}

function command(array $ini, string $script, string ...$args): array {
    $cmd = [PHP_BINARY, '-n'];
    foreach ($ini as $k => $v) array_push($cmd, '-d', "$k=\"$v\"");
    return array_merge($cmd, [__DIR__ . "/$script"], $args);
}

function spawn(array $cmd, bool $stderr = false): array {
    $proc = proc_open($cmd, [1 => ['pipe', 'w'], 2 => $stderr ? ['pipe', 'w'] : ['file', '/dev/null', 'w']], $pipes);
    return [$proc, $pipes];
}

/** The process's last line of output, decoded, once it exits. */
function finish(array $p): array {
    $out = trim(stream_get_contents($p[1][1]));
    $err = isset($p[1][2]) ? stream_get_contents($p[1][2]) : '';
    proc_close($p[0]);
    $last = json_decode(substr($out, strrpos("\n$out", "\n")), true);
    if (!is_array($last)) throw new RuntimeException("worker failed: $out $err");
    return $last + ['stderr' => $err];
}

function median(array $v): float {
    sort($v);
    $n = count($v);
    return ($v[intdiv($n - 1, 2)] + $v[intdiv($n, 2)]) / 2;
}

function quantile(array $v, float $q): float {
    sort($v);
    return $v[min(count($v) - 1, (int)floor($q * count($v)))];
}

/** The servers' counters summed over $addrs: CPU s, socket reads, commands, and calls per command. */
function counters(array $addrs): array {
    $c = ['cpu' => 0.0, 'reads' => 0, 'commands' => 0, 'calls' => []];
    foreach ($addrs as $addr) {
        preg_match_all('/^used_cpu_(?:sys|user):([\d.]+)/m', Resp::send($addr, ['INFO', 'cpu']), $m);
        $c['cpu'] += array_sum(array_map('floatval', $m[1]));
        $stats = Resp::send($addr, ['INFO', 'stats']);
        preg_match('/^total_reads_processed:(\d+)/m', $stats, $m);
        $c['reads'] += (int)$m[1];
        preg_match('/^total_commands_processed:(\d+)/m', $stats, $m);
        $c['commands'] += (int)$m[1];
        preg_match_all('/^cmdstat_([a-z|]+):calls=(\d+)/m', Resp::send($addr, ['INFO', 'commandstats']), $m, PREG_SET_ORDER);
        foreach ($m as [, $name, $n]) $c['calls'][$name] = ($c['calls'][$name] ?? 0) + (int)$n;
    }
    return $c;
}

function delta(array $after, array $before): array {
    $d = ['cpu' => $after['cpu'] - $before['cpu'], 'reads' => $after['reads'] - $before['reads'],
        'commands' => $after['commands'] - $before['commands'], 'calls' => []];
    foreach ($after['calls'] as $name => $n) $d['calls'][$name] = $n - ($before['calls'][$name] ?? 0);
    return $d;
}

/** Sends a command to the primary of $key's slot (following one MOVED). */
function to_owner(string $key, array $args) {
    global $primaries;
    $reply = Resp::send($primaries[0], $args);
    if ($reply instanceof RespError && preg_match('/^MOVED \d+ (\S+)/', $reply->message, $m)) {
        $reply = Resp::send($m[1], $args);
    }
    return $reply;
}

switch ($part) {
    case 'waiters':
        waiters();
        break;
    case 'callgrind':
        callgrind();
        break;
    case 'cold':
        cold(false);
        break;
    case 'cold-trace':
        cold(true);
        break;
    default:
        fwrite(STDERR, "usage: php -n bench/lease-cost.php waiters|callgrind|cold|cold-trace\n");
        exit(2);
}

// 1 + 2. Held locks with waiters queued: the primaries' CPU over each batch and
// over its steady window (every waiter queued, every holder holding), and the
// calls the servers counted in that window.
function waiters(): void {
    global $primaries, $env;
    $sessions = $env('LEASE_COST_SESSIONS', 100);
    $per_session = $env('LEASE_COST_WAITERS', 3);
    $hold = $env('LEASE_COST_HOLD', 10);
    $rounds = $env('LEASE_COST_ROUNDS', 4);
    // lock_wait_time as shipped (20 ms), enough retries (60 s) for a wait behind a 10-s holder.
    $more = ['redis.session.lock_expire' => 30, 'redis.session.lock_wait_time' => 20000,
        'redis.session.lock_retries' => 3000];
    $before = counters($primaries);
    sleep(10);
    $idle = delta(counters($primaries), $before);
    $idle_per_s = $idle['cpu'] / 10;
    fwrite(STDERR, sprintf("idle: %.3f s CPU over 10 s\n", $idle['cpu']));
    // ABBA...: each lease as often first as second.
    $order = [];
    for ($r = 0; $r < $rounds; $r++) array_push($order, ...($r % 2 ? [1000, 0] : [0, 1000]));
    $runs = [];
    foreach ($order as $i => $lease) {
        $ini = ours($lease, $more);
        $start = counters($primaries);
        $t0 = microtime(true);
        $sids = $holders = $locked = [];
        for ($s = 0; $s < $sessions; $s++) {
            $sids[] = $sid = 'cost' . bin2hex(random_bytes(8));
            $holders[] = spawn(command($ini, 'lease.php', 'hold', $sid, (string)$hold));
        }
        // When each holder said it holds its lock, as its line arrives (they start in parallel).
        $pending = array_map(fn($h) => $h[1][1], $holders);
        while ($pending) {
            $read = $pending;
            $none = null;
            if (!stream_select($read, $none, $none, 30)) throw new RuntimeException('the holders took no lock in 30 s');
            foreach ($read as $pipe) {
                $s = array_search($pipe, $pending, true);
                if (trim((string)fgets($pipe)) !== 'locked') throw new RuntimeException("holder $s took no lock");
                $locked[$s] = microtime(true);
                unset($pending[$s]);
            }
        }
        // The waiters, one of each session at a time: the first of each is next in line.
        $waiting = [];
        for ($k = 0; $k < $per_session; $k++) {
            foreach ($sids as $sid) $waiting[] = spawn(command($ini, 'lease.php', 'wait', $sid));
        }
        // Steady once every waiter is in its session's queue (ZCARD of <lock>_FIFO).
        $queued = 0;
        $give_up = min($locked) + $hold - 1;
        while (microtime(true) < $give_up) {
            $queued = 0;
            foreach ($sids as $sid) {
                $queued += (int)to_owner($sid, ['ZCARD', "{PHPREDIS_CLUSTER_SESSION:$sid}_LOCK_FIFO"]);
            }
            if ($queued >= $sessions * $per_session) break;
            usleep(100_000);
        }
        $from = counters($primaries);
        $t_from = microtime(true);
        // Until a second before the first holder lets go, as this process saw them
        // lock (on a loaded machine it may see a line late: checked below).
        usleep(max(0, (int)((min($locked) + $hold - 1 - microtime(true)) * 1e6)));
        $to = counters($primaries);
        $t_to = microtime(true);
        $renewals = $broken = $refused = $failed = $early = 0;
        $first_release = INF;
        foreach ($holders as $h) {
            $r = finish($h);
            $renewals += $r['stats']['lease_renewals'] ?? 0;
            $first_release = min($first_release, $r['released_at']);
            if (preg_grep('/Session lock expired|Failed to write/', $r['messages'])) $refused++;
        }
        $waited = [];
        foreach ($waiting as $w) {
            $r = finish($w);
            $broken += $r['stats']['locks_broken'] ?? 0;
            if (!$r['ok']) $failed++;
            elseif (!$r['saved']) $refused++;
            $waited[] = $r['waited'];
            if ($r['at'] < $t_to) $early++;
        }
        $end = counters($primaries);
        $secs = microtime(true) - $t0;
        $window = $t_to - $t_from;
        $runs[$lease][] = $run = [
            'batch' => delta($end, $start), 'secs' => $secs, 'window' => delta($to, $from), 'window_s' => $window,
            'queued' => $queued, 'renewals' => $renewals, 'broken' => $broken, 'refused' => $refused,
            'failed' => $failed, 'max_wait' => max($waited), 'early' => $early, 'margin' => $first_release - $t_to,
        ];
        fwrite(STDERR, sprintf("batch %d/%d, lease %4d: %.3f s CPU over %.1f s; window %.1f s (%d queued) %.3f s CPU; " .
            "%d renewals, %d broken, %d refused, %d failed, longest wait %.1f s; " .
            "the window ended %.2f s before the first release, %d waiters locked before its end\n",
            $i + 1, count($order), $lease, $run['batch']['cpu'], $secs, $window, $queued, $run['window']['cpu'], $renewals,
            $broken, $refused, $failed, $run['max_wait'], $run['margin'], $early));
    }

    printf("\n%d sessions, each a %d-s holder and %d waiters (lock_wait_time 20 ms), %d batches per lease, interleaved\n",
        $sessions, $hold, $per_session, $rounds);
    printf("idle primaries: %.4f s CPU per s\n\n", $idle_per_s);
    printf("| batch | lease | primaries' CPU, batch | its length | CPU above idle | window | CPU / s in window | above idle / s | renewals | broken | refused | failed |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    $k = 0;
    foreach ($order as $i => $lease) {
        $n = count(array_filter(array_slice($order, 0, $i), fn($l) => $l === $lease));
        $r = $runs[$lease][$n];
        printf("| %d | %d | %.3f s | %.1f s | %.3f s | %.1f s | %.4f s | %.4f s | %d | %d | %d | %d |\n", $i + 1, $lease,
            $r['batch']['cpu'], $r['secs'], $r['batch']['cpu'] - $idle_per_s * $r['secs'], $r['window_s'],
            $r['window']['cpu'] / $r['window_s'], $r['window']['cpu'] / $r['window_s'] - $idle_per_s,
            $r['renewals'], $r['broken'], $r['refused'], $r['failed']);
    }
    // Ratios per round (the two batches next to each other), then their range.
    $ratio = ['batch' => [], 'batch above idle' => [], 'window' => [], 'window above idle' => []];
    for ($r = 0; $r < $rounds; $r++) {
        [$on, $off] = [$runs[1000][$r], $runs[0][$r]];
        $ratio['batch'][] = $on['batch']['cpu'] / $off['batch']['cpu'];
        $ratio['batch above idle'][] = ($on['batch']['cpu'] - $idle_per_s * $on['secs'])
            / ($off['batch']['cpu'] - $idle_per_s * $off['secs']);
        $ratio['window'][] = ($on['window']['cpu'] / $on['window_s']) / ($off['window']['cpu'] / $off['window_s']);
        $ratio['window above idle'][] = ($on['window']['cpu'] / $on['window_s'] - $idle_per_s)
            / ($off['window']['cpu'] / $off['window_s'] - $idle_per_s);
    }
    printf("\nprimaries' CPU, lease 1000 / lease 0, per round (%s):\n", implode(', ', array_map(fn($r) => "round " . ($r + 1), range(0, $rounds - 1))));
    foreach ($ratio as $what => $values) {
        printf("  %-18s %s  (median %.2f, min %.2f, max %.2f)\n", $what,
            implode(', ', array_map(fn($v) => sprintf('%.2f', $v), $values)), median($values), min($values), max($values));
    }

    // 2. The calls in the steady window, per second and per session (summed over the batches of a lease).
    printf("\ncalls the primaries counted in the steady windows, per second per session (INFO commandstats; a script's redis.call included):\n");
    $names = [];
    foreach ([0, 1000] as $lease) foreach ($runs[$lease] as $r) $names += array_flip(array_keys(array_filter($r['window']['calls'])));
    unset($names['info'], $names['zcard']);
    $names = array_keys($names);
    sort($names);
    $rate = function (int $lease, callable $count) use ($runs, $sessions) {
        $n = $s = 0;
        foreach ($runs[$lease] as $r) { $n += $count($r['window']); $s += $r['window_s']; }
        return $n / $s / $sessions;
    };
    printf("| per session per s | lease 0 | lease 1000 |\n|---|---|---|\n");
    foreach ($names as $name) {
        printf("| %s | %.2f | %.2f |\n", $name, $rate(0, fn($w) => $w['calls'][$name] ?? 0), $rate(1000, fn($w) => $w['calls'][$name] ?? 0));
    }
    // The counter reads of the harness itself (one round per snapshot) are left in: 3 INFO a node a snapshot.
    printf("| round trips (socket reads) | %.2f | %.2f |\n", $rate(0, fn($w) => $w['reads']), $rate(1000, fn($w) => $w['reads']));
    printf("| commands | %.2f | %.2f |\n", $rate(0, fn($w) => $w['commands']), $rate(1000, fn($w) => $w['commands']));
    $polls = $rate(1000, fn($w) => $w['calls']['lpop'] ?? 0);
    printf("\nlease 1000: %.2f polls (LPOP + GET + GET, one round trip) per s per session, i.e. per watching waiter " .
        "(the next in line); %.2f per s per waiter over all %d waiters of a session\n", $polls, $polls / $per_session, $per_session);
}

// 3. Client instructions per warm locked request, as bench/run.sh counts them:
// the whole process under callgrind, 220 minus 20 cycles, lease 1000 and 0.
function callgrind(): void {
    global $env;
    $reps = $env('LEASE_COST_CALLGRIND_REPS', 3);
    $dir = getenv('LEASE_COST_DIR');
    $counts = $dumps = [];
    // The slot map shared by the processes on this machine exists before the
    // runs (as in bench/run.sh, whose earlier scenarios made it): else the first
    // run fetches it and the second adopts it, and their difference is off.
    foreach ([1000, 0] as $lease) {
        finish(spawn(command(ours($lease), 'worker.php', 'cold', json_encode(['sid' => 'bench' . bin2hex(random_bytes(12))]))));
    }
    // One id length for every run: the servers and the client hash the keys' bytes.
    for ($r = 0; $r < $reps; $r++) {
        foreach ([1000, 0] as $lease) {
            $sid = 'bench' . bin2hex(random_bytes(12));
            $n = [];
            foreach ([20, 220] as $cycles) {
                $job = json_encode(['sid' => $sid, 'kind' => 'changed', 'n' => $cycles, 'warm' => 3, 'nodes' => []]);
                // The first round's dumps are kept: where the lease's instructions go.
                $out = $r === 0 ? "$dir/callgrind-$lease-$cycles.out" : '/dev/null';
                if ($r === 0) $dumps[] = $out;
                $cmd = array_merge(['valgrind', '--tool=callgrind', "--callgrind-out-file=$out"],
                    command(ours($lease), 'worker.php', 'cycles', $job));
                $result = finish(spawn($cmd, true));
                if ($result['failures'] || !preg_match('/Collected : (\d+)/', $result['stderr'], $m)) {
                    throw new RuntimeException("callgrind run failed: {$result['stderr']}");
                }
                $n[] = (int)$m[1];
            }
            $counts[$lease][] = ($n[1] - $n[0]) / 200;
            fwrite(STDERR, sprintf("callgrind, lease %4d: %d\n", $lease, round(end($counts[$lease]))));
        }
    }
    printf("\nclient instructions per warm locked request (callgrind, whole process, 220 minus 20 cycles), %d runs each:\n", $reps);
    foreach ($counts as $lease => $values) {
        printf("  lease %4d: %s\n", $lease, implode(', ', array_map(fn($v) => number_format(round($v)), $values)));
    }
    $on = median($counts[1000]);
    $off = median($counts[0]);
    printf("  the lease's: %+d (%+.1f %%); against docs/performance.md's 24,856 with the lease: %+.1f %%\n",
        round($on - $off), ($on / $off - 1) * 100, ($on / 24856 - 1) * 100);
    printf("\nwhere they differ (A = lease 1000, B = lease 0; the first round's runs):");
    passthru(implode(' ', array_map('escapeshellarg', ['python3', __DIR__ . '/callgrind-diff.py', '200', ...$dumps,
        '40', 'rediscluster|pthread|timerfd|getpid|clone|session|malloc|free|memcpy'])));
}

// 4. The first locked request of fresh processes, timed inside each from
// session_start() to session_write_close(), lease 1000 and 0 alternating.
// With $trace each runs under `perf record` (bench/lease-cost.sh writes the
// command to LEASE_COST_PERF), and bench/lease-cost-trace.py says where the time went.
function cold(bool $trace): void {
    global $env, $primaries;
    $n = $trace ? $env('LEASE_COST_TRACED', 21) : $env('LEASE_COST_COLD', 41);
    // A primary runs a script for the first time by EVAL: load them on every primary first.
    foreach ([1000, 0] as $lease) {
        for ($i = 0; $i < 3 * count($primaries); $i++) {
            finish(spawn(command(ours($lease), 'worker.php', 'cold', json_encode(['sid' => 'bench' . bin2hex(random_bytes(12))]))));
        }
    }
    $dir = getenv('LEASE_COST_DIR');
    $times = $parts = [];
    $skipped = 0;
    for ($i = 0; $i < $n; $i++) {
        foreach ($i % 2 ? [0, 1000] : [1000, 0] as $lease) {
            $cmd = command(ours($lease), 'worker.php', 'cold', json_encode(['sid' => 'bench' . bin2hex(random_bytes(12))]));
            if ($trace) {
                $data = "$dir/cold-$lease-$i.data";
                $cmd = array_merge(explode(' ', getenv('LEASE_COST_PERF')), ['-o', $data, '--'], $cmd);
            }
            $r = finish(spawn($cmd));
            $times[$lease][] = $r['seconds'] * 1e6;
            if ($trace) {
                $out = shell_exec(implode(' ', array_map('escapeshellarg', ['python3', __DIR__ . '/lease-cost-trace.py',
                    $data, (string)$r['start_ns'], (string)$r['end_ns'], (string)$r['pid']])));
                $traced = json_decode((string)$out, true);
                if (is_array($traced['parts'] ?? null)) $parts[$lease][] = $traced;
                else $skipped++;
                unlink($data);
            }
        }
    }
    $load = sys_getloadavg();
    printf("\nfirst locked request of a fresh process, session_start() to session_write_close() (µs), %d each, alternating%s; load average %.2f:\n",
        $n, $trace ? ', under perf record' : '', $load[0]);
    printf("| lease | p10 | p25 | median | p75 | p90 |\n|---|---|---|---|---|---|\n");
    foreach ([1000, 0] as $lease) {
        $v = $times[$lease];
        printf("| %d | %d | %d | %d | %d | %d |\n", $lease, quantile($v, 0.1), quantile($v, 0.25), median($v),
            quantile($v, 0.75), quantile($v, 0.9));
    }
    $pairs = array_map(fn($on, $off) => $on - $off, $times[1000], $times[0]);
    printf("lease 1000 - lease 0: median of the medians' difference %+d µs (%+.1f %%); median of the %d pairs' differences %+d µs\n",
        median($times[1000]) - median($times[0]), (median($times[1000]) / median($times[0]) - 1) * 100, $n, median($pairs));
    if (!$trace) return;
    // Each part: median per lease, and the difference.
    printf("\nwhere the time goes (µs, medians over the runs%s; perf's tracing adds about a µs a system call):\n",
        $skipped ? ", $skipped runs left out: perf lost events, or a request of more than its 2 sends" : '');
    printf("| part | lease 1000 | lease 0 | difference |\n|---|---|---|---|\n");
    $keys = [];
    foreach ($parts as $runs) foreach ($runs as $p) $keys += array_flip(array_keys($p['parts']));
    foreach (array_keys($keys) as $key) {
        $on = median(array_map(fn($p) => $p['parts'][$key] ?? 0, $parts[1000]));
        $off = median(array_map(fn($p) => $p['parts'][$key] ?? 0, $parts[0]));
        printf("| %s | %.1f | %.1f | %+.1f |\n", $key, $on, $off, $on - $off);
    }
    printf("\nper run (lease 1000), µs: total | main thread off-CPU while the watchdog thread ran | watch() | pthread_create | between take reply and save send\n");
    foreach ($parts[1000] as $i => $p) {
        printf("  %4d | %5.0f | %5.1f | %5.1f | %5.1f | %5.1f\n", $i, $p['parts']['total'],
            $p['parts']['main preempted by the watchdog thread'] ?? 0,
            $p['parts']['watch() (uprobe)'] ?? 0, $p['parts']['pthread_create() (uprobe)'] ?? 0,
            $p['parts']['take reply -> save send'] ?? 0);
    }
}
