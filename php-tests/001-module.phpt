--TEST--
The module loads, depends on session, registers the handler, phpredis's INI names and its own, and the stats, lock_info, lock_wait, metrics and read_only functions
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
var_dump(extension_loaded('rediscluster_session'));
$ext = new ReflectionExtension('rediscluster_session');
var_dump($ext->getDependencies());
foreach (['locking_enabled', 'lock_expire', 'lock_wait_time', 'lock_retries', 'lock_failure_readonly',
          'lock_release_cmd', 'early_refresh', 'compression', 'compression_level'] as $name) {
    echo "redis.session.$name=", ini_get("redis.session.$name"), "\n";
}
foreach (['write_replicas', 'write_replicas_timeout', 'lock_wait_notice_ms'] as $name) {
    echo "rediscluster_session.$name=", ini_get("rediscluster_session.$name"), "\n";
}
ini_set('redis.session.lock_retries', '7');
ob_start();
phpinfo(INFO_MODULES);
$info = ob_get_clean();
preg_match('/rediscluster_session support.*?(?=\n\n)/s', $info, $m);
echo $m[0], "\n";
preg_match('/Registered save handlers => (.*)/', $info, $m);
echo $m[0], "\n";
var_dump(function_exists('rediscluster_session_stats'), function_exists('rediscluster_session_lock_info'),
    function_exists('rediscluster_session_lock_wait'), function_exists('rediscluster_session_metrics'),
    rediscluster_session_read_only());
?>
--EXPECTF--
bool(true)
array(2) {
  ["session"]=>
  string(8) "Required"
  ["redis"]=>
  string(8) "Optional"
}
redis.session.locking_enabled=0
redis.session.lock_expire=0
redis.session.lock_wait_time=20000
redis.session.lock_retries=100
redis.session.lock_failure_readonly=0
redis.session.lock_release_cmd=eval
redis.session.early_refresh=0
redis.session.compression=none
redis.session.compression_level=3
rediscluster_session.write_replicas=0
rediscluster_session.write_replicas_timeout=100
rediscluster_session.lock_wait_notice_ms=0
rediscluster_session support => enabled
Version => %s
Built for PHP => %d.%d.%d
Save handler => rediscluster
redis.session.locking_enabled (effective) => 0
redis.session.lock_expire (effective) => 0
redis.session.lock_wait_time (effective) => 20000: this extension's default
redis.session.lock_retries (effective) => 7: set for this request (ini_set(), .user.ini, a [PATH=] or [HOST=] section, or the web server's php_value)
redis.session.lock_failure_readonly (effective) => 0
redis.session.lock_release_cmd (effective) => eval
redis.session.early_refresh (effective) => 0
redis.session.compression (effective) => none
redis.session.compression_level (effective) => 3
rediscluster_session.write_replicas (effective) => 0
rediscluster_session.write_replicas_timeout (effective) => 100
rediscluster_session.lock_wait_notice_ms (effective) => 0
rediscluster_session.max_waiters (effective) => 0
rediscluster_session.lock_lease_ms (effective) => 1000
rediscluster_session.fallback_max_lag (effective) => 10
Lock wait, at most (effective) => 140 ms (7 retries × 20000 µs)
Metrics => this process (and any it forks)
stats: locks_acquired => 0
stats: lock_waits => 0
stats: lock_wait_us_total => 0
stats: lock_wait_us_max => 0
stats: acquire_failures => 0
stats: waiters_rejected => 0
stats: writes_refused_lock_lost => 0
stats: releases => lua=0, delex=0, delifeq=0
stats: release_fallbacks => 0
stats: fallback_reads => primary=0, replica=0
stats: connects => 0
stats: reconnects => 0
stats: node_connections => opened=0, closed_idle=0, replaced=0, refused_maxclients=0
stats: slot_maps => fetched=0, shared=0
stats: errors => io=0, timeout=0, cluster=0, auth=0, tls=0, oom=0, server=0
stats: lease_renewals => 0
stats: lease_renewal_failures => 0
stats: locks_lost_to_expiry => 0
stats: locks_broken => 0
stats: shared_slot_map_refused => 0
Registered save handlers => files user rediscluster 
bool(true)
bool(true)
bool(true)
bool(true)
bool(false)
