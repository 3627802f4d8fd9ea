<?php
// One benchmark process: session cycles with whatever save handler its INI
// (given by bench.php on the command line) sets up. Prints one JSON line.
//   php -n -d ... bench/worker.php MODE JOB_JSON
require __DIR__ . '/../php-tests/inc/resp.php';

[, $mode, $job] = $argv;
$job = json_decode($job, true, flags: JSON_THROW_ON_ERROR);
$failures = 0;

/** One request: open the session, maybe change it, close it. */
function cycle(string $sid, string $kind): void {
    global $failures;
    session_id($sid);
    $ok = $kind === 'read_and_close'
        ? session_start(['read_and_close' => true])
        : session_start();
    if (!$ok) {
        $failures++;
        return;
    }
    if ($kind === 'changed') {
        $_SESSION['n'] = ($_SESSION['n'] ?? 0) + 1;
    }
    session_write_close();
}

/** Socket reads (round trips) and slot-map fetches, summed over $nodes. */
function counters(array $nodes): array {
    $total = ['reads' => 0, 'slot_maps' => 0];
    foreach ($nodes as $addr) {
        $info = Resp::send($addr, ['INFO', 'all']);
        preg_match('/^total_reads_processed:(\d+)/m', $info, $m);
        $total['reads'] += (int)$m[1];
        preg_match_all('/^cmdstat_([^:]+):calls=(\d+)/m', $info, $stats, PREG_SET_ORDER);
        foreach ($stats as [, $command, $calls]) {
            if (str_starts_with($command, 'cluster|slots') || str_starts_with($command, 'cluster|shards')) {
                $total['slot_maps'] += (int)$calls;
            }
        }
    }
    return $total;
}

/** Sleeps until the shared monotonic start time, so parallel workers start together. */
function wait_for_start(array $job): void {
    $wait = ($job['start_ns'] ?? 0) - hrtime(true);
    if ($wait > 0) usleep(intdiv($wait, 1000));
}

function rss_kib(): int {
    preg_match('/^VmRSS:\s+(\d+)/m', file_get_contents('/proc/self/status'), $m);
    return (int)$m[1];
}

$sid = $job['sid'];
$result = [];
switch ($mode) {
    case 'cycles':
        // A warm worker: connection and slot map are in place before measuring.
        for ($i = 0; $i < $job['warm']; $i++) cycle($sid, $job['kind']);
        if ($job['gate'] ?? false) {
            // bench/server-cost.sh zeroes the server's counters between these lines.
            echo "warm\n";
            fgets(STDIN);
        }
        $nodes = $job['nodes'] ?? [];
        $before = counters($nodes);
        $calibration = counters($nodes);
        $t = hrtime(true);
        for ($i = 0; $i < $job['n']; $i++) cycle($sid, $job['kind']);
        $result['seconds'] = (hrtime(true) - $t) / 1e9;
        $after = counters($nodes);
        foreach ($after as $name => $value) {
            // Each delta holds one round of INFO calls; the calibration delta removes it.
            $own = ($after[$name] - $calibration[$name]) - ($calibration[$name] - $before[$name]);
            $result[$name] = $own / $job['n'];
        }
        break;
    case 'contend':
        wait_for_start($job);
        $events = [];
        for ($i = 0; $i < $job['n']; $i++) {
            $call = hrtime(true);
            session_id($sid);
            if (!session_start()) {
                $failures++;
                continue;
            }
            $acquired = hrtime(true);
            $_SESSION['n'] = ($_SESSION['n'] ?? 0) + 1;
            if ($job['hold_us'] ?? 0) usleep($job['hold_us']);
            $release = hrtime(true);
            session_write_close();
            $events[] = [$call, $acquired, $release, hrtime(true)];
        }
        $result['events'] = $events;
        break;
    case 'cold':
        $t = hrtime(true);
        cycle($sid, 'changed');
        $end = hrtime(true);
        $result['seconds'] = ($end - $t) / 1e9;
        // CLOCK_MONOTONIC, for bench/lease-cost.sh's record of the calls made in between.
        $result['start_ns'] = $t;
        $result['end_ns'] = $end;
        $result['pid'] = getmypid();
        break;
    case 'memory':
        foreach ($job['checkpoints'] as $done => $checkpoint) {
            for ($i = $done ? $job['checkpoints'][$done - 1] : 0; $i < $checkpoint; $i++) cycle($sid, 'changed');
            $result['rss_kib'][] = rss_kib();
        }
        break;
    default:
        throw new InvalidArgumentException("unknown mode $mode");
}
$result['failures'] = $failures;
echo json_encode($result), "\n";
