--TEST--
rediscluster_session_stats() counts locks, waits, failures, refused writes, releases, connections and errors; phpinfo shows them; a slow wait gets a notice naming only a hash of the session id
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$sid = 'stats' . bin2hex(random_bytes(8));
$busy = 'statsbusy' . bin2hex(random_bytes(8));
// Holders keep $sid until the child below has queued for it, and 0.3 s more,
// and $busy until the child is done (not times: a loaded machine overruns them).
$sid_held = "rcs_wait_until(fn() => rcs_cmd('ZCARD', rcs_lock_key('$sid') . '_FIFO') >= 1, 60); usleep(300000);";
$go = rcs_go_file();
$holders = [rcs_spawn("session_id('$sid'); session_start(); $sid_held session_write_close();", rcs_locking_unleased()),
    rcs_spawn(rcs_holder_code($busy, $go), rcs_locking_unleased())];
rcs_wait_until(fn() => rcs_cmd('EXISTS', rcs_lock_key($sid)) + rcs_cmd('EXISTS', rcs_lock_key($busy)) === 2);
$dead = 'seed[]=127.0.0.1:1&timeout=0.2&read_timeout=0.2';

echo rcs_php(<<<PHP
\$show = function (array \$keys) {
    \$s = rediscluster_session_stats();
    foreach (\$keys as \$k) echo "\$k=", json_encode(\$s[\$k]), " ";
    echo "\\n";
};
// Waits for the holder (0.3 s after it queued): one wait, one notice.
ini_set('rediscluster_session.lock_wait_notice_ms', '200');
ini_set('redis.session.lock_retries', '500');
session_id('$sid');
ob_start();
session_start();
\$notice = ob_get_clean();
echo str_contains(\$notice, 'sha256:' . substr(hash('sha256', '$sid'), 0, 12)) ? "notice names the hash\\n" : "NO HASH: \$notice\\n";
echo str_contains(\$notice, '$sid') ? "NOTICE HAS THE ID\\n" : "notice hides the id\\n";
session_write_close();
\$s = rediscluster_session_stats();
\$wait = \$s['lock_wait_us_total'];
echo \$s['lock_waits'] === 1 && \$wait >= 200000 && \$wait < 5000000 && \$s['lock_wait_us_max'] === \$wait
    ? "one wait of 0.2 to 5 s\\n" : "WAIT: " . json_encode(\$s) . "\\n";
\$show(['locks_acquired', 'releases', 'connects']);

// Ten more requests on the same worker: one connection set all along.
for (\$i = 0; \$i < 10; \$i++) { session_id('$sid'); session_start(); \$_SESSION['i'] = \$i; session_write_close(); }
\$show(['locks_acquired', 'lock_waits', 'releases', 'connects', 'reconnects']);

// A session that stays busy: an acquire failure.
ini_set('redis.session.lock_retries', '2');
ini_set('redis.session.lock_wait_time', '50000');
session_id('$busy');
var_dump(@session_start());
\$show(['acquire_failures']);

// The lock deleted under us: the write is refused.
session_id('$sid');
session_start();
rcs_cmd('DEL', rcs_lock_key('$sid'));
\$_SESSION['lost'] = 1;
@session_write_close();
\$show(['writes_refused_lock_lost']);

// DELEX configured on a server without it: Lua releases, once counted as a fallback.
ini_set('redis.session.lock_release_cmd', 'delex');
session_id('$sid');
session_start();
session_abort();
\$show(['releases', 'release_fallbacks']);

// A cluster that is not there: a new connection attempt and its errors.
ini_set('session.save_path', '$dead');
var_dump(@session_start());
\$s = rediscluster_session_stats();
echo array_sum(\$s['errors']) >= 1 && \$s['errors']['io'] + \$s['errors']['timeout'] >= 1
    ? "errors counted\\n" : "ERRORS: " . json_encode(\$s['errors']) . "\\n";

ob_start();
phpinfo(INFO_MODULES);
preg_match('/stats: locks_acquired => (\\d+)/', ob_get_clean(), \$m);
echo "phpinfo locks_acquired: ", \$m[1] ?? 'MISSING', "\\n";
PHP, rcs_locking_unleased());
touch($go);
foreach ($holders as $holder) rcs_wait($holder);
?>
--EXPECT--
notice names the hash
notice hides the id
one wait of 0.2 to 5 s
locks_acquired=1 releases={"lua":1,"delex":0,"delifeq":0} connects=1 
locks_acquired=11 lock_waits=1 releases={"lua":11,"delex":0,"delifeq":0} connects=1 reconnects=0 
bool(false)
acquire_failures=1 
writes_refused_lock_lost=1 
releases={"lua":12,"delex":0,"delifeq":0} release_fallbacks=1 
bool(false)
errors counted
phpinfo locks_acquired: 13
