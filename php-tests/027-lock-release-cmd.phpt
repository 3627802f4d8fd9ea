--TEST--
lock_release_cmd=delex|delifeq: a server that has the command releases with it; one without it (Redis 7 and 8.0, Valkey 8.1; DELEX on Valkey 9.1) answers one unknown-command error per connection and Lua releases from then on; the lock is released either way
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
/** "ERR" error replies so far on all primaries; an unknown command is one. */
function err_replies(): int {
    $count = 0;
    foreach (rcs_primaries() as $addr) {
        preg_match('/errorstat_ERR:count=(\d+)/', Resp::send($addr, ['INFO', 'errorstats']), $m);
        $count += (int)($m[1] ?? 0);
    }
    return $count;
}
foreach (['eval', 'delex', 'delifeq', 'DELEX'] as $cmd) {
    $sid = 'release' . bin2hex(random_bytes(8));
    $errors = err_replies();
    $native = strtolower($cmd) === 'eval' ? null : strtolower($cmd);
    $calls = $native ? rcs_command_calls($native) : 0;
    // read_and_close leaves the release to close(), where the command is used; 3 times in one process.
    echo "$cmd: ", rcs_php("for (\$i = 0; \$i < 3; \$i++) { session_id('$sid'); var_dump(session_start(['read_and_close' => true])); }",
        rcs_locking(['redis.session.lock_release_cmd' => $cmd]));
    // Connecting adds ERR replies of its own on Redis 7.0 (the client's pipelined
    // CLIENT SETINFO), the same for every process: count beyond the eval run's.
    $replies = err_replies() - $errors;
    $baseline ??= $replies;
    $unknown = $replies - $baseline;
    $calls = $native ? rcs_command_calls($native) - $calls : 0;
    // With the command, each of the 3 releases is one call of it; without, one
    // unknown-command reply, then Lua.
    $expected = $native && rcs_server_has($native) ? [0, 3] : [$native ? 1 : 0, 0];
    $as_expected = [$unknown, $calls] === $expected ? 'yes' : "no: $unknown unknown-command replies, $calls calls of $cmd";
    echo "lock left: ", rcs_cmd('EXISTS', rcs_lock_key($sid)), ", released as the server's commands allow: $as_expected\n";
}
?>
--EXPECT--
eval: bool(true)
bool(true)
bool(true)
lock left: 0, released as the server's commands allow: yes
delex: bool(true)
bool(true)
bool(true)
lock left: 0, released as the server's commands allow: yes
delifeq: bool(true)
bool(true)
bool(true)
lock left: 0, released as the server's commands allow: yes
DELEX: bool(true)
bool(true)
bool(true)
lock left: 0, released as the server's commands allow: yes
