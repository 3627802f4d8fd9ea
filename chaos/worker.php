<?php
// One chaos worker: locked session cycles until its time is up, alternating
// between a session of its own and one shared by every worker. Prints one JSON
// line: acknowledged increments per session, each successful cycle's end time,
// each session_start() that served the session (read-only ones included), how
// many were read-only (failover=error), the longest session_start(), and
// every failure with its warning.
// Lost writes are counted exactly, not only from the final counter (where a
// write that failed but was stored would hide one that was acknowledged and
// lost): every write also stores w<worker> = a sequence number of this
// worker's. Each locked read checks that the last one it had acknowledged in
// the session is still there; the driver checks the final value against
// those acknowledged after the last read ('unchecked').
// With 'acks' (a directory every worker of the phase can reach), each worker
// publishes there the last write it had acknowledged per session, and each
// read checks that it is not older than what the other workers had
// acknowledged before it began ('stale': read-only reads and locked ones).
// With 'hold' ([min, max] ms), each locked request holds its lock that long
// before it writes, so that the others queue behind it, and reports when it
// held it ('holds': session, session_start() returned, write sent).
//   php -n -d ...session INI... chaos/worker.php JOB_JSON
$job = json_decode($argv[1], true, flags: JSON_THROW_ON_ERROR);
$warnings = [];
set_error_handler(function (int $type, string $message) use (&$warnings) {
    $warnings[] = preg_replace('/ \(path: .*\)$/', '', $message);
    return true;
});

$sessions = [$job['own'], $job['shared']];
$acked = array_fill_keys($sessions, 0);
$done = array_fill_keys($sessions, []);
$served = array_fill_keys($sessions, []);
$read_only = 0;
$longest_start = 0;
$longest_write = 0;
// The previous release (the mixed phase) lacks the function.
$is_read_only = function_exists('rediscluster_session_read_only') ? 'rediscluster_session_read_only' : fn() => false;
$failures = [];
$me = $job['worker'] ?? 0;
$seq = 0;
$unchecked = array_fill_keys($sessions, []);
$lost = array_fill_keys($sessions, 0);
$acks = $job['acks'] ?? null;
$stale = ['read_only' => 0, 'locked' => 0];
$ack_file = fn(string $sid, string $worker) => "$acks/" . md5($sid) . ".$worker";
$hold = $job['hold'] ?? null;
$holds = [];
$wait = $job['start_ns'] - hrtime(true);
if ($wait > 0) usleep(intdiv($wait, 1000));
$end = hrtime(true) + (int)($job['seconds'] * 1e9);
for ($i = 0; hrtime(true) < $end; $i++) {
    $sid = $sessions[$i % 2];
    $warnings = [];
    session_id($sid);
    $acknowledged = [];
    if ($acks) {
        foreach (glob($ack_file($sid, 'w*')) as $file) {
            $worker = substr(strrchr($file, '.'), 1);
            if ($worker !== "w$me") $acknowledged[$worker] = (int)@file_get_contents($file);
        }
    }
    $started_ns = hrtime(true);
    $started = session_start();
    $longest_start = max($longest_start, hrtime(true) - $started_ns);
    if (!$started) {
        $failures[] = [hrtime(true), 'start', $warnings];
        usleep(20000);
        continue;
    }
    $served_ns = hrtime(true);
    $served[$sid][] = $served_ns;
    foreach ($acknowledged as $worker => $their_seq) {
        if (($_SESSION[$worker] ?? 0) < $their_seq) {
            $stale[$is_read_only() ? 'read_only' : 'locked']++;
            break;
        }
    }
    if ($is_read_only()) {
        $read_only++;
    } else {
        $seen = $_SESSION["w$me"] ?? 0;
        $lost[$sid] += count(array_filter($unchecked[$sid], fn($s) => $s > $seen));
        $unchecked[$sid] = [];
    }
    $_SESSION["w$me"] = ++$seq;
    $_SESSION['n'] = ($_SESSION['n'] ?? 0) + 1;
    if ($hold && !$is_read_only()) usleep(random_int(...$hold) * 1000);
    $writing_ns = hrtime(true);
    session_write_close();
    if ($hold) $holds[] = [$sid, $served_ns, $writing_ns];
    $longest_write = max($longest_write, hrtime(true) - $writing_ns);
    if ($warnings) {
        $failures[] = [hrtime(true), 'write', $warnings];
        continue;
    }
    $acked[$sid]++;
    $unchecked[$sid][] = $seq;
    if ($acks) {
        file_put_contents($ack_file($sid, "tmp$me"), (string)$seq);
        rename($ack_file($sid, "tmp$me"), $ack_file($sid, "w$me"));
    }
    $done[$sid][] = hrtime(true);
    usleep(2000);
}
echo json_encode(['acked' => $acked, 'done' => $done, 'served' => $served, 'read_only' => $read_only,
    'longest_start' => $longest_start, 'longest_write' => $longest_write, 'failures' => $failures, 'worker' => $me, 'lost' => $lost,
    'unchecked' => $unchecked, 'stale' => $stale, 'holds' => $holds,
    // The previous release (the mixed phases) breaks no lock: its lease is the lock's TTL.
    'locks_broken' => function_exists('rediscluster_session_stats') ? rediscluster_session_stats()['locks_broken'] ?? null : null]), "\n";
