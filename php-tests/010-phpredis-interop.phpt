--TEST--
Sessions written by this extension read back byte for byte through phpredis's RedisCluster, and the other way round; ids such as uniqid()'s pass between phpredis's handler and ours
--SKIPIF--
<?php if (getenv('RCS_NO_PHPREDIS')) die('skip ' . getenv('RCS_NO_PHPREDIS')); ?>
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

// Ids PHP and phpredis take that are not PHP-generated, such as uniqid('', true)'s:
// phpredis's own handler writes, ours (locking) reads and adds, phpredis's reads back.
$sid = uniqid('', true);
echo rcs_php("session_id('$sid'); session_start(); \$_SESSION['by'] = ['phpredis']; session_write_close(); echo \"phpredis wrote\\n\";",
    [], PHPREDIS);
echo rcs_php("session_id('$sid'); var_dump(session_start()); \$_SESSION['by'][] = 'ours'; session_write_close();",
    rcs_locking(), [...PHPREDIS, rcs_ext()]);
echo rcs_php("session_id('$sid'); session_start(); echo implode(',', \$_SESSION['by']), \"\\n\";", [], PHPREDIS);
?>
--EXPECT--
bool(true)
int(22)
array(1) {
  ["from"]=>
  string(8) "phpredis"
}
phpredis wrote
bool(true)
phpredis,ours
