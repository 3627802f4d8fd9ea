--TEST--
The lock key exists while a session is held, shares the data key's slot, is released on close; off by default
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$sid = 'lockkey' . bin2hex(random_bytes(8));
$lock = rcs_lock_key($sid);

$child = rcs_spawn(rcs_holder_code($sid, 1.0), rcs_locking());
var_dump(rcs_wait_until(fn() => rcs_cmd('EXISTS', $lock) === 1));
var_dump(rcs_cmd('CLUSTER', 'KEYSLOT', $lock) === rcs_cmd('CLUSTER', 'KEYSLOT', rcs_prefix() . $sid));
var_dump(strlen(rcs_cmd('GET', $lock)));          // a 16-byte random secret, in hex
echo rcs_wait($child);
var_dump(rcs_cmd('EXISTS', $lock));                // released by the final write

// A session read and closed without writing releases too.
$child = rcs_spawn("session_id('$sid'); session_start(['read_and_close' => true]); echo 'read ', \$_SESSION['v'], PHP_EOL; usleep(300000);", rcs_locking());
echo rcs_wait($child);
var_dump(rcs_cmd('EXISTS', $lock));

// Locking is off by default: no lock key while a session is held.
$child = rcs_spawn(rcs_holder_code($sid, 0.5));
var_dump(rcs_wait_until(fn() => rcs_cmd('EXISTS', $lock) === 1, 0.4));
echo rcs_wait($child);
?>
--EXPECT--
bool(true)
bool(true)
int(32)
bool(true)
bool(true)
int(0)
read holder
int(0)
bool(false)
bool(true)
bool(true)
