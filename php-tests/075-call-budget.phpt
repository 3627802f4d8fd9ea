--TEST--
One time budget per PHP call, shared by every hook it runs: with timeout=1&read_timeout=1 (a 2 s budget) and the session's primary frozen (SIGSTOP), a locked session_write_close() (write, then the close's release), a session_regenerate_id() (the old id's write, then its close) and the request's final write (write, then close at the request's end) each fail within the budget and the release's grace (under 3.2 s; two budgets took 4 s), a session_create_id() in strict mode long after session_start() checks its id within a budget of its own, without a warning, and the application's own time between a call's hooks (a slow SessionHandler subclass) is not spent from it
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$run = bin2hex(random_bytes(6));
$ini = rcs_locking(['session.save_path' => rcs_save_path('timeout=1&read_timeout=1&prefix=' . urlencode(rcs_prefix()))]);
// Each warning without its save_path.
$warnings = 'set_error_handler(function ($t, $m) { echo "warning: ", preg_replace("/\\((path: )?seed\\[\\][^)]*\\)/", "(...)", $m), "\n"; return true; });';

echo "== session_create_id() after the start's budget ran out, strict mode\n";
echo rcs_php(<<<PHP
$warnings
session_id('late$run');
session_start();
// Past timeout + read_timeout: session_start()'s budget is long spent.
usleep(2300000);
\$exists = rcs_command_calls('exists');
\$id = session_create_id();
echo 'an id: ', json_encode(is_string(\$id) && \$id !== ''), "\\n";
// create_sid's EXISTS and PHP's validate_sid's, each sent, none cut short.
echo 'its id was checked: ', json_encode(rcs_command_calls('exists') - \$exists >= 2), "\\n";
session_write_close();
PHP, $ini + ['session.use_strict_mode' => '1']);

echo "== the application's time between a call's hooks is not the cluster's\n";
// A SessionHandler subclass whose write does slow work of its own: the new
// id's hooks in session_regenerate_id() still have the budget.
echo rcs_php(<<<PHP
$warnings
class Audited extends SessionHandler {
    public function write(\$id, \$data): bool { \$ok = parent::write(\$id, \$data); usleep(2100000); return \$ok; }
}
session_set_save_handler(new Audited(), true);
session_id('audited$run');
session_start();
\$_SESSION['n'] = 1;
echo 'regenerated: ', json_encode(session_regenerate_id(false)), ', the data kept: ', json_encode(\$_SESSION), "\n";
session_write_close();
PHP, $ini);

// A child that takes the session's lock, waits for the parent to freeze the
// session's primary, then runs $call, or ends for the request's final write.
// It writes to its standard error, unbuffered: output would count as headers
// sent, and session_regenerate_id() refuses to run after them. The parent
// times it from its go to the last warning, the release's: the watchdog may
// take a moment more to stop on the frozen node.
$frozen = function (string $label, string $sid, string $call) use ($ini) {
    echo "== $label\n";
    preg_match('/process_id:(\d+)/', Resp::send(rcs_primary_of(rcs_prefix() . $sid), ['INFO', 'server']), $m);
    $pid = (int)$m[1];
    $child = rcs_spawn(<<<PHP
        \$say = fn(string \$line) => fwrite(STDERR, "\$line\\n");
        set_error_handler(function (\$t, \$m) use (\$say) { \$say('warning: ' . preg_replace('/\\((path: )?seed\\[\\][^)]*\\)/', '(...)', \$m)); return true; });
        session_id('$sid');
        session_start();
        \$_SESSION['n'] = 1;
        \$say('locked');
        fgets(STDIN);
        $call
        PHP, $ini);
    echo fgets($child[1]);
    exec("kill -STOP $pid");
    try {
        $out = '';
        $t = microtime(true);
        fwrite($child[3], "go\n");
        while (($line = fgets($child[1])) !== false) {
            $out .= $line;
            if (str_starts_with($line, 'warning: ')) $elapsed = microtime(true) - $t;
        }
    } finally {
        exec("kill -CONT $pid");
    }
    echo $out, rcs_wait($child);
    echo 'past most of the budget: ', json_encode($elapsed > 1.7), ', within the budget and the grace: ', json_encode($elapsed < 3.2), ' (', round($elapsed, 2), " s)\n";
};
$frozen('session_write_close()', "close$run", "\$say('returned: ' . json_encode(session_write_close()));");
$frozen('session_regenerate_id()', "regen$run", "\$say('returned: ' . json_encode(session_regenerate_id()));");
$frozen("the request's final write", "final$run", '');
?>
--EXPECTF--
== session_create_id() after the start's budget ran out, strict mode
an id: true
its id was checked: true
== the application's time between a call's hooks is not the cluster's
regenerated: true, the data kept: {"n":1}
== session_write_close()
locked
warning: session_write_close(): Error communicating with the Redis Cluster: the node did not answer in time
warning: session_write_close(): Failed to write session data (rediscluster). Please verify that the current setting of session.save_path is correct (...)
warning: session_write_close(): Error communicating with the Redis Cluster: the node did not answer in time
returned: true
past most of the budget: true, within the budget and the grace: true (%f s)
== session_regenerate_id()
locked
warning: session_regenerate_id(): Error communicating with the Redis Cluster: the node did not answer in time
warning: session_regenerate_id(): Error communicating with the Redis Cluster: the node did not answer in time
warning: session_regenerate_id(): Session write failed. ID: rediscluster (...)
returned: false
past most of the budget: true, within the budget and the grace: true (%f s)
== the request's final write
locked
warning: PHP Request Shutdown: Error communicating with the Redis Cluster: the node did not answer in time
warning: PHP Request Shutdown: Failed to write session data (rediscluster). Please verify that the current setting of session.save_path is correct (...)
warning: PHP Request Shutdown: Error communicating with the Redis Cluster: the node did not answer in time
past most of the budget: true, within the budget and the grace: true (%f s)
