<?php
// One process of the lease benchmarks (bench/lease-soak.sh, bench/lease-death.sh);
// its save handler comes from the INI on its command line. Prints one JSON line.
//   php -n -d ... bench/lease.php soak SID DEADLINE HOLD_S   locked requests until DEADLINE (unix time)
//   php -n -d ... bench/lease.php hold SID HOLD_S            one request; prints "locked" once it holds the lock
//   php -n -d ... bench/lease.php next SID                   one request; prints when session_start() returned
//   php -n -d ... bench/lease.php wait SID                   one request that waits its turn and saves; its wait and counters
//   php -n -d ... bench/lease.php read SID                   the session's counter
//   php -n bench/lease.php soak-summary DIR                  one line from DIR/<sid>.<k>.json and DIR/<sid>.read.json
$mode = $argv[1];
if ($mode !== 'soak-summary') session_id($argv[2]);
$messages = [];
set_error_handler(function (int $no, string $text) use (&$messages) { $messages[] = $text; return true; });

/** This extension's counters, flattened and summed by the caller (none for other handlers). */
function stats(): array {
    if (!function_exists('rediscluster_session_stats')) return [];
    $flat = [];
    foreach (rediscluster_session_stats() as $name => $value) {
        if (is_int($value)) $flat[$name] = $value;
        elseif (is_array($value)) foreach ($value as $k => $v) if (is_int($v)) $flat["$name.$k"] = $v;
    }
    return $flat;
}

switch ($mode) {
    case 'soak':
        [, , , $deadline, $hold] = $argv;
        $r = ['requests' => 0, 'ok' => 0, 'refused' => 0, 'start_failed' => 0, 'late' => 0, 'messages' => []];
        while (microtime(true) < $deadline) {
            $messages = [];
            if (!session_start()) {
                // Waited ~60 s for the lock in vain: a queue that never moved.
                $r['start_failed']++;
                $r['messages'] = array_merge($r['messages'], $messages);
                sleep(1);
                continue;
            }
            if (microtime(true) >= $deadline) {
                // Took the lock after the end: let go unchanged, so the run ends on time.
                $r['late']++;
                session_abort();
                break;
            }
            $start_messages = $messages;
            $messages = [];
            $_SESSION['n'] = ($_SESSION['n'] ?? 0) + 1;
            sleep((int)$hold);
            $ok = session_write_close();
            $r['requests']++;
            // A refused write reports false, or only a warning (PHP 8.2 returns true after some).
            $refused = !$ok || preg_grep('/Session lock expired|Failed to write/', $messages);
            $refused ? $r['refused']++ : $r['ok']++;
            $r['messages'] = array_merge($r['messages'], $start_messages, $messages);
        }
        echo json_encode($r + ['stats' => stats()]), "\n";
        break;
    case 'hold':
        session_start();
        echo "locked\n";
        fflush(STDOUT);
        sleep((int)$argv[3]);
        $released_at = microtime(true);
        session_write_close();
        echo json_encode(['messages' => $messages, 'stats' => stats(), 'released_at' => $released_at]), "\n";
        break;
    case 'next':
        $ok = session_start();
        echo json_encode(['at' => microtime(true), 'ok' => $ok, 'messages' => $messages]), "\n";
        session_write_close();
        break;
    case 'wait':
        $t = microtime(true);
        $ok = session_start();
        $at = microtime(true);
        $waited = $at - $t;
        $saved = false;
        if ($ok) {
            $_SESSION['w'] = ($_SESSION['w'] ?? 0) + 1;
            $saved = session_write_close() && !preg_grep('/Session lock expired|Failed to write/', $messages);
        }
        echo json_encode(['ok' => $ok, 'saved' => $saved, 'at' => $at, 'waited' => $waited, 'messages' => $messages,
            'stats' => stats()]), "\n";
        break;
    case 'read':
        session_start(['read_and_close' => true]);
        echo json_encode(['n' => $_SESSION['n'] ?? 0, 'messages' => $messages]), "\n";
        break;
    case 'soak-summary':
        $sum = ['requests' => 0, 'ok' => 0, 'refused' => 0, 'start_failed' => 0, 'late' => 0];
        $stats = [];
        $lost = 0;
        $messages = [];
        foreach (glob("$argv[2]/*.read.json") as $read) {
            $ok = 0;
            foreach (glob(str_replace('.read.json', '.*[0-9].json', $read)) as $file) {
                $r = json_decode(file_get_contents($file), true, flags: JSON_THROW_ON_ERROR);
                foreach ($sum as $k => $_) $sum[$k] += $r[$k];
                foreach ($r['stats'] as $k => $v) $stats[$k] = ($stats[$k] ?? 0) + $v;
                foreach ($r['messages'] as $m) $messages[$m] = ($messages[$m] ?? 0) + 1;
                $ok += $r['ok'];
            }
            // Every write that reported success must be in the counter, and nothing else.
            $lost += abs($ok - json_decode(file_get_contents($read), true)['n']);
        }
        printf("requests %d, refused writes %d, lost updates %d, lock waits given up %d, lease renewals %d, " .
            "lease_renewal_failures %d, locks_lost_to_expiry %d\n", $sum['requests'], $sum['refused'], $lost,
            $sum['start_failed'], $stats['lease_renewals'] ?? 0, $stats['lease_renewal_failures'] ?? 0,
            $stats['locks_lost_to_expiry'] ?? 0);
        file_put_contents("$argv[2]/stats.json", json_encode(['sum' => $sum, 'stats' => $stats], JSON_PRETTY_PRINT));
        foreach ($messages as $m => $n) fwrite(STDERR, "  {$n}x $m\n");
        break;
}
