--TEST--
Issue 37 behind nginx and php-fpm, with Debian's phpredis 5.3 loaded (20 ms of waiting by its defaults): where nobody set the lock directives, a request waits with this extension's defaults and gets a lock held 0.6 s; small values set by .user.ini, php.ini's [PATH=] and [HOST=] sections, the pool's php_value and php_admin_value, or a FastCGI PHP_VALUE make it give up as told; rediscluster_session_lock_wait() names each source; opcache on, as in production
--SKIPIF--
<?php
if (getenv('RCS_NO_FPM')) die('skip ' . getenv('RCS_NO_FPM'));
if (getenv('RCS_NO_PHPREDIS')) die('skip ' . getenv('RCS_NO_PHPREDIS'));
$load = implode(' ', array_map(fn($module) => "-d extension=$module", explode(',', getenv('RCS_PHPREDIS'))));
$version = shell_exec(escapeshellarg(PHP_BINARY) . " -n $load -r 'echo phpversion(\"redis\");'");
if (!str_starts_with((string)$version, '5.')) die("skip the phpredis here is $version, not 5 (Debian 12's 5.3.7, whose defaults this is about)");
?>
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
require __DIR__ . '/inc/served.php';
$dir = sys_get_temp_dir() . '/rcs-fpm-wait-' . getmypid();
$port = rcs_seeds()[0][1] + 1096;
$small = "redis.session.lock_retries = 2\nredis.session.lock_wait_time = 2000\n";

// The app at / and, for the cases a directory chooses, under /userini/ and /path/.
$app = "$dir/app";
$front = '<?php require ' . var_export(realpath(__DIR__ . '/fpm-app/index.php'), true) . ';';
foreach (['', '/userini', '/path'] as $sub) {
    mkdir("$app$sub", 0777, true);
    file_put_contents("$app$sub/index.php", $front);
}
file_put_contents("$app/userini/.user.ini", $small);
file_put_contents("$dir/php.ini", "[PATH=$app/path]\n{$small}[HOST=small.test]\n$small");
// A pool of its own for php_value and php_admin_value, and nginx locations
// for each case (of FastCGI params of one name, php-fpm keeps the last).
$root = trim(shell_exec('id -u')) === '0' ? "user = root\ngroup = root\n" : '';
$pool = <<<INI
    [small]
    {$root}listen = $dir/small.sock
    pm = static
    pm.max_children = 1
    catch_workers_output = yes
    decorate_workers_output = no
    php_admin_flag[log_errors] = on
    php_admin_flag[display_errors] = off
    php_value[redis.session.lock_retries] = 2
    php_admin_value[redis.session.lock_wait_time] = 2000
    INI;
$location = fn(string $path, string $script, string $lines = '', string $socket = 'fpm.sock') => "location $path {"
    . " include /etc/nginx/fastcgi_params; fastcgi_param SCRIPT_FILENAME \$document_root$script; $lines fastcgi_pass unix:$dir/$socket; }";
$nginx = implode("\n", [
    $location('/userini/', '/userini/index.php'),
    $location('/path/', '/path/index.php'),
    $location('/host/', '/index.php', 'fastcgi_param SERVER_NAME small.test;'),
    $location('/pool/', '/index.php', '', 'small.sock'),
    $location('/phpvalue/', '/index.php', "fastcgi_param PHP_VALUE \"$small\";"),
]);
// opcache on, as in production: it swaps the entries' startup strings for
// copies in shared memory.
served_start('fpm', $dir, $port, 3, ['zend_extension=opcache', 'opcache.enable=1'], patient: false, app: $app,
    env: ['FPM_PHP_INI' => "$dir/php.ini", 'FPM_CONF_EXTRA' => $pool, 'FPM_NGINX_EXTRA' => $nginx]);
try {
    // A FastCGI PHP_VALUE stays in the worker that got it, for its later
    // requests: that case comes last.
    foreach (['/' => 'nothing set', '/userini/' => '.user.ini', '/path/' => '[PATH=]', '/host/' => '[HOST=]',
              '/pool/' => "the pool's php_value and php_admin_value", '/phpvalue/' => 'FastCGI PHP_VALUE'] as $path => $case) {
        $report = json_decode(http_many($port, ["$path?lock_wait=1"], [''], 1)[0][1], true);
        $sources = $report === null ? 'no report' : implode(', ', array_map(fn($name) => "{$report[$name]['value']} ({$report[$name]['source']})",
            ['redis.session.lock_wait_time', 'redis.session.lock_retries']));
        [$status, $body] = served_contend($port, 'fpmwait' . bin2hex(random_bytes(8)), $path);
        echo "$case: ", $status === 200 ? 'got the lock' : "gave up ($status)", "; $sources",
            ($report['opcache'] ?? false) ? '' : ' (opcache off)', "\n";
    }
    // The requests that gave up warned; nothing else did.
    $log = preg_grep('/Failed to (acquire session lock|read session data)/', explode("\n", served_log("$dir/fpm.log")), PREG_GREP_INVERT);
    echo "FPM log: ", $log === [] ? 'lock failures only' : implode("\n", $log), "\n";
} finally {
    served_stop('fpm', $dir);
}
?>
--EXPECT--
nothing set: got the lock; 20000 (default), 100 (default)
.user.ini: gave up (503); 2000 (runtime), 2 (runtime)
[PATH=]: gave up (503); 2000 (runtime), 2 (runtime)
[HOST=]: gave up (503); 2000 (runtime), 2 (runtime)
the pool's php_value and php_admin_value: gave up (503); 2000 (php-fpm), 2 (php-fpm)
FastCGI PHP_VALUE: gave up (503); 2000 (php-fpm), 2 (php-fpm)
FPM log: lock failures only
