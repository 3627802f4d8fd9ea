--TEST--
A holder that took its lock by script (its worker waited last time) keeps the right to write for its lock's whole TTL, though the last writer's proof it was fenced with would have expired before: its write lands, with no warning
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$run = bin2hex(random_bytes(6));
[$z, $s] = ["fenceZ$run", "fenceS$run"];
$ini = rcs_locking(['redis.session.lock_expire' => '3', 'redis.session.lock_wait_time' => '20000',
    'redis.session.lock_retries' => '-1', 'session.lazy_write' => '1']);
// H holds Z for 1 s.
$h = rcs_spawn(rcs_holder_code($z, 1.0), $ini);
rcs_wait_until(fn() => rcs_cmd('EXISTS', rcs_lock_key($z)) == 1) or die("H never took Z\n");
// W waits for Z (its worker now queues by script), then takes S 1.5 s later,
// works 2 s and writes: past the 3 s that X's proof on S lives.
$w = rcs_spawn("set_error_handler(function (\$t, \$m) { echo 'W: warning: ', \$m, \"\\n\"; return true; });
    session_id('$z'); session_start(); session_write_close();
    usleep(1500000);
    session_id('$s'); session_start(); usleep(2000000); \$_SESSION['w'] = 1;
    echo 'W: write_close ', json_encode(session_write_close()), \"\\n\";", $ini);
// X writes S while W waits for Z.
echo rcs_php("session_id('$s'); session_start(); \$_SESSION['x'] = 1; echo 'X: write_close ', json_encode(session_write_close()), \"\\n\";", $ini);
echo rcs_wait($w);
rcs_wait($h);
echo "stored: ", rcs_cmd('GET', rcs_prefix() . $s), "\n";
rcs_cmd('DEL', rcs_prefix() . $s, rcs_prefix() . $z);
?>
--EXPECT--
X: write_close true
W: write_close true
stored: x|i:1;w|i:1;
