--TEST--
pcntl_fork() while the session is locked: the parent keeps the lock and its write lands whatever the child does; the child's own change is refused with a warning (the lock is the parent's), it never releases the parent's lock; unlocked, both write as PHP's files handler does
--SKIPIF--
<?php if (!function_exists('pcntl_fork')) die('skip pcntl not available'); ?>
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$run = bin2hex(random_bytes(6));
// The session holds n=1. The child exits (its session is flushed at its end),
// then the parent changes the session and closes it.
$code = fn(string $sid, string $child) => <<<PHP
set_error_handler(function (\$t, \$m) { echo getmypid() === \$GLOBALS['parent'] ? 'parent' : 'child', ": warning: ", preg_replace('/^([a-z_]+\\(\\)|PHP Request Shutdown): /', '', \$m), "\\n"; return true; });
\$parent = getmypid();
session_id('$sid');
session_start();
\$pid = pcntl_fork();
if (\$pid === 0) { $child exit(0); }
pcntl_waitpid(\$pid, \$status);
\$_SESSION['parent'] = 1;
echo 'parent: write_close ', json_encode(session_write_close()), "\\n";
PHP;
$cases = [
    'the child changes nothing' => '',
    'the child changes the session' => "\$_SESSION['child'] = 1;",
    'the child destroys the session' => 'session_destroy();',
];
foreach ([true, false] as $locked) {
    echo $locked ? "== locked\n" : "== unlocked\n";
    foreach ($cases as $case => $child) {
        $sid = 'forklock' . substr(md5($case), 0, 6) . $run;
        echo "$case:\n";
        rcs_cmd('SET', rcs_prefix() . $sid, 'n|i:1;', 'EX', '60');
        echo rcs_php($code($sid, $child), ['redis.session.locking_enabled' => $locked ? '1' : '0', 'session.lazy_write' => '1']);
        $data = rcs_cmd('GET', rcs_prefix() . $sid);
        echo "  stored: ", $data === null ? 'nothing' : $data, "\n";
        echo "  lock keys left: ", count(rcs_lock_keys_left($sid)), "\n";
    }
}
?>
--EXPECTF--
== locked
the child changes nothing:
parent: write_close true
  stored: n|i:1;parent|i:1;
  lock keys left: 0
the child changes the session:
child: warning: Unable to write session: its lock belongs to the process this one was forked from (pcntl_fork()), which saves the session; nothing was stored
child: warning: Failed to write session data (rediscluster). Please verify that the current setting of session.save_path is correct (%s)
parent: write_close true
  stored: n|i:1;parent|i:1;
  lock keys left: 0
the child destroys the session:
child: warning: Unable to destroy session: its lock belongs to the process this one was forked from (pcntl_fork()), which saves the session; nothing was stored
child: warning: Session object destruction failed
parent: write_close true
  stored: n|i:1;parent|i:1;
  lock keys left: 0
== unlocked
the child changes nothing:
parent: write_close true
  stored: n|i:1;parent|i:1;
  lock keys left: 0
the child changes the session:
parent: write_close true
  stored: n|i:1;parent|i:1;
  lock keys left: 0
the child destroys the session:
parent: write_close true
  stored: n|i:1;parent|i:1;
  lock keys left: 0
