--TEST--
lock_release_cmd=delex|delifeq falls back to Lua on servers without them (Redis 7, Valkey 8.1), trying the command once per connection; the lock is released
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
/** "ERR" error replies so far on all primaries; an unknown command is one. */
function err_replies(): int {
    $count = 0;
    foreach (rcs_seeds() as [$host, $port]) {
        if (Resp::send("$host:$port", ['ROLE'])[0] !== 'master') continue;
        preg_match('/errorstat_ERR:count=(\d+)/', Resp::send("$host:$port", ['INFO', 'errorstats']), $m);
        $count += (int)($m[1] ?? 0);
    }
    return $count;
}
foreach (['eval', 'delex', 'delifeq', 'DELEX'] as $cmd) {
    $sid = 'release' . bin2hex(random_bytes(8));
    $errors = err_replies();
    // read_and_close leaves the release to close(), where the command is used; 3 times in one process.
    echo "$cmd: ", rcs_php("for (\$i = 0; \$i < 3; \$i++) { session_id('$sid'); var_dump(session_start(['read_and_close' => true])); }",
        rcs_locking(['redis.session.lock_release_cmd' => $cmd]));
    // Connecting adds ERR replies of its own on Redis 7.0 (the client's pipelined
    // CLIENT SETINFO), the same for every process: count beyond the eval run's.
    $replies = err_replies() - $errors;
    $baseline ??= $replies;
    echo "lock left: ", rcs_cmd('EXISTS', rcs_lock_key($sid)), ", unknown-command replies: ", $replies - $baseline, "\n";
}
?>
--EXPECT--
eval: bool(true)
bool(true)
bool(true)
lock left: 0, unknown-command replies: 0
delex: bool(true)
bool(true)
bool(true)
lock left: 0, unknown-command replies: 1
delifeq: bool(true)
bool(true)
bool(true)
lock left: 0, unknown-command replies: 1
DELEX: bool(true)
bool(true)
bool(true)
lock left: 0, unknown-command replies: 1
