--TEST--
Debian's phpredis loaded before or after this extension: both keep working, rediscluster is ours, shared INI applies
--SKIPIF--
<?php if (getenv('RCS_NO_PHPREDIS')) die('skip ' . getenv('RCS_NO_PHPREDIS')); ?>
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$seeds = var_export(array_map(fn($s) => "$s[0]:$s[1]", rcs_seeds()), true);
$code = <<<PHP
    ob_start(); phpinfo(INFO_MODULES); \$info = ob_get_clean();
    preg_match('/Registered save handlers => (.*)/', \$info, \$m); echo trim(\$m[1]), PHP_EOL;
    preg_match('/Save handler => (.*)/', \$info, \$m); echo trim(\$m[1]), PHP_EOL;
    // phpredis's own classes and INI.
    \$c = new RedisCluster(null, $seeds);
    var_dump(\$c->set('{coexist}k', 'v'), \$c->get('{coexist}k'));
    var_dump(ini_get('redis.clusters.cache_slots'), ini_get('redis.pconnect.pooling_enabled'));
    // The shared redis.session.* value given with -d reaches this extension.
    preg_match('/redis.session.lock_wait_time \(effective\) => (.*)/', \$info, \$m); echo trim(\$m[1]), PHP_EOL;
    // The session is served by this extension (phpredis's cluster handler has no GETEX/locking INI).
    var_dump(session_start()); \$_SESSION['who'] = 'rediscluster_session'; \$sid = session_id(); session_write_close();
    var_dump(\$c->get(getenv('RCS_PREFIX') . \$sid));
    PHP;
$ini = ['redis.session.lock_wait_time' => '12345'];
echo "-- phpredis first\n", rcs_php($code, $ini, [...PHPREDIS, rcs_ext()]);
echo "-- phpredis last\n", rcs_php($code, $ini, [...array_diff(PHPREDIS, ['redis']), rcs_ext(), 'redis']);
?>
--EXPECT--
-- phpredis first
files user redis rediscluster_phpredis rediscluster
rediscluster
bool(true)
string(1) "v"
string(1) "0"
string(1) "1"
12345: set in php.ini, conf.d or -d
bool(true)
string(32) "who|s:20:"rediscluster_session";"
-- phpredis last
files user redis rediscluster_phpredis rediscluster
rediscluster
bool(true)
string(1) "v"
string(1) "0"
string(1) "1"
12345: set in php.ini, conf.d or -d
bool(true)
string(32) "who|s:20:"rediscluster_session";"
