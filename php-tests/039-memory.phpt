--TEST--
Memory goes back down: after one 20 MB session, a worker's resident size returns to within a few MB of where it started
--SKIPIF--
<?php if (!is_readable('/proc/self/status')) die('skip needs /proc'); ?>
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$code = <<<'PHP'
function rss_kib(): int {
    preg_match('/VmRSS:\s+(\d+)/', file_get_contents('/proc/self/status'), $m);
    return (int)$m[1];
}
$big = 'big' . bin2hex(random_bytes(6));
$small = 'small' . bin2hex(random_bytes(6));
session_id($small); session_start(); $_SESSION['n'] = 0; session_write_close();
$base = rss_kib();
session_id($big); session_start(); $_SESSION['blob'] = random_bytes(20 << 20); session_write_close();
session_id($big); session_start(); $read = strlen($_SESSION['blob']); session_destroy();
$peak = rss_kib();
for ($i = 0; $i < 100; $i++) { session_id($small); session_start(); $_SESSION['n']++; session_write_close(); }
$_SESSION = [];
$grown = rss_kib() - $base;
echo "read back ", $read >> 20, " MB; peak above the start: ", $peak - $base > 20 << 10 ? 'over 20 MB' : 'less', "\n";
echo "after 100 small sessions: ", $grown < 4096 ? "within 4 MB of the start" : "$grown KiB more", "\n";
PHP;
// 20 MB each way may take seconds on a loaded machine: time enough.
$ini = ['session.save_path' => rcs_save_path('timeout=2&read_timeout=15&prefix=' . urlencode(rcs_prefix()))];
foreach (['0', '1'] as $locking) {
    echo "locking=$locking\n", rcs_php($code, $ini + ['redis.session.locking_enabled' => $locking]);
}
?>
--EXPECT--
locking=0
read back 20 MB; peak above the start: over 20 MB
after 100 small sessions: within 4 MB of the start
locking=1
read back 20 MB; peak above the start: over 20 MB
after 100 small sessions: within 4 MB of the start
