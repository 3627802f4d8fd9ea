<?php
// One-process session cycles (session_start, change, session_write_close) on
// the local cluster, locked and unlocked in the same run; prints cycles/s and
// Redis commands per cycle counted from INFO commandstats on the primaries
// (commands run inside Lua scripts count too; EVALSHA calls are round trips).
//   RCS_SEEDS=127.0.0.1:7100 php -n -d extension=target/release/librediscluster_session.so bench/cycles.php [CYCLES]
require __DIR__ . '/../php-tests/inc/setup.php';

$cycles = (int)($argv[1] ?? 5000);

function commandstats(): array {
    $total = [];
    foreach (rcs_seeds() as [$host, $port]) {
        if (Resp::send("$host:$port", ['ROLE'])[0] !== 'master') continue;
        foreach (explode("\n", Resp::send("$host:$port", ['INFO', 'commandstats'])) as $line) {
            if (preg_match('/^cmdstat_([^:]+):calls=(\d+)/', $line, $m)) {
                $total[$m[1]] = ($total[$m[1]] ?? 0) + (int)$m[2];
            }
        }
    }
    return $total;
}

function run(string $label, string $locking, int $cycles, bool $change): void {
    rcs_use_session(['redis.session.locking_enabled' => $locking, 'session.lazy_write' => '1']);
    session_start();
    $sid = session_id();
    $_SESSION['n'] = 0;
    session_write_close();
    $before = commandstats();
    $t = hrtime(true);
    for ($i = 0; $i < $cycles; $i++) {
        session_id($sid);
        session_start();
        if ($change) $_SESSION['n']++;
        session_write_close();
    }
    $seconds = (hrtime(true) - $t) / 1e9;
    $after = commandstats();
    $per = [];
    foreach ($after as $cmd => $calls) {
        $per_cycle = round(($calls - ($before[$cmd] ?? 0)) / $cycles, 2);
        if ($cmd !== 'info' && $cmd !== 'role' && $per_cycle > 0) $per[$cmd] = $per_cycle;
    }
    printf("%-26s %8.0f cycles/s  %s\n", $label, $cycles / $seconds, json_encode($per));
}

run('unlocked, changed', '0', $cycles, true);
run('locked, changed', '1', $cycles, true);
run('unlocked, unchanged', '0', $cycles, false);
run('locked, unchanged', '1', $cycles, false);
