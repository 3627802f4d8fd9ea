--TEST--
A stall of the primary while a holder runs PHP code does not cost the request its connection (issue 48): a renewal the stalled primary does not answer at once is owed on the lent connection, not closed with it, so the write after the stall goes over the request's own connection even when the password was rotated meanwhile (persistent=0 and =1); before, the renewal's timeout closed the request's connection and the write, needing a new one, was refused
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
foreach (['0', '1'] as $persistent) {
    echo "== persistent=$persistent\n";
    $ini = rcs_locking([
        'session.save_path' => rcs_save_path("persistent=$persistent&timeout=2&read_timeout=5&prefix=" . urlencode(rcs_prefix())),
    ]);
    $sid = 'stallkeep' . bin2hex(random_bytes(6));
    $primary = rcs_primary_of(rcs_prefix() . $sid);
    preg_match('/process_id:(\d+)/', Resp::send($primary, ['INFO', 'server']), $m);
    $go = rcs_go_file();
    $holder = rcs_spawn("while (ob_get_level()) ob_end_flush(); session_id('$sid'); session_start(); echo 'locked', PHP_EOL; "
        . rcs_hold_code($go) . " \$_SESSION['holder'] = 1; session_write_close();", $ini);
    echo fgets($holder[1]);
    usleep(500000);
    exec("kill -STOP {$m[1]}");
    usleep(1500000);
    exec("kill -CONT {$m[1]}");
    usleep(400000);
    // This test's own connection stays authenticated, to set it back.
    Resp::send($primary, ['PING']);
    Resp::send($primary, ['CONFIG', 'SET', 'requirepass', bin2hex(random_bytes(8))]);
    register_shutdown_function(fn() => Resp::send($primary, ['CONFIG', 'SET', 'requirepass', '']));
    touch($go);
    echo rcs_wait($holder);
    Resp::send($primary, ['CONFIG', 'SET', 'requirepass', '']);
    echo "stored: ", var_export(rcs_cmd('GET', rcs_prefix() . $sid), true), "\n";
}
?>
--EXPECT--
== persistent=0
locked
stored: 'holder|i:1;'
== persistent=1
locked
stored: 'holder|i:1;'
