--TEST--
Issue 37: with Debian's phpredis 5.3 loaded first (it registers redis.session.lock_retries=10 and lock_wait_time=2000, 20 ms of waiting), a request whose user set neither waits with this extension's defaults (100 x 20 ms) and gets a lock held 0.6 s; what the user set (-d, php.ini, conf.d, ini_set(), one directive or both) applies as set; phpinfo() and rediscluster_session_lock_wait() say which and why
--SKIPIF--
<?php
if (getenv('RCS_NO_PHPREDIS')) die('skip ' . getenv('RCS_NO_PHPREDIS'));
$load = implode(' ', array_map(fn($module) => "-d extension=$module", explode(',', getenv('RCS_PHPREDIS'))));
$version = shell_exec(escapeshellarg(PHP_BINARY) . " -n $load -r 'echo phpversion(\"redis\");'");
if (!str_starts_with((string)$version, '5.')) die("skip the phpredis here is $version, not 5 (Debian 12's 5.3.7, whose defaults this is about)");
?>
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
// phpredis first, as Debian's conf.d loads it (its own MINIT runs first anyway).
$load = [...PHPREDIS, rcs_ext()];
$small = ['redis.session.lock_retries' => '2', 'redis.session.lock_wait_time' => '2000'];

/**
 * A holder keeps a new session locked; a waiter with $ini (and $ini_dir's
 * php.ini and conf.d) runs $code, then session_start(). Once it queues (or
 * has given up), the holder keeps the lock 0.6 s more. Prints whether the
 * waiter got the lock (with the holder's data: it waited for the release) or
 * gave up, and where its wait came from.
 */
function contend(string $case, array $ini, string $code = '', ?string $ini_dir = null): void {
    global $load;
    $sid = 'waitdefaults' . bin2hex(random_bytes(8));
    $go = rcs_go_file();
    $holder = rcs_spawn(rcs_holder_code($sid, $go), rcs_locking(), $load);
    rcs_wait_until(fn() => rcs_cmd('EXISTS', rcs_lock_key($sid)) === 1);
    $waiter = rcs_spawn($code . <<<PHP
        \$report = function_exists('rediscluster_session_lock_wait') ? rediscluster_session_lock_wait() : null;
        \$warnings = [];
        set_error_handler(function (\$type, \$message) use (&\$warnings) { \$warnings[] = \$message; return true; });
        session_id('$sid');
        echo session_start() ? "got the lock, after the holder wrote " . \$_SESSION['v'] : 'gave up: ' . implode(' / ', \$warnings), PHP_EOL;
        foreach (['redis.session.lock_wait_time', 'redis.session.lock_retries'] as \$name) {
            echo "  \$name: ", \$report === null ? 'no report' : "{\$report[\$name]['value']} ({\$report[\$name]['source']})", PHP_EOL;
        }
        PHP, rcs_locking($ini), $load, $ini_dir);
    rcs_wait_until(fn() => rcs_cmd('ZCARD', rcs_lock_key($sid) . '_FIFO') >= 1 || !proc_get_status($waiter[0])['running']);
    usleep(600000);
    touch($go);
    echo "$case: ", rcs_wait($waiter);
    $holder_output = rcs_wait($holder);
    if (substr_count($holder_output, 'bool(true)') !== 2) echo "holder: $holder_output";
}

contend('nothing set', []);
contend('both set small with -d', $small);
$ini_dir = sys_get_temp_dir() . '/rcs-068-' . getmypid();
mkdir("$ini_dir/conf.d", 0777, true);
file_put_contents("$ini_dir/php.ini", "redis.session.lock_wait_time = 2000\n");
file_put_contents("$ini_dir/conf.d/50-lock.ini", "redis.session.lock_retries = 2\n");
contend('both set small in php.ini and conf.d', [], '', $ini_dir);
exec('rm -rf ' . escapeshellarg($ini_dir));
$ini_set = fn(array $values) => implode(' ', array_map(fn($name, $value) => "ini_set('$name', '$value');", array_keys($values), $values));
contend('both set small with ini_set()', [], $ini_set($small));
// Only the retries set: 3 tries of this extension's 20 ms.
contend('only lock_retries set small with ini_set()', [], $ini_set(['redis.session.lock_retries' => '3']));

// What phpinfo() says, with nothing set; then without phpredis.
$info = '
    ob_start(); phpinfo(INFO_MODULES); $info = ob_get_clean();
    preg_match_all("/^(redis\.session\.lock_(?:wait_time|retries) \(effective\)|Lock wait, at most \(effective\)) => .*$/m", $info, $m);
    echo implode("\n", $m[0]), "\n";
    echo json_encode(rediscluster_session_lock_wait()), "\n";';
echo "-- phpredis loaded, nothing set\n", rcs_php($info, [], $load);
echo "-- without phpredis\n", rcs_php($info);
?>
--EXPECTF--
nothing set: got the lock, after the holder wrote holder
  redis.session.lock_wait_time: 20000 (default)
  redis.session.lock_retries: 100 (default)
both set small with -d: gave up: %SFailed to acquire session lock%S
  redis.session.lock_wait_time: 2000 (php.ini)
  redis.session.lock_retries: 2 (php.ini)
both set small in php.ini and conf.d: gave up: %SFailed to acquire session lock%S
  redis.session.lock_wait_time: 2000 (php.ini)
  redis.session.lock_retries: 2 (php.ini)
both set small with ini_set(): gave up: %SFailed to acquire session lock%S
  redis.session.lock_wait_time: 2000 (runtime)
  redis.session.lock_retries: 2 (runtime)
only lock_retries set small with ini_set(): gave up: %SFailed to acquire session lock%S
  redis.session.lock_wait_time: 20000 (default)
  redis.session.lock_retries: 3 (runtime)
-- phpredis loaded, nothing set
redis.session.lock_wait_time (effective) => 20000: this extension's default, not the 2000 phpredis registered (set the directive to choose)
redis.session.lock_retries (effective) => 100: this extension's default, not the 10 phpredis registered (set the directive to choose)
Lock wait, at most (effective) => 2000 ms (100 retries × 20000 µs)
{"max_wait_us":2000000,"wait_us":20000,"retries":100,"redis.session.lock_wait_time":{"value":20000,"source":"default","registered":2000,"registered_by":"phpredis","overridden":true},"redis.session.lock_retries":{"value":100,"source":"default","registered":10,"registered_by":"phpredis","overridden":true}}
-- without phpredis
redis.session.lock_wait_time (effective) => 20000: this extension's default
redis.session.lock_retries (effective) => 100: this extension's default
Lock wait, at most (effective) => 2000 ms (100 retries × 20000 µs)
{"max_wait_us":2000000,"wait_us":20000,"retries":100,"redis.session.lock_wait_time":{"value":20000,"source":"default","registered":20000,"registered_by":"rediscluster_session","overridden":false},"redis.session.lock_retries":{"value":100,"source":"default","registered":100,"registered_by":"rediscluster_session","overridden":false}}
