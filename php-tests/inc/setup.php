<?php
// Shared helpers for the .phpt tests. They run against the real local cluster
// whose seeds are in RCS_SEEDS ("host:port,host:port,..."), and start child PHP
// processes with the extension in RCS_EXT. scripts/test.sh sets both.

error_reporting(E_ALL);
// Session INI cannot change once output has gone out (headers are "sent").
ob_start();

require_once __DIR__ . '/env.php';

function rcs_env(string $name): string {
    return required_env($name, 'run the tests through scripts/test.sh');
}

/** @return list<array{0:string,1:int}> */
function rcs_seeds(): array {
    return array_map(function ($s) {
        [$host, $port] = explode(':', $s);
        return [$host, (int)$port];
    }, explode(',', rcs_env('RCS_SEEDS')));
}

function rcs_save_path(string $extra = ''): string {
    $parts = array_map(fn($s) => "seed[]={$s[0]}:{$s[1]}", array_slice(rcs_seeds(), 0, 3));
    // scripts/test.sh runs the lock tests again as the least-privileged ACL user docs/clusters.md recommends.
    if ((string)getenv('RCS_ACL_USER') !== '') {
        array_push($parts, 'auth[]=' . urlencode(getenv('RCS_ACL_USER')), 'auth[]=' . urlencode(getenv('RCS_ACL_PASS')));
    }
    return implode('&', $parts) . ($extra === '' ? '' : "&$extra");
}

/** A prefix of its own for each test, so tests never see each other's keys. */
function rcs_prefix(): string {
    static $prefix;
    return $prefix ??= getenv('RCS_PREFIX') ?: 'RCS_TEST:' . bin2hex(random_bytes(4)) . ':';
}

/** INI for a CLI session that sends no headers. */
function rcs_session_ini(array $extra = []): array {
    $ini = $extra + [
        'session.save_handler' => 'rediscluster',
        'session.save_path' => rcs_save_path('prefix=' . urlencode(rcs_prefix())),
        'session.use_cookies' => '0',
        'session.cache_limiter' => '',
        'session.use_strict_mode' => '0',
    ];
    // PHP 8.4 deprecates changing it; without cookies it has nothing to do.
    if (PHP_VERSION_ID < 80400) {
        $ini += ['session.use_only_cookies' => '0'];
    }
    return $ini;
}

function rcs_use_session(array $extra = []): void {
    foreach (rcs_session_ini($extra) as $k => $v) {
        ini_set($k, (string)$v);
    }
}

require __DIR__ . '/resp.php';

/** A command on the cluster, following MOVED to the key's primary. */
function rcs_cmd(string ...$args) {
    [$host, $port] = rcs_seeds()[0];
    $addr = "$host:$port";
    for ($i = 0; $i < 5; $i++) {
        $reply = Resp::send($addr, $args);
        if ($reply instanceof RespError && str_starts_with($reply->message, 'MOVED ')) {
            $addr = explode(' ', $reply->message)[2];
            continue;
        }
        return $reply;
    }
    throw new RuntimeException('too many redirects');
}

/** Keys matching $pattern on every primary of the cluster. */
function rcs_keys(string $pattern): array {
    $keys = [];
    foreach (rcs_primaries() as $addr) {
        $keys = array_merge($keys, Resp::send($addr, ['KEYS', $pattern]));
    }
    sort($keys);
    return $keys;
}

/** "host:port" of the primary that owns $key's slot. */
function rcs_primary_of(string $key): string {
    $slot = rcs_cmd('CLUSTER', 'KEYSLOT', $key);
    foreach (rcs_cmd('CLUSTER', 'SLOTS') as $range) {
        if ($slot >= $range[0] && $slot <= $range[1]) return "{$range[2][0]}:{$range[2][1]}";
    }
    throw new RuntimeException("no primary for slot $slot");
}

/** "host:port" of every primary of the cluster. */
function rcs_primaries(): array {
    $addrs = array_map(fn($seed) => "{$seed[0]}:{$seed[1]}", rcs_seeds());
    return array_values(array_filter($addrs, fn($addr) => Resp::send($addr, ['ROLE'])[0] === 'master'));
}

/** Whether the cluster's servers have $command: COMMAND INFO answers nil for one they lack. */
function rcs_server_has(string $command): bool {
    return rcs_cmd('COMMAND', 'INFO', $command)[0] !== null;
}

/** Calls of $command (lower case, as INFO commandstats names it) so far on every primary. */
function rcs_command_calls(string $command): int {
    $calls = 0;
    foreach (rcs_primaries() as $addr) {
        if (preg_match('/^cmdstat_' . preg_quote($command, '/') . ':calls=(\d+)/m', Resp::send($addr, ['INFO', 'commandstats']), $m)) {
            $calls += (int)$m[1];
        }
    }
    return $calls;
}

/** CLUSTER SLOTS calls so far on every seed: one that is a replica (after a failover test) answers them too. */
function rcs_slot_map_fetches(): int {
    $calls = 0;
    foreach (rcs_seeds() as [$host, $port]) {
        if (preg_match('/^cmdstat_cluster\|slots:calls=(\d+)/m', Resp::send("$host:$port", ['INFO', 'commandstats']), $m)) {
            $calls += (int)$m[1];
        }
    }
    return $calls;
}

// ---- Child PHP processes ----

/**
 * The command line of a child PHP with the given INI and extensions, in load
 * order; by default just this extension. It reads no php.ini, or, given
 * $ini_dir, the php.ini there (and rcs_spawn() its conf.d).
 */
function rcs_php_command(array $ini, ?array $load = null, ?string $ini_dir = null): array {
    $cmd = [PHP_BINARY, ...($ini_dir === null ? ['-n'] : ['-c', "$ini_dir/php.ini"])];
    foreach ($load ?? [rcs_ext()] as $ext) {
        array_push($cmd, '-d', "extension=$ext");
    }
    foreach ($ini as $k => $v) {
        array_push($cmd, '-d', "$k=\"$v\"");   // quoted: save paths hold INI syntax like & and []
    }
    return $cmd;
}

function rcs_ext(): string {
    return rcs_env('RCS_EXT');
}

/** phpredis's modules in load order, as scripts/php-tests.sh found them for this PHP. */
define('PHPREDIS', explode(',', getenv('RCS_PHPREDIS') === false ? 'igbinary,redis' : getenv('RCS_PHPREDIS')));

/**
 * Starts a child PHP running $code in the background, with the helpers loaded
 * and this test's session INI (and $ini_dir's php.ini and conf.d, if given),
 * under the command $wrap if given (one that ends in `exec "$@"`).
 * Returns what rcs_wait() takes.
 */
function rcs_spawn(string $code, array $ini = [], ?array $load = null, ?string $ini_dir = null, array $wrap = []): array {
    $script = tempnam(sys_get_temp_dir(), "rcs");
    unlink($script);
    $script .= ".php";
    // A declare() must stay the script's first statement.
    $declare = preg_match('/^declare\([^)]*\);/', $code, $m) ? $m[0] : '';
    $code = substr($code, strlen($declare));
    file_put_contents($script, "<?php $declare require " . var_export(__FILE__, true) . ";\n" . $code);
    $cmd = [...$wrap, ...rcs_php_command(rcs_session_ini($ini), $load, $ini_dir), $script];
    $env = ['RCS_PREFIX' => rcs_prefix(), ...($ini_dir === null ? [] : ['PHP_INI_SCAN_DIR' => "$ini_dir/conf.d"])] + getenv();
    $proc = proc_open($cmd, [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['redirect', 1]], $pipes, null, $env);
    // Its standard input, for a child that takes orders line by line.
    return [$proc, $pipes[1], $script, $pipes[0]];
}

/** Waits for a child from rcs_spawn and returns its output. */
function rcs_wait(array $child): string {
    [$proc, $out, $script, $in] = $child;
    fclose($in);
    $output = stream_get_contents($out);
    fclose($out);
    proc_close($proc);
    @unlink($script);
    return $output;
}

/** Runs code in a child PHP process and returns its output. */
function rcs_php(string $code, array $ini = [], ?array $load = null): string {
    return rcs_wait(rcs_spawn($code, $ini, $load));
}

/**
 * Starts PHP's built-in web server (`php -S`) on $dir with the extension and
 * $ini; returns [process, port]. A port below the kernel's ephemeral range,
 * so no outgoing connection holds it; one another test's server holds makes
 * this one exit, and the next port is tried: a port that answers is ours.
 */
function rcs_serve(string $dir, array $ini): array {
    $first_ephemeral = (int)explode("\t", file_get_contents('/proc/sys/net/ipv4/ip_local_port_range'))[0];
    for ($try = 0; $try < 20; $try++) {
        $port = random_int(20000, $first_ephemeral - 1);
        $cmd = rcs_php_command(rcs_session_ini($ini));
        array_push($cmd, '-S', "127.0.0.1:$port", '-t', $dir);
        $proc = proc_open($cmd, [1 => ['file', '/dev/null', 'w'], 2 => ['file', '/dev/null', 'w']], $pipes);
        rcs_wait_until(fn() => !proc_get_status($proc)['running'] || @fsockopen('127.0.0.1', $port) !== false);
        if (proc_get_status($proc)['running']) return [$proc, $port];
        proc_close($proc);
    }
    throw new RuntimeException('no free port for php -S');
}

/** The TCP connections process $pid holds to the cluster's nodes, as its own sockets show them. */
function rcs_connections_of(int $pid): int {
    $sockets = function (int $pid): array {
        $inodes = [];
        foreach (glob("/proc/$pid/fd/*") as $fd) {
            if (preg_match('/^socket:\[(\d+)\]$/', (string)@readlink($fd), $m)) $inodes[$m[1]] = true;
        }
        return $inodes;
    };
    // A child inherits this test's own connections (rcs_cmd's): not the extension's.
    $inodes = array_diff_key($sockets($pid), $sockets(getmypid()));
    $node_ports = array_map(fn($seed) => sprintf('%04X', $seed[1]), rcs_seeds());
    $count = 0;
    foreach (['/proc/net/tcp', '/proc/net/tcp6'] as $table) {
        foreach (array_slice(file($table, FILE_IGNORE_NEW_LINES) ?: [], 1) as $line) {
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            $fields = preg_split('/\s+/', trim($line));
            if (isset($inodes[$fields[9]]) && in_array(explode(':', $fields[2])[1], $node_ports, true)) $count++;
        }
    }
    return $count;
}

// ---- Locking helpers ----

/** INI that turns locking on, with extra settings. */
function rcs_locking(array $extra = []): array {
    return $extra + ['redis.session.locking_enabled' => '1'];
}

/** Locking without a lease: the lock lives lock_expire, for the tests of that TTL. */
function rcs_locking_unleased(array $extra = []): array {
    return rcs_locking($extra + ['rediscluster_session.lock_lease_ms' => '0']);
}

function rcs_lock_key(string $sid): string {
    return '{' . rcs_prefix() . $sid . '}_LOCK';
}

/**
 * The lock keys of $sid still there, less `_DONE`: the log of saves, each one's proof that it
 * landed, which lives for the lock's TTL by design.
 */
function rcs_lock_keys_left(string $sid): array {
    return array_values(array_filter(rcs_keys(rcs_lock_key($sid) . '*'), fn($key) => !str_ends_with($key, '_DONE')));
}

/**
 * Whether every node says the cluster is ok, every replica's link to its primary is up and every
 * primary counts its replicas online, as scripts/cluster.sh waits for: WAIT (write_replicas) counts
 * only those, and a replica that just synced (a restarted primary) has its link up a moment before
 * its primary has its first ACK.
 */
function rcs_cluster_settled(): bool {
    foreach (rcs_seeds() as [$host, $port]) {
        try {
            if (!str_contains(Resp::send("$host:$port", ['CLUSTER', 'INFO']), 'cluster_state:ok')) return false;
            $info = Resp::send("$host:$port", ['INFO', 'replication']);
            if (str_contains($info, 'role:slave') && !str_contains($info, 'master_link_status:up')) return false;
            if (str_contains($info, 'role:master') && (!preg_match_all('/^slave\d+:.*\bstate=(\w+)/m', $info, $states)
                || array_diff($states[1], ['online']) !== [])) return false;
        } catch (Throwable) {
            Resp::forget("$host:$port");
            return false;
        }
    }
    return true;
}

/**
 * Polls $condition every 10 ms for up to $seconds; returns whether it held.
 * For what another process does on its own schedule (a lock taken, a waiter
 * queued, a log line copied): the bound only costs time when it never comes,
 * so it is generous for two shared, busy cores.
 */
function rcs_wait_until(callable $condition, float $seconds = 10.0): bool {
    $deadline = microtime(true) + $seconds;
    do {
        if ($condition()) return true;
        usleep(10000);
    } while (microtime(true) < $deadline);
    return false;
}

/**
 * Child code that opens session $sid, holds it, sets $value and writes. It
 * holds for $hold seconds, or, given a file of rcs_go_file(), until the parent
 * creates it: a hold that must outlast the parent's next steps cannot be a
 * time, which a loaded machine overruns.
 */
function rcs_holder_code(string $sid, float|string $hold, string $value = 'holder'): string {
    return "session_id('$sid'); var_dump(session_start()); " . rcs_hold_code($hold)
        . " \$_SESSION['v'] = '$value'; var_dump(session_write_close());";
}

/** Child code that waits $hold seconds, or until the file $hold exists (60 s at most: no child outlives a failed test for long). */
function rcs_hold_code(float|string $hold): string {
    if (is_string($hold)) {
        return '$rcs_until = microtime(true) + 60; while (!file_exists(' . var_export($hold, true) . ') && microtime(true) < $rcs_until) usleep(5000);';
    }
    return 'usleep(' . (int)($hold * 1e6) . ');';
}

/** A path, not yet there, for a child of rcs_hold_code() to wait for: touch() it to let the child go on. Removed at exit. */
function rcs_go_file(): string {
    $file = sys_get_temp_dir() . '/rcs-go-' . getmypid() . '-' . bin2hex(random_bytes(6));
    // (And the holder's pid the served app writes beside it.)
    register_shutdown_function(fn() => array_map(fn($path) => @unlink($path), [$file, "$file.pid"]));
    return $file;
}

// ---- A node at maxclients ----

/**
 * Fills the node at $addr: its maxclients lowered to a few above the clients it has, then
 * connections opened until it refuses one ("max number of clients reached"), as a fleet of
 * workers would. Returns them: closing them frees the node. Its maxclients is set back at exit.
 */
function rcs_fill_node(string $addr): array {
    $maxclients = Resp::send($addr, ['CONFIG', 'GET', 'maxclients'])[1];
    register_shutdown_function(fn() => Resp::send($addr, ['CONFIG', 'SET', 'maxclients', $maxclients]));
    // Clients, replicas' links and the cluster bus all count against maxclients.
    $info = Resp::send($addr, ['INFO', 'clients']) . Resp::send($addr, ['INFO', 'replication']);
    preg_match_all('/^(?:connected_clients|cluster_connections|connected_slaves):(\d+)/m', $info, $m);
    Resp::send($addr, ['CONFIG', 'SET', 'maxclients', (string)(array_sum($m[1]) + 5)]);
    $held = [];
    for ($i = 0; $i < 100; $i++) {
        $socket = stream_socket_client("tcp://$addr", $errno, $errstr, 2);
        stream_set_timeout($socket, 5);
        fwrite($socket, "*1\r\n\$4\r\nPING\r\n");
        $reply = (string)fgets($socket);
        if (str_starts_with($reply, '-ERR max number of clients') && $held !== []) return $held;
        if ($reply !== "+PONG\r\n") throw new RuntimeException("$addr answered $reply");
        $held[] = $socket;
    }
    throw new RuntimeException("$addr took 100 connections more than maxclients allows");
}

/** Closes every client connection of the node at $addr but this test's own and MONITORs (scripts/test.sh watches the primaries). */
function rcs_kill_clients(string $addr): void {
    foreach (explode("\n", Resp::send($addr, ['CLIENT', 'LIST', 'TYPE', 'normal'])) as $line) {
        if (!str_contains($line, 'cmd=monitor') && !str_contains($line, 'cmd=client|list') && preg_match('/^id=(\d+) /', $line, $m)) {
            Resp::send($addr, ['CLIENT', 'KILL', 'ID', $m[1]]);
        }
    }
}
