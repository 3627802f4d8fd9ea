--TEST--
Sessions written by this extension read back byte for byte through phpredis's RedisCluster, and the other way round
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$seeds = var_export(array_map(fn($s) => "$s[0]:$s[1]", rcs_seeds()), true);
$key = rcs_prefix() . 'interop0123456789abcdef';

// Ours writes, phpredis reads.
echo rcs_php("session_id('interop0123456789abcdef'); session_start();"
    . " \$_SESSION['n'] = 1; \$_SESSION['bin'] = \"\\0\\x01\\xff\\r\\n\"; \$sent = session_encode(); session_write_close();"
    . " \$c = new RedisCluster(null, $seeds); var_dump(\$c->get('$key') === \$sent, strlen(\$sent));",
    [], [...PHPREDIS, rcs_ext()]);

// phpredis writes, ours reads.
echo rcs_php("\$c = new RedisCluster(null, $seeds); \$c->set('$key', 'from|s:8:\"phpredis\";');"
    . " session_id('interop0123456789abcdef'); session_start(); var_dump(\$_SESSION);",
    [], [...PHPREDIS, rcs_ext()]);
?>
--EXPECT--
bool(true)
int(22)
array(1) {
  ["from"]=>
  string(8) "phpredis"
}
