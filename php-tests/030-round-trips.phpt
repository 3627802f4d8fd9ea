--TEST--
Round trips per request in a warm worker, counted by the primaries: 2 for a locked request (changed, unchanged or read_and_close), also when writes wait for a replica; 2 unlocked, 1 for an unlocked read_and_close
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
// A warm worker runs 50 requests on one session; the primaries count the socket
// reads (one per round trip). Reading the counters costs one read per primary,
// measured by a pass with nothing in between and taken off.
$code = <<<'PHP'
    $kind = getenv('RCS_KIND');
    $cycle = function () use ($kind) {
        session_id('roundtrips' . md5($kind));
        if ($kind === 'read_and_close') { session_start(['read_and_close' => true]); return; }
        session_start();
        if ($kind === 'changed') $_SESSION['n'] = ($_SESSION['n'] ?? 0) + 1;
        session_write_close();
    };
    $cycle();
    $primaries = rcs_primaries();
    // Replicas' acknowledgements (REPLCONF ACK) are reads on the primaries too,
    // one per WAIT and one a second: not ours.
    $replica_acks = fn() => array_sum(array_map(fn($addr) => preg_match('/^cmdstat_replconf:calls=(\d+)/m',
        Resp::send($addr, ['INFO', 'commandstats']), $m) ? (int)$m[1] : 0, $primaries));
    $counters = fn() => [resp_reads_processed($primaries), $replica_acks()];
    [$before, $acks_before] = $counters();
    [$calibration, $acks_calibration] = $counters();
    for ($i = 0; $i < 50; $i++) $cycle();
    [$after, $acks_after] = $counters();
    $reads = ($after - $calibration) - ($calibration - $before) - ($acks_after - $acks_calibration);
    // A stray once-a-second acknowledgement is rounded away.
    echo getenv('RCS_LABEL'), ': ', round($reads / 50), "\n";
    PHP;
foreach (['1' => 'locked', '0' => 'unlocked'] as $on => $label) {
    foreach (['changed', 'unchanged', 'read_and_close'] as $kind) {
        putenv("RCS_KIND=$kind");
        putenv("RCS_LABEL=$label $kind");
        echo rcs_php($code, ['redis.session.locking_enabled' => $on, 'session.lazy_write' => '1']);
    }
    if ($on) {
        // The read refreshes the TTL; an unchanged session then only releases.
        putenv("RCS_KIND=unchanged");
        putenv("RCS_LABEL=$label unchanged, early_refresh");
        echo rcs_php($code, ['redis.session.locking_enabled' => $on, 'redis.session.early_refresh' => '1']);
    }
    // Waiting for a replica rides in the write's round trip.
    putenv("RCS_KIND=changed");
    putenv("RCS_LABEL=$label changed, write_replicas=1");
    echo rcs_php($code, ['redis.session.locking_enabled' => $on, 'rediscluster_session.write_replicas' => '1']);
}
?>
--EXPECT--
locked changed: 2
locked unchanged: 2
locked read_and_close: 2
locked unchanged, early_refresh: 2
locked changed, write_replicas=1: 2
unlocked changed: 2
unlocked unchanged: 2
unlocked read_and_close: 1
unlocked changed, write_replicas=1: 2
