--TEST--
use_strict_mode: an unknown id is replaced by a new one, and no key is created for it or left behind
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
// PHP 8.4 deprecates choosing the id's length and alphabet: its ids are 32
// characters of 4 bits; before 8.4 the test asks for 40 of 6 bits.
$sid_ini = PHP_VERSION_ID < 80400 ? ['session.sid_length' => 40, 'session.sid_bits_per_character' => 6] : [];
rcs_use_session(['session.use_strict_mode' => 1] + $sid_ini);

session_id('attackerchosen0123456789');
var_dump(session_start());
$sid = session_id();
var_dump($sid !== 'attackerchosen0123456789', strlen($sid) === ($sid_ini ? 40 : 32));
var_dump(rcs_keys(rcs_prefix() . '*'));   // nothing stored before the first write
$_SESSION['x'] = 1;
session_write_close();

// A known id is accepted.
session_id($sid);
session_start();
var_dump(session_id() === $sid, $_SESSION);
session_write_close();

// Regenerating under strict mode leaves exactly the new session, no orphans.
session_id($sid);
session_start();
session_regenerate_id(true);
$new = session_id();
session_write_close();
var_dump(rcs_keys(rcs_prefix() . '*') === [rcs_prefix() . $new]);
var_dump(rcs_keys(rcs_prefix() . 'attacker*'));
?>
--EXPECT--
bool(true)
bool(true)
bool(true)
array(0) {
}
bool(true)
array(1) {
  ["x"]=>
  int(1)
}
bool(true)
array(0) {
}
