--TEST--
8 processes x 100 increments on one session: exactly 800 with locking; without it updates are lost
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$worker = <<<'PHP'
    $sid = getenv('RCS_SID');
    for ($i = 0; $i < 100; $i++) {
        session_id($sid);
        if (!session_start()) { echo "start failed\n"; continue; }
        $_SESSION['n'] = ($_SESSION['n'] ?? 0) + 1;
        session_write_close();
    }
    PHP;
foreach (['1' => 'locking on', '0' => 'locking off'] as $on => $label) {
    $sid = "contention$on" . bin2hex(random_bytes(8));
    putenv("RCS_SID=$sid");
    $children = [];
    for ($p = 0; $p < 8; $p++) {
        $children[] = rcs_spawn($worker, ['redis.session.locking_enabled' => $on]);
    }
    $output = implode('', array_map('rcs_wait', $children));
    preg_match('/n\|i:(\d+);/', rcs_cmd('GET', rcs_prefix() . $sid), $m);
    echo "$label: ", $on ? $m[1] : ((int)$m[1] < 800 ? 'lost updates' : 'no loss?!'), "\n";
    echo $output;
}
var_dump(rcs_keys(rcs_prefix() . '*_LOCK*'));
?>
--EXPECT--
locking on: 800
locking off: lost updates
array(0) {
}
