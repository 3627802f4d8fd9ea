--TEST--
A fatal error, memory_limit, exit() or an uncaught exception in the script still releases the lock (PHP calls close)
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$endings = [
    'fatal error' => 'undefined_function_xyz();',
    'memory_limit' => 'ini_set("memory_limit", "8M"); $a = str_repeat("x", 64 * 1024 * 1024);',
    'exit' => 'exit(3);',
    'exception' => 'throw new RuntimeException("boom");',
];
foreach ($endings as $label => $ending) {
    $sid = 'fatal' . bin2hex(random_bytes(8));
    $out = rcs_php("session_id('$sid'); session_start(); \$_SESSION['v'] = 1; $ending", rcs_locking());
    echo $label, ': ', str_contains($out, 'Fatal error') || $label === 'exit' ? 'died' : $out,
        ', lock left: ', rcs_cmd('EXISTS', rcs_lock_key($sid)), "\n";
}
?>
--INI--
--EXPECT--
fatal error: died, lock left: 0
memory_limit: died, lock left: 0
exit: died, lock left: 0
exception: died, lock left: 0
