--TEST--
lock_release_cmd=delex|delifeq falls back to Lua on servers without them (Redis 7, Valkey 8.1); the lock is released
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
foreach (['eval', 'delex', 'delifeq', 'DELEX'] as $cmd) {
    $sid = 'release' . bin2hex(random_bytes(8));
    // read_and_close leaves the release to close(), where the command is used; twice per process.
    echo "$cmd: ", rcs_php("for (\$i = 0; \$i < 2; \$i++) { session_id('$sid'); var_dump(session_start(['read_and_close' => true])); }",
        rcs_locking(['redis.session.lock_release_cmd' => $cmd]));
    var_dump(rcs_cmd('EXISTS', rcs_lock_key($sid)));
}
?>
--EXPECT--
eval: bool(true)
bool(true)
int(0)
delex: bool(true)
bool(true)
int(0)
delifeq: bool(true)
bool(true)
int(0)
DELEX: bool(true)
bool(true)
int(0)
