--TEST--
Locking: a waiter behind a dead waiter, handed the lock and taking it by its next attempt, is never joined by a second holder (issue 18, defect 1)
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
// Waits in 1 s pieces; the lock would outlive every hold.
$ini = rcs_locking(['redis.session.lock_expire' => '20', 'redis.session.lock_wait_time' => '1000000',
    'redis.session.lock_retries' => '20']);
$increment = fn(string $sid, float $hold) => rcs_spawn("session_id('$sid');"
    . " if (!session_start()) { echo \"start failed\\n\"; exit; }"
    . " usleep(" . (int)($hold * 1e6) . "); \$_SESSION['n'] = (\$_SESSION['n'] ?? 0) + 1;"
    . " session_write_close(); echo \"wrote\\n\";", $ini);
$sid = 'twoholders' . bin2hex(random_bytes(8));
// H holds 4.7 s. W0 queues, then W1 (which holds 3 s); W0 dies in the queue,
// so H hands the lock past it to W1, which is blocked on W0's list and finds
// the lock its own at its next attempt. W2, queued behind, must not take it.
$h = $increment($sid, 4.7);
rcs_wait_until(fn() => rcs_cmd('EXISTS', rcs_lock_key($sid)) === 1);
usleep(200000);
$w0 = $increment($sid, 0);
usleep(200000);
$w1 = $increment($sid, 3.0);
usleep(600000);
proc_terminate($w0[0], 9);
rcs_wait($w0);
usleep(300000);
$w2 = $increment($sid, 0);
$outputs = array_map('rcs_wait', [$h, $w1, $w2]);
foreach ($outputs as $output) echo $output;
$data = rcs_cmd('GET', rcs_prefix() . $sid);
echo "n = ", unserialize(substr($data, strlen('n|'))), "\n";
?>
--EXPECT--
wrote
wrote
wrote
n = 3
