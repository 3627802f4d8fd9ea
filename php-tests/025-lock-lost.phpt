--TEST--
A write after the lock was lost is refused and the new holder's data wins; nobody deletes another process's lock; an unchanged session (update_timestamp) warns the same, with or without early_refresh
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
// P1 holds a 1 s lock past its end; P2 takes the lock after it expired and
// holds it. Each holds until told (files, not times: a loaded machine would
// overrun a time), so P1 closes while P2 holds.
$sid = 'locklost' . bin2hex(random_bytes(8));
[$p1_go, $p2_go] = [rcs_go_file(), rcs_go_file()];
$p1 = rcs_spawn(rcs_holder_code($sid, $p1_go, 'first'), rcs_locking_unleased(['redis.session.lock_expire' => '1']));
rcs_wait_until(fn() => rcs_cmd('EXISTS', rcs_lock_key($sid)) === 1);
usleep(300000);
$p2 = rcs_spawn(rcs_holder_code($sid, $p2_go, 'second'), rcs_locking_unleased(['redis.session.lock_expire' => '10', 'redis.session.lock_retries' => '-1']));
// P1's lock lives 1 s, P2's 10 s.
echo "P2 took the expired lock: ", var_export(rcs_wait_until(fn() => rcs_cmd('PTTL', rcs_lock_key($sid)) > 5000), true), "\n";
touch($p1_go);
echo "P1:\n", rcs_wait($p1);
// P1 finished (and closed) while P2 still holds: P2's lock must survive.
var_dump(rcs_cmd('PTTL', rcs_lock_key($sid)) > 5000);
touch($p2_go);
echo "P2:\n", rcs_wait($p2);
var_dump(rcs_cmd('GET', rcs_prefix() . $sid));

// Nobody holds the lock any more when the write comes: refused, nothing stored.
$sid = 'locklost' . bin2hex(random_bytes(8));
echo "alone:\n", rcs_php(rcs_holder_code($sid, 1.5, 'late'), rcs_locking_unleased(['redis.session.lock_expire' => '1']));
var_dump(rcs_cmd('EXISTS', rcs_prefix() . $sid), rcs_keys(rcs_prefix() . '*_LOCK'));

// Unchanged data: PHP calls update_timestamp, which warns the same, with and
// without early_refresh (then the release alone is left, checked against the secret).
foreach (['0', '1'] as $early) {
    $sid = 'locklost' . bin2hex(random_bytes(8));
    rcs_cmd('SET', rcs_prefix() . $sid, 'v|s:4:"kept";', 'EX', '100');
    echo "unchanged, early_refresh=$early:\n", rcs_php("session_id('$sid'); session_start();"
        . " rcs_cmd('DEL', rcs_lock_key('$sid')); session_write_close(); echo \"closed\\n\";",
        rcs_locking_unleased(['redis.session.early_refresh' => $early, 'session.lazy_write' => '1']));
}
?>
--EXPECTF--
P2 took the expired lock: true
P1:
bool(true)

Warning: session_write_close(): Session lock expired in %s on line %d

Warning: session_write_close(): Failed to write session data (rediscluster). Please verify that the current setting of session.save_path is correct (%s) in %s on line %d
bool(true)
bool(true)
P2:
bool(true)
bool(true)
string(15) "v|s:6:"second";"
alone:
bool(true)

Warning: session_write_close(): Session lock expired in %s on line %d

Warning: session_write_close(): Failed to write session data (rediscluster). Please verify that the current setting of session.save_path is correct (%s) in %s on line %d
bool(true)
int(0)
array(0) {
}
unchanged, early_refresh=0:

Warning: session_write_close(): Session lock expired in %s on line %d

Warning: session_write_close(): Failed to write session data (rediscluster). Please verify that the current setting of session.save_path is correct (%s) in %s on line %d
closed
unchanged, early_refresh=1:

Warning: session_write_close(): Session lock expired in %s on line %d

Warning: session_write_close(): Failed to write session data (rediscluster). Please verify that the current setting of session.save_path is correct (%s) in %s on line %d
closed
