--TEST--
After pcntl_fork() parent and child each keep reading and locking their own sessions: a process whose pid changed lets go of the inherited sockets without closing them for the other
--SKIPIF--
<?php if (!function_exists('pcntl_fork')) die('skip pcntl not available'); ?>
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$run = bin2hex(random_bytes(6));
$code = <<<PHP
\$sid = fn(string \$who) => "fork{\$who}$run";
// Connected before the fork, so the child inherits the parent's sockets.
foreach (['parent', 'child'] as \$who) {
    session_id(\$sid(\$who));
    session_start();
    \$_SESSION = ['who' => \$who, 'n' => 0];
    session_write_close();
}
\$pid = pcntl_fork();
\$who = \$pid === 0 ? 'child' : 'parent';
\$wrong = \$failed = 0;
for (\$i = 0; \$i < 150; \$i++) {
    session_id(\$sid(\$who));
    if (!session_start()) { \$failed++; continue; }
    if ((\$_SESSION['who'] ?? null) !== \$who) \$wrong++;
    \$_SESSION['n']++;
    session_write_close();
}
echo "\$who: \$wrong other sessions read, \$failed failed\\n";
if (\$pid === 0) exit(0);
pcntl_waitpid(\$pid, \$status);
// The parent's connections still work after the child exited.
session_id(\$sid('parent'));
session_start(['read_and_close' => true]);
echo "parent after the child exited: n=", \$_SESSION['n'], "\\n";
PHP;
$lines = explode("\n", trim(rcs_php($code, rcs_locking())));
sort($lines);
echo implode("\n", $lines), "\n";
foreach (['parent', 'child'] as $who) {
    $data = rcs_cmd('GET', rcs_prefix() . "fork$who$run");
    echo "$who: ", preg_match('/n\|i:150;/', (string)$data) ? '150 increments stored' : "stored: $data", "\n";
}
var_dump(rcs_keys(rcs_prefix() . "*fork*$run*_LOCK*"));
?>
--EXPECT--
child: 0 other sessions read, 0 failed
parent after the child exited: n=150
parent: 0 other sessions read, 0 failed
parent: 150 increments stored
child: 150 increments stored
array(0) {
}
