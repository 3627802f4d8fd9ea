<?php
// The runner of 057-model-based.phpt: renders a sequence's requests as PHP
// scripts, runs them against the cluster (a group's processes side by side),
// checks each request's output and then the store against the oracle, runs a
// plain sequence again on PHP's files handler (the two must agree), shrinks a
// failing sequence and prints it as a runnable PHP script.

require_once __DIR__ . '/generator.php';
require_once __DIR__ . '/oracle.php';

/** How far (seconds) a TTL or a fixed end may be from the oracle's window: a loaded machine, whole seconds. */
const MODEL_SLACK = 3;

// ---- The request scripts ----

/**
 * What every request script starts with. RCS_MODEL_STATE names a JSON file
 * shared by the sequence's requests: the ids by label, and the cookie (the
 * label of the id the last request ended with). see() prints a step's
 * result, the session status, the id's label (a new one for an id PHP made)
 * and $_SESSION; warnings print as "warning: MESSAGE".
 */
const MODEL_PRELUDE = <<<'PHP'
ob_start();   // headers are "sent" with the first output, and session_regenerate_id() refuses then
$state_file = getenv('RCS_MODEL_STATE');
$state = json_decode(file_get_contents($state_file), true);
function id(string $label): string {
    return $label === '' ? '' : $GLOBALS['state']['ids'][$label];
}
function see(string $step, $result): void {
    global $state, $state_file;
    $id = session_id();
    $label = $id === '' ? '-' : array_search($id, $state['ids'], true);
    if ($label === false) {
        $label = 'g' . (count(preg_grep('/^g\d+$/', array_keys($state['ids']))) + 1);
        $state['ids'][$label] = $id;
    }
    if ($label !== '-') $state['cookie'] = $label;
    file_put_contents($state_file, json_encode($state));
    echo $step, ' => ', json_encode($result), ' | ', session_status() === PHP_SESSION_ACTIVE ? 'active' : 'none',
        " $label | ", json_encode($_SESSION ?? null), "\n";
}
set_error_handler(function (int $type, string $message) {
    // A session's digest, why its primary could not serve it and the save_path vary from run to run.
    $line = 'warning: ' . preg_replace(['/^([a-z_]+\(\)|PHP Request Shutdown): /', '/sha256:[0-9a-f]{12}/', '/could not serve it \(.*?\), so/', '/is correct \(.*\)$/'],
        ['', 'sha256:*', 'could not serve it (*), so', 'is correct (*)'], $message) . "\n";
    // A forked child's lines wait in a file for its parent to print them in turn.
    if (isset($GLOBALS['child_log'])) file_put_contents($GLOBALS['child_log'], "child: $line", FILE_APPEND);
    else echo $line;
    return true;
});
/** In a forked child: the output buffered so far is its parent's, and its own lines go to a file. */
function child_starts(): void {
    while (ob_get_level()) ob_end_clean();
    $GLOBALS['child_log'] = getenv('RCS_MODEL_STATE') . '.child';
}
/** In the parent: the lines of the child it waited for. */
function child_lines(): void {
    $log = getenv('RCS_MODEL_STATE') . '.child';
    if (!is_file($log)) return;
    echo file_get_contents($log);
    unlink($log);
}
/** A group's handshakes, by files in a directory of its own: one request tells another it got this far. */
function signal(string $name): void {
    touch(getenv('RCS_MODEL_SYNC') . "/$name");
}
function await(string $name): void {
    $until = microtime(true) + 20;
    while (!file_exists(getenv('RCS_MODEL_SYNC') . "/$name") && microtime(true) < $until) usleep(5000);
}
/** Stops the whole process, its lease's watchdog too, for $seconds. */
function freeze(float $seconds): void {
    $pid = getmypid();
    exec("(sleep $seconds; kill -CONT $pid) >/dev/null 2>&1 & kill -STOP $pid");
}

PHP;

/** A request's script, after the prelude. */
function model_script(array $request): string {
    $code = '';
    foreach ($request['steps'] as $step) {
        $see = fn(string $call) => 'see(' . var_export(model_step_name($step), true) . ", $call);\n";
        $code .= match ($step[0]) {
            'start' => match ($step[1]) {
                '-' => '',
                'cookie' => "session_id(id(\$state['cookie'] ?? ''));\n",
                default => 'session_id(id(' . var_export($step[1], true) . "));\n",
            } . $see($step[2] ? "session_start(['read_and_close' => true])" : 'session_start()'),
            'set' => '$_SESSION[' . var_export($step[1], true) . '] = ' . var_export($step[2], true) . ";\n" . $see('null'),
            'unset' => 'unset($_SESSION[' . var_export($step[1], true) . "]);\n" . $see('null'),
            'close' => $see('session_write_close()'),
            'abort' => $see('session_abort()'),
            'reset' => $see('session_reset()'),
            'destroy' => $see('session_destroy()'),
            'regen' => $see('session_regenerate_id(' . var_export($step[1], true) . ')'),
            'lifetime' => $see("rediscluster_session_set_lifetime($step[1], " . var_export($step[2], true) . ')'),
            'fork' => "\$pid = pcntl_fork();\nif (\$pid === 0) {\n    child_starts();\n"
                . ['none' => '', 'change' => "    \$_SESSION['k1'] = 'child';\n", 'destroy' => "    session_destroy();\n"][$step[1]]
                . "    exit(0);\n}\npcntl_waitpid(\$pid, \$status);\nchild_lines();\n" . $see('true'),
        };
    }
    // Out of the buffer before a fatal error discards it.
    return $code . "echo \"end $request[end]\\n\";\nob_end_flush();\n" . match ($request['end']) {
        'end' => '',
        'exit' => "exit(3);\n",
        'throw' => "throw new RuntimeException('the request ends with an uncaught exception');\n",
        'fatal' => "ini_set('memory_limit', '16M');\n\$too_much = str_repeat('x', 64 << 20);\n",
    };
}

/**
 * A process of a group, after the prelude: its sections, one after the
 * other; an increment writes by = $tag . "s$section". Each prints what it
 * read, what its set_lifetime(), regenerate or frozen lease gave, and its
 * close's result.
 */
function model_group_script(array $sections, string $tag): string {
    return '$tag = ' . var_export($tag, true) . ";\n"
        . '$lifetime = ' . MODEL_GROUP_LIFETIME . ";\n"
        . 'foreach (' . var_export($sections, true) . ' as $s => [$label, $how]) {' . <<<'PHP'

    // Once another holds the lock: lock_failure_readonly and one short try.
    if ($how === 'ro') {
        await("held-$label");
        ini_set('redis.session.lock_failure_readonly', '1');
        ini_set('redis.session.lock_retries', '1');
        ini_set('redis.session.lock_wait_time', '1000');
    }
    if ($how === 'expire') ini_set('redis.session.lock_expire', '1');
    session_id(id($label));
    $started = session_start($how === 'rac' ? ['read_and_close' => true] : []);
    echo "read $s ", json_encode([session_id() === id($label), $started, [$_SESSION['n'] ?? 0, $_SESSION['by'] ?? '']]), "\n";
    if (!in_array($how, ['touch', 'abort', 'rac', 'ro', 'destroy'], true)) {
        $_SESSION['n'] = ($_SESSION['n'] ?? 0) + 1;
        $_SESSION['by'] = $tag . "s$s";
    }
    if (str_starts_with($how, 'life')) echo "life $s ", json_encode(rediscluster_session_set_lifetime($how === 'life' ? $lifetime : 0)), "\n";
    if (str_starts_with($how, 'regen')) echo "regen $s ", json_encode([session_regenerate_id($how === 'regen_del'), session_id()]), "\n";
    if ($how === 'hold') {
        signal("held-$label");
        await("done-$label");
    }
    if ($how === 'expire') usleep(2500000);   // past its lock_expire and a lease: the lock's backstop
    if ($how === 'fence') {
        freeze(1.5);   // past its lease: nobody renews it, nobody watches it, so nobody breaks it
        echo "fence $s ", json_encode(rediscluster_session_lock_info(session_id())['locked']), "\n";
    }
    if ($how === 'incr_end') break;   // written at the request's end
    $closed = match ($how) { 'abort' => session_abort(), 'rac' => true, 'destroy' => session_destroy(), default => session_write_close() };
    echo "closed $s ", json_encode($closed), "\n";
    foreach (['redis.session.lock_failure_readonly', 'redis.session.lock_retries', 'redis.session.lock_wait_time', 'redis.session.lock_expire'] as $name) ini_restore($name);
    if ($how === 'ro') signal("done-$label");
}
echo "end\n";

PHP;
}

/**
 * The INI of a request of $sequence on $handler ('rediscluster', or 'files' in
 * directory $dir); in an $outage, a frozen primary is given up on sooner.
 */
function model_ini_of(array $sequence, array $ini, string $handler, string $dir = '', bool $outage = false): array {
    $ini += [
        'session.use_strict_mode' => (int)$sequence['strict'],
        'session.gc_probability' => 0,
        'redis.session.locking_enabled' => (int)$sequence['locking'],
        'redis.session.lock_wait_time' => 20000,
        'redis.session.lock_retries' => 1500,   // 30 s: a group's sections never time out
        'redis.session.lock_expire' => 30,
        'display_errors' => 1,
        'log_errors' => 0,
        'html_errors' => 0,
        'error_reporting' => E_ALL,
    ];
    if ($handler === 'files') {
        $ini += ['session.save_handler' => 'files', 'session.save_path' => $dir];
    } elseif ($sequence['failover'] === 'error') {
        $timeouts = $outage ? 'timeout=0.6&read_timeout=0.6&' : '';
        $ini += ['session.save_path' => rcs_save_path("failover=error&{$timeouts}prefix=" . urlencode(rcs_prefix()))];
    }
    return rcs_session_ini($ini);
}

/**
 * Runs the scripts $codes (each after the prelude) side by side, their
 * handshakes in directory $sync; returns each one's output lines (normalized)
 * and exit status.
 */
function model_exec(array $ini, array $codes, string $state_file, string $sync = ''): array {
    $children = [];
    foreach ($codes as $code) {
        $script = tempnam(sys_get_temp_dir(), 'rcs-model-');
        file_put_contents($script, "<?php\n" . MODEL_PRELUDE . $code);
        $cmd = rcs_php_command($ini);
        $cmd[] = $script;
        $proc = proc_open($cmd, [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['redirect', 1]], $pipes, null, ['RCS_MODEL_STATE' => $state_file, 'RCS_MODEL_SYNC' => $sync] + getenv());
        $children[] = [$proc, $pipes[1], $script];
    }
    $outputs = [];
    foreach ($children as [$proc, $pipe, $script]) {
        $output = stream_get_contents($pipe);
        fclose($pipe);
        $status = proc_close($proc);
        unlink($script);
        // After "end", only warnings: the rest is PHP's own message of an uncaught exception or a fatal error.
        $lines = [];
        $ended = false;
        foreach (explode("\n", rtrim($output, "\n")) as $line) {
            if (!$ended || str_starts_with($line, 'warning: ')) $lines[] = $line;
            $ended = $ended || str_starts_with($line, 'end');
        }
        $lines[] = "exit $status";
        $outputs[] = $lines;
    }
    return $outputs;
}

/** A group process's output as the oracle takes it: per section [label, how, same id?, started, [n, by], closed, warnings, what else it said]. */
function model_parse_group(array $lines, array $sections): array {
    $runs = array_map(fn($s) => [$s[0], $s[1], null, null, null, null, [], null], $sections);
    $last = count($sections) - 1;
    $current = 0;
    foreach ($lines as $line) {
        if (preg_match('/^read (\d+) (.*)$/', $line, $m)) {
            $current = (int)$m[1];
            [$runs[$current][2], $runs[$current][3], $runs[$current][4]] = json_decode($m[2], true);
        } elseif (preg_match('/^(?:life|regen|fence) (\d+) (.*)$/', $line, $m)) {
            $runs[(int)$m[1]][7] = json_decode($m[2], true);
        } elseif (preg_match('/^closed (\d+) (.*)$/', $line, $m)) {
            $runs[(int)$m[1]][5] = json_decode($m[2], true);
            $current = min((int)$m[1] + 1, $last);
        } elseif (preg_match('/^exit (\d+)$/', $line, $m)) {
            if ($runs[$last][1] === 'incr_end') {
                $runs[$last][5] = $m[1] === '0' ? true : "exit $m[1]";
            } elseif ($m[1] !== '0') {
                $runs[$last][6][] = "exit $m[1]";
            }
        } elseif ($line !== 'end') {
            $runs[$current][6][] = str_starts_with($line, 'warning: ') ? substr($line, 9) : "output: $line";
        }
    }
    return $runs;
}

// ---- Checking the store ----

/** Whether the store's $raw data and lock_info() $info, read within [t0, t1], are $version. */
function model_matches(array $version, ?string $raw, array $info, float $t0, float $t1): array {
    $data = $version['data'] === null ? $raw === null : $raw === model_encode($version['data']);
    if ($version['data'] === null) return [$data, $info['data_ttl_ms'] === -2, $info['lifetime'] === null];
    $ttl = $info['data_ttl_ms'] / 1000;
    $left = $info['lifetime']['seconds'] ?? 0;
    return [
        $data,
        $info['data_ttl_ms'] >= 0 && $t1 + $ttl >= $version['exp'][0] - MODEL_SLACK && $t0 + $ttl <= $version['exp'][1] + MODEL_SLACK,
        match ($version['life'][0] ?? null) {
            null => $info['lifetime'] === null,
            'slide' => $info['lifetime'] == ['seconds' => $version['life'][1], 'sliding' => true],
            'fixed' => ($info['lifetime']['sliding'] ?? null) === false
                && $t1 + $left >= $version['life'][1] - MODEL_SLACK && $t0 + $left <= $version['life'][2] + MODEL_SLACK,
        },
    ];
}

/** A version as people read it, its times as seconds from $now. */
function model_show(array $version, float $now): string {
    if ($version['data'] === null) return 'no data';
    $s = fn(array $w) => round($w[0] - $now) . (round($w[1] - $now) == round($w[0] - $now) ? '' : '..' . round($w[1] - $now)) . ' s';
    return json_encode($version['data']) . ', ttl ' . $s($version['exp']) . ', lifetime ' . match ($version['life'][0] ?? null) {
        null => 'none', 'slide' => "sliding {$version['life'][1]} s", 'fixed' => 'fixed, ' . $s([$version['life'][1], $version['life'][2]]) . ' left',
    };
}

/**
 * Reads every id the oracle knows from the cluster; keeps, for each, the
 * versions that match. Returns [kind, message] for the first id none matches
 * (kind: data, ttl or lifetime, the first of them no version has right), or null.
 */
function model_check_store(ModelOracle $oracle, array $ids): ?array {
    foreach ($oracle->store as $label => $versions) {
        if (!isset($ids[$label])) return ['ids', "no request made the id $label"];
        $t0 = microtime(true);
        $raw = rcs_cmd('GET', rcs_prefix() . $ids[$label]);
        $info = rediscluster_session_lock_info($ids[$label]);
        $t1 = microtime(true);
        if (!is_array($info)) return ['lock_info', "lock_info($label) gave " . json_encode($info)];
        if ($info['locked']) return ['lock', "$label: its lock is still held"];
        $matches = array_map(fn($v) => model_matches($v, $raw, $info, $t0, $t1), $versions);
        $kept = array_keys(array_filter($matches, fn($m) => $m === [true, true, true]));
        if ($kept === []) {
            $kind = 'lifetime';
            foreach ([0 => 'data', 1 => 'ttl'] as $i => $what) {
                if (!in_array(true, array_column($matches, $i), true)) { $kind = $what; break; }
            }
            $seen = $raw === null ? 'no data' : json_encode($raw) . ', ttl ' . round($info['data_ttl_ms'] / 1000) . ' s, lifetime '
                . ($info['lifetime'] === null ? 'none' : ($info['lifetime']['sliding'] ? 'sliding ' : 'fixed, ') . $info['lifetime']['seconds'] . ' s' . ($info['lifetime']['sliding'] ? '' : ' left'));
            // The kind names the lifetimes too, so that different rules broken are told apart.
            $life = fn(?array $data_or_raw, $life) => $data_or_raw === null ? 'no data' : ($life === null ? 'none' : (($life[0] ?? null) === 'slide' || ($life['sliding'] ?? false) ? 'sliding' : 'fixed'));
            $kind .= ' (model: ' . implode(' or ', array_unique(array_map(fn($v) => $life($v['data'], $v['life']), $versions)))
                . '; store: ' . $life($raw === null ? null : [], $info['lifetime']) . ')';
            return [$kind, "$label: the store has $seen; the model expects " . implode(' or ', array_map(fn($v) => model_show($v, $t0), $versions))];
        }
        $oracle->store[$label] = array_values(array_intersect_key($versions, array_flip($kept)));
    }
    return null;
}

// ---- A whole sequence ----

/** A state file with fresh ids for the fixed labels. */
function model_state_file(): string {
    $file = tempnam(sys_get_temp_dir(), 'rcs-model-state-');
    $ids = [];
    foreach (MODEL_IDS as $label) $ids[$label] = 'm' . bin2hex(random_bytes(8)) . $label;
    file_put_contents($file, json_encode(['ids' => $ids]));
    return $file;
}

function model_ids(string $state_file): array {
    return json_decode(file_get_contents($state_file), true)['ids'];
}

/**
 * Runs $sequence and checks it. Returns null when every check passed, else
 * ['kind' => …, 'round' => …, 'message' => …, 'log' => what the oracle
 * expected of each round run so far]. Adds to $reached how often each
 * feature of MODEL_FEATURES was reached in the rounds that passed.
 */
function model_check(array $sequence, array &$reached = []): ?array {
    $state = model_state_file();
    $oracle = new ModelOracle($sequence['strict'], $sequence['locking']);
    $log = [];
    $outputs = [];
    $fail = function (string $kind, int $round, string $message) use (&$log) {
        return compact('kind', 'round', 'message', 'log');
    };
    try {
        foreach ($sequence['rounds'] as $r => $round) {
            $outage = !empty($round['outage']);
            $ini = model_ini_of($sequence, $round['ini'], 'rediscluster', '', $outage);
            $round_reached = [];
            $t0 = microtime(true);
            if (isset($round['group'])) {
                $sync = "$state-sync$r";
                mkdir($sync);
                $codes = array_map(fn($p) => model_group_script($round['group'][$p], "r{$r}p$p"), array_keys($round['group']));
                $out = model_exec($ini, $codes, $state, $sync);
                array_map('unlink', glob("$sync/*"));
                rmdir($sync);
                $window = [$t0, microtime(true)];
                $runs = array_map(fn($p) => model_parse_group($out[$p], $round['group'][$p]), array_keys($round['group']));
                [$errors, $made, $round_reached] = $oracle->group($round['ini'], $runs, $window, "r$r");
                $log[$r] = ['expected' => null, 'got' => $out];
                if ($errors) return $fail('group', $r, implode("\n", $errors));
                // The ids the group's regenerations made, for the rounds after.
                $ids = json_decode(file_get_contents($state), true);
                foreach ($made as $label => [$p, $s]) $ids['ids'][$label] = $runs[$p][$s][7][1];
                file_put_contents($state, json_encode($ids));
            } else {
                $frozen = $outage ? model_freeze(model_ids($state)['a']) : null;
                try {
                    [$out] = model_exec($ini, [model_script($round)], $state);
                } finally {
                    if ($frozen !== null) model_thaw($frozen, model_ids($state)['a']);
                }
                $expected = $oracle->request($round, [$t0, microtime(true)]);
                $log[$r] = ['expected' => $expected, 'got' => [$out]];
                $outputs[$r] = $out;
                if ($out !== $expected) {
                    $i = key(array_diff_assoc($expected, $out) + array_diff_assoc($out, $expected));
                    preg_match('/^[a-z_]+/', $expected[$i] ?? $out[$i], $m);
                    return $fail('output:' . ($m[0] ?? '?'), $r, "line " . ($i + 1) . " differs\nexpected:\n  " . implode("\n  ", $expected) . "\ngot:\n  " . implode("\n  ", $out));
                }
                foreach ($out as $line) {
                    $feature = match (true) {
                        str_contains($line, 'is read only: its primary could not serve it') => 'failover=error',
                        str_starts_with($line, 'fork(') => 'fork',
                        default => null,
                    };
                    if ($feature !== null) $round_reached[$feature] = ($round_reached[$feature] ?? 0) + 1;
                }
            }
            $now = microtime(true);
            $log[$r]['store'] = array_map(fn($versions) => implode(' or ', array_map(fn($v) => model_show($v, $now), $versions)), $oracle->store);
            if ($error = model_check_store($oracle, model_ids($state))) return $fail($error[0], $r, $error[1]);
            foreach ($round_reached as $feature => $count) $reached[$feature] = ($reached[$feature] ?? 0) + $count;
        }
        if ($sequence['plain']) return model_differential($sequence, $outputs, $state, $fail);
        return null;
    } finally {
        unlink($state);
        @unlink("$state.child");
        model_delete_keys();
    }
}

/** What the generator reaches only when it forces it: every run of MODEL_PERIOD sequences reaches each. */
const MODEL_FEATURES = ['failover=error', 'lock_failure_readonly', 'expired lock', 'fence', 'fork',
    'concurrent lifetime', 'concurrent regenerate', 'concurrent destroy'];

// ---- An outage ----

/**
 * Freezes the primary of $id (SIGSTOP, as scripts/cluster.sh pause-node does)
 * once its replicas have all it has, for a request that finds it silent;
 * returns the primary. Far shorter than the cluster's node timeout: no failover.
 */
function model_freeze(string $id): string {
    $primary = rcs_primary_of(rcs_prefix() . $id);
    $synced = function () use ($primary): bool {
        $info = Resp::send($primary, ['INFO', 'replication']);
        preg_match('/^master_repl_offset:(\d+)/m', $info, $offset);
        preg_match_all('/^slave\d+:.*\boffset=(\d+)/m', $info, $replicas);
        return $replicas[1] !== [] && array_unique($replicas[1]) === [$offset[1]];
    };
    rcs_wait_until($synced, 10) or throw new RuntimeException("the replicas of $primary did not catch up");
    model_cluster_node('pause-node', $primary);
    return $primary;
}

/**
 * Thaws $primary. What the request sent it meanwhile runs now: a lock of $id
 * taken then, by a request that gave up and could not release it, lives
 * lock_expire and a lease; its heartbeat never moves, so the next request
 * breaks it a lease after it came. One such request here (it reads and
 * releases, changing nothing), then the lock is gone.
 */
function model_thaw(string $primary, string $id): void {
    model_cluster_node('resume-node', $primary);
    if (rcs_cmd('EXISTS', rcs_lock_key($id)) === 1) {
        rcs_php("session_id('$id'); @session_start(['read_and_close' => true]);",
            rcs_locking(['redis.session.lock_retries' => '500', 'redis.session.lock_wait_time' => '20000']));
    }
    rcs_wait_until(fn() => rcs_cmd('EXISTS', rcs_lock_key($id)) === 0, 10);
}

/** scripts/cluster.sh ACTION for the node at $addr. */
function model_cluster_node(string $action, string $addr): void {
    $command = [__DIR__ . '/../../../scripts/cluster.sh', $action, rcs_env('RCS_FLAVOR'), (string)rcs_seeds()[0][1], substr(strrchr($addr, ':'), 1)];
    exec(implode(' ', array_map('escapeshellarg', $command)), $output, $status);
    if ($status !== 0) throw new RuntimeException("scripts/cluster.sh $action $addr failed");
}

/**
 * Differential check: the same requests on PHP's files handler print the same
 * lines, and a later read of each id finds the same data.
 */
function model_differential(array $sequence, array $outputs, string $state, callable $fail): ?array {
    $dir = sys_get_temp_dir() . '/rcs-model-files-' . bin2hex(random_bytes(6));
    mkdir($dir);
    $files_state = model_state_file();
    $reader = <<<'PHP'
foreach ($state['ids'] as $label => $id) {
    session_id($id);
    session_start(['read_and_close' => true]);
    echo "$label: ", json_encode($_SESSION), "\n";
}
PHP;
    try {
        foreach ($sequence['rounds'] as $r => $round) {
            [$out] = model_exec(model_ini_of($sequence, $round['ini'], 'files', $dir), [model_script($round)], $files_state);
            if ($out !== $outputs[$r]) {
                return $fail('differential', $r, "the files handler printed\n  " . implode("\n  ", $out) . "\nrediscluster printed\n  " . implode("\n  ", $outputs[$r]));
            }
        }
        $last = ['ini' => end($sequence['rounds'])['ini']];
        [$files] = model_exec(model_ini_of($sequence, $last['ini'], 'files', $dir), [$reader], $files_state);
        [$ours] = model_exec(model_ini_of($sequence, $last['ini'], 'rediscluster'), [$reader], $state);
        if ($files !== $ours) {
            return $fail('differential', count($sequence['rounds']) - 1, "a later read of each id: the files handler has\n  " . implode("\n  ", $files) . "\nrediscluster has\n  " . implode("\n  ", $ours));
        }
        return null;
    } finally {
        unlink($files_state);
        array_map('unlink', glob("$dir/*"));
        rmdir($dir);
    }
}

/** Deletes this run's keys (every key under its prefix) on every primary. */
function model_delete_keys(): void {
    foreach (rcs_primaries() as $addr) {
        foreach ([rcs_prefix() . '*', '{' . rcs_prefix() . '*'] as $pattern) {
            foreach (Resp::send($addr, ['KEYS', $pattern]) as $key) Resp::send($addr, ['DEL', $key]);
        }
    }
}

// ---- Shrinking ----

/** Smaller variants of $sequence: fewer rounds, processes, sections and steps, then simpler settings. */
function model_smaller(array $sequence): Generator {
    $with = function (array $path, $value) use ($sequence) {
        $s = &$sequence;
        foreach ($path as $key) $s = &$s[$key];
        $s = $value;
        unset($s);
        return $sequence;
    };
    $rounds = $sequence['rounds'];
    if (count($rounds) > 1) {
        foreach (array_keys($rounds) as $r) yield $with(['rounds'], array_values(array_diff_key($rounds, [$r => 1])));
    }
    foreach ($rounds as $r => $round) {
        if (isset($round['group'])) {
            foreach ($round['group'] as $p => $sections) {
                if (count($round['group']) > 1) yield $with(['rounds', $r, 'group'], array_values(array_diff_key($round['group'], [$p => 1])));
                foreach (array_keys($sections) as $s) {
                    $fewer = array_values(array_diff_key($sections, [$s => 1]));
                    if ($fewer && !in_array('incr_end', array_column(array_slice($fewer, 0, -1), 1), true)) {
                        yield $with(['rounds', $r, 'group', $p], $fewer);
                    }
                }
            }
        } else {
            $steps = $round['steps'];
            for ($length = min(4, count($steps)); $length >= 1; $length--) {
                for ($i = 0; $i + $length <= count($steps); $i++) {
                    $fewer = $steps;
                    array_splice($fewer, $i, $length);
                    if (model_valid($fewer)) yield $with(['rounds', $r, 'steps'], $fewer);
                }
            }
            if ($round['end'] !== 'end') yield $with(['rounds', $r, 'end'], 'end');
        }
        foreach (['session.lazy_write' => 0, 'redis.session.early_refresh' => 0, 'redis.session.lock_failure_readonly' => 0, 'session.gc_maxlifetime' => 1000] as $key => $plain) {
            if ($round['ini'][$key] !== $plain) yield $with(['rounds', $r, 'ini', $key], $plain);
        }
    }
    // Not what some rounds need: a lock (for contention, or a forked child's
    // destroy), failover=error (for an outage).
    $needs = ['locking' => false, 'failover' => false];
    foreach ($rounds as $round) {
        $kinds = array_column(array_merge(...($round['group'] ?? [[]])), 1);
        $needs['locking'] = $needs['locking'] || array_diff($kinds, ['incr', 'incr_end', 'touch', 'abort', 'rac']) !== []
            || in_array(['fork', 'destroy'], $round['steps'] ?? [], true);
        $needs['failover'] = $needs['failover'] || !empty($round['outage']);
    }
    foreach (['locking' => false, 'strict' => false, 'failover' => 'none'] as $key => $plain) {
        if ($sequence[$key] !== $plain && !($needs[$key] ?? false)) yield $with([$key], $plain);
    }
}

/** The smallest variant of $sequence that still fails as $failure did, within $budget runs (a dot each). */
function model_shrink(array $sequence, array $failure, int $budget = 150): array {
    do {
        $smaller = false;
        foreach (model_smaller($sequence) as $candidate) {
            if ($budget-- <= 0) break 2;
            echo '.';
            $again = model_check($candidate);
            if ($again !== null && $again['kind'] === $failure['kind']) {
                [$sequence, $failure, $smaller] = [$candidate, $again, true];
                break;
            }
        }
    } while ($smaller);
    return [$sequence, $failure];
}

// ---- The report ----


/** $array as PHP source on one line. */
function model_php_array(array $array): string {
    return '[' . implode(', ', array_map(fn($k, $v) => var_export($k, true) . ' => ' . var_export($v, true), array_keys($array), $array)) . ']';
}

/**
 * A failing sequence as a PHP script that runs on its own against a cluster:
 * its rounds up to the failing one, each request's output and then the store
 * beside what the oracle expected.
 */
function model_repro(array $sequence, array $failure): string {
    $text = "<?php\n// 057-model-based.phpt, seed $sequence[seed], shrunk to what still fails: $failure[kind] in round "
        . ($failure['round'] + 1) . "\n// " . str_replace("\n", "\n// ", $failure['message']) . "\n" . <<<'REPRO'
//
// Runs each round's requests (a group's side by side), then shows the store,
// each beside what the oracle expected. From the checkout:
//   RCS_EXT=target/release/librediscluster_session.so RCS_SEEDS=127.0.0.1:7100 php THIS_FILE

REPRO;
    $text .= '$seeds = ' . var_export(getenv('RCS_SEEDS'), true) . ";\n";
    $text .= '$failover = ' . var_export($sequence['failover'], true) . ";\n";
    $text .= '$ini = ' . model_php_array(array_diff_key(model_ini_of($sequence, [], 'rediscluster'), ['session.save_path' => 1])) . ";\n";
    $text .= "\$prelude = <<<'PHP'\n" . MODEL_PRELUDE . "PHP;\n\$rounds = [];\n";
    foreach ($sequence['rounds'] as $r => $round) {
        if ($r > $failure['round']) break;
        $codes = isset($round['group'])
            ? array_map(fn($p) => model_group_script($round['group'][$p], "r{$r}p$p"), array_keys($round['group']))
            : [model_script($round)];
        $log = $failure['log'][$r] ?? [];
        $nowdoc = fn(?string $s) => $s === null ? 'null' : "<<<'PHP'\n$s\nPHP";
        $text .= "\n// round " . ($r + 1) . (isset($round['group']) ? ': ' . count($codes) . ' requests side by side' : ': one request')
            . (empty($round['outage']) ? '' : ", run with the primary of a frozen (scripts/cluster.sh pause-node FLAVOR BASE_PORT PORT, then\n// resume-node): without, it does not fail the same way") . "\n"
            . '$rounds[] = [' . model_php_array($round['ini']) . ", [\n" . implode(",\n", array_map(fn($code) => $nowdoc(rtrim($code)), $codes)) . "\n],\n"
            . $nowdoc(isset($log['expected']) ? implode("\n", $log['expected']) : null) . ",\n"
            . $nowdoc(isset($log['store']) ? implode("\n", array_map(fn($l, $v) => "$l: $v", array_keys($log['store']), $log['store'])) : null) . "];\n";
    }
    return $text . <<<'REPRO'

$ext = getenv('RCS_EXT') ?: 'target/release/librediscluster_session.so';
$seeds = array_slice(explode(',', getenv('RCS_SEEDS') ?: $seeds), 0, 3);
$ini['session.save_path'] = implode('&', array_map(fn($seed) => "seed[]=$seed", $seeds))
    . ($failover === 'error' ? '&failover=error' : '') . '&prefix=' . urlencode('RCS_REPRO:' . bin2hex(random_bytes(4)) . ':');
$ini['session.save_handler'] = 'rediscluster';
$state = tempnam(sys_get_temp_dir(), 'rcs-repro-');
$ids = [];
foreach (['a', 'b', 'c'] as $label) $ids[$label] = 'm' . bin2hex(random_bytes(8)) . $label;
file_put_contents($state, json_encode(['ids' => $ids]));
// Runs each of $codes after the prelude, side by side, and prints its output.
$run = function (array $round_ini, array $codes) use ($ext, $ini, $prelude, $state): void {
    $children = [];
    // A group's handshakes.
    $sync = "$state-sync";
    @mkdir($sync);
    array_map('unlink', glob("$sync/*"));
    foreach ($codes as $i => $code) {
        file_put_contents($script = "$state-$i.php", "<?php\n$prelude$code");
        $cmd = [PHP_BINARY, '-n', '-d', "extension=$ext"];
        foreach ($round_ini + $ini as $k => $v) array_push($cmd, '-d', "$k=\"$v\"");
        $cmd[] = $script;
        $children[] = [proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['redirect', 1]], $pipes, null, ['RCS_MODEL_STATE' => $state, 'RCS_MODEL_SYNC' => $sync] + getenv()), $pipes[1], $script];
    }
    foreach ($children as [$proc, $out, $script]) {
        echo '    ', str_replace("\n", "\n    ", rtrim(stream_get_contents($out))), "\n    exit ", proc_close($proc), "\n";
        unlink($script);
    }
};
foreach ($rounds as $r => [$round_ini, $codes, $expected, $store]) {
    echo 'round ', $r + 1, ":\n";
    $run($round_ini, $codes);
    if ($expected !== null) echo "  the oracle expected:\n    ", str_replace("\n", "\n    ", $expected), "\n";
    echo "  the store:\n";
    $run(['redis.session.early_refresh' => 0, 'session.use_strict_mode' => 0], [<<<'PHP'
foreach ($state['ids'] as $label => $id) {
    $info = rediscluster_session_lock_info($id);
    session_id($id);
    session_start(['read_and_close' => true]);
    echo "$label: ", $info['data_ttl_ms'] === -2 ? 'no data' : json_encode($_SESSION) . ', ttl ' . round($info['data_ttl_ms'] / 1000)
        . ' s, lifetime ' . json_encode($info['lifetime']), "\n";
}
PHP]);
    if ($store !== null) echo "  the oracle expected:\n    ", str_replace("\n", "\n    ", $store), "\n";
}
array_map('unlink', glob("$state-sync/*"));
@rmdir("$state-sync");
unlink($state);

REPRO;
}
