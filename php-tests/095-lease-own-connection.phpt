--TEST--
A live holder renews its lease over its request's own connection (issue 48): once it holds the lock, no new connection is needed, so a primary that reaches maxclients (persistent=0 and =1), or whose password is rotated, after the request connected does not stop its heartbeat; a waiter queued behind it watches and breaks nothing, and both writes land. Before, the watchdog connected anew at the first renewal, was refused, and the waiter broke the live holder's lock: its write was refused
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
// A 3-s lease: the first renewal a second after the take, time enough for the
// node to be filled before it on a loaded machine (checked: the heartbeat has
// not moved); the waiter waits up to 20 s.
$ini = fn(string $persistent) => rcs_locking([
    'session.save_path' => rcs_save_path("persistent=$persistent&timeout=2&read_timeout=5&prefix=" . urlencode(rcs_prefix())),
    'redis.session.lock_retries' => '1000',
    'redis.session.lock_wait_time' => '20000',
    'rediscluster_session.lock_lease_ms' => '3000',
]);
// Lines the parent waits for go out at once.
$report = 'while (ob_get_level()) ob_end_flush(); function report(string $who, bool $written): void {'
    . ' echo "$who: write ", json_encode($written), ", broke ", rediscluster_session_stats()["locks_broken"], PHP_EOL; }';

/**
 * A holder and a waiter on one session, both connected to its primary; $cut
 * makes new connections to it fail and returns what undoes that. Retried
 * when the first renewal came before the cut (a loaded machine): the
 * scenario would not bite.
 */
function run(string $persistent, callable $cut, callable $ini, string $report): void {
    for ($try = 1; $try <= 5; $try++) {
        $sid = 'leaseown' . bin2hex(random_bytes(6));
        $primary = rcs_primary_of(rcs_prefix() . $sid);
        $beat = fn() => rcs_keys(rcs_lock_key($sid) . '_BEAT_*');
        [$waiter_go, $holder_go] = [rcs_go_file(), rcs_go_file()];
        // The waiter connects first (a read of the session, no lock held
        // after it) and keeps its connection (persistent=1).
        $waiter = rcs_spawn("$report session_id('$sid'); session_start(['read_and_close' => true]); echo 'connected', PHP_EOL; "
            . rcs_hold_code($waiter_go) . " session_start(); \$_SESSION['waiter'] = 1; report('waiter', session_write_close());", $ini('1'));
        fgets($waiter[1]);
        $holder = rcs_spawn("$report session_id('$sid'); session_start(); echo 'locked', PHP_EOL; "
            . rcs_hold_code($holder_go) . " \$_SESSION['holder'] = 1; report('holder', session_write_close());", $ini($persistent));
        fgets($holder[1]);
        $undo = $cut($primary);
        $keys = $beat();
        $bites = count($keys) === 1 && Resp::send($primary, ['GET', $keys[0]]) === '0';
        touch($waiter_go);
        rcs_wait_until(fn() => rcs_cmd('ZCARD', rcs_lock_key($sid) . '_FIFO') === 1);
        // Past the window and its grace with the waiter watching (the waiter's
        // own polls keep it connected).
        if ($bites) usleep(7000000);
        touch($holder_go);
        $out = rcs_wait($holder) . rcs_wait($waiter);
        $undo();
        if ($bites) {
            echo $out, "stored: ", rcs_cmd('GET', rcs_prefix() . $sid), "\n";
            return;
        }
    }
    echo "the first renewal came before the cut in 5 tries\n";
}

foreach (['0', '1'] as $persistent) {
    echo "== the primary at maxclients, persistent=$persistent\n";
    run($persistent, function (string $primary) {
        $maxclients = Resp::send($primary, ['CONFIG', 'GET', 'maxclients'])[1];
        $held = rcs_fill_node($primary);
        return function () use (&$held, $primary, $maxclients) {
            $held = [];
            Resp::send($primary, ['CONFIG', 'SET', 'maxclients', $maxclients]);
        };
    }, $ini, $report);
}

echo "== the primary's password rotated\n";
run('0', function (string $primary) {
    // This test's own connection stays authenticated, to set it back.
    Resp::send($primary, ['PING']);
    Resp::send($primary, ['CONFIG', 'SET', 'requirepass', bin2hex(random_bytes(8))]);
    register_shutdown_function(fn() => Resp::send($primary, ['CONFIG', 'SET', 'requirepass', '']));
    return fn() => Resp::send($primary, ['CONFIG', 'SET', 'requirepass', '']);
}, $ini, $report);
?>
--EXPECT--
== the primary at maxclients, persistent=0
holder: write true, broke 0
waiter: write true, broke 0
stored: holder|i:1;waiter|i:1;
== the primary at maxclients, persistent=1
holder: write true, broke 0
waiter: write true, broke 0
stored: holder|i:1;waiter|i:1;
== the primary's password rotated
holder: write true, broke 0
waiter: write true, broke 0
stored: holder|i:1;waiter|i:1;
