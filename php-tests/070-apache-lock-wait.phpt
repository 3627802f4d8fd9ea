--TEST--
Issue 37 behind Apache prefork and Debian's mod_php, with Debian's phpredis 5.3 loaded (20 ms of waiting by its defaults): where nobody set the lock directives, a request waits with this extension's defaults and gets a lock held 0.6 s; small values set by php_value or php_admin_value in Apache's config, or php_value in .htaccess, make it give up as told; rediscluster_session_lock_wait() names the source; opcache on, as in production
--SKIPIF--
<?php
if (getenv('RCS_NO_APACHE')) die('skip ' . getenv('RCS_NO_APACHE'));
if (getenv('RCS_NO_PHPREDIS')) die('skip ' . getenv('RCS_NO_PHPREDIS'));
$version = PHP_MAJOR_VERSION . '.' . PHP_MINOR_VERSION;
if (!is_executable(getenv('APACHE_BIN') ?: '/usr/sbin/apache2')) die('skip Apache is not installed (Debian: apache2)');
$mod_php = getenv('MOD_PHP') ?: "/usr/lib/apache2/modules/libphp$version.so";
if (!is_file($mod_php)) die("skip Debian's mod_php for PHP $version is not installed ($mod_php, from libapache2-mod-php$version)");
$load = implode(' ', array_map(fn($module) => "-d extension=$module", explode(',', getenv('RCS_PHPREDIS'))));
$version = shell_exec(escapeshellarg(PHP_BINARY) . " -n $load -r 'echo phpversion(\"redis\");'");
if (!str_starts_with((string)$version, '5.')) die("skip the phpredis here is $version, not 5 (Debian 12's 5.3.7, whose defaults this is about)");
?>
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
require __DIR__ . '/inc/served.php';
$dir = sys_get_temp_dir() . '/rcs-apache-wait-' . getmypid();
$port = rcs_seeds()[0][1] + 1097;

// The app at / and under a directory for each case; Apache's children read
// apache.sh's copy of it in $dir/app.
$src = "$dir-src";
foreach (['', '/value', '/admin', '/htaccess'] as $sub) {
    mkdir("$src$sub", 0777, true);
    copy(__DIR__ . '/fpm-app/index.php', "$src$sub/index.php");
}
file_put_contents("$src/htaccess/.htaccess", "php_value redis.session.lock_retries 2\nphp_value redis.session.lock_wait_time 2000\n");
$conf = <<<CONF
    <Directory "$dir/app/value">
        php_value redis.session.lock_retries 2
        php_value redis.session.lock_wait_time 2000
    </Directory>
    <Directory "$dir/app/admin">
        php_admin_value redis.session.lock_retries 2
        php_admin_value redis.session.lock_wait_time 2000
    </Directory>
    <Directory "$dir/app/htaccess">
        AllowOverride Options
    </Directory>
    CONF;
// opcache on, as in production: it swaps the entries' startup strings for
// copies in shared memory.
served_start('apache', $dir, $port, 3, ['zend_extension=opcache', 'opcache.enable=1'], patient: false, app: $src, env: ['APACHE_CONF_EXTRA' => $conf]);
try {
    foreach (['/' => 'nothing set', '/value/' => 'php_value', '/admin/' => 'php_admin_value', '/htaccess/' => '.htaccess'] as $path => $case) {
        $report = json_decode(http_many($port, ["$path?lock_wait=1"], [''], 1)[0][1], true);
        $sources = $report === null ? 'no report' : implode(', ', array_map(fn($name) => "{$report[$name]['value']} ({$report[$name]['source']})",
            ['redis.session.lock_wait_time', 'redis.session.lock_retries']));
        [$status] = served_contend($port, 'apachewait' . bin2hex(random_bytes(8)), $path);
        echo "$case: ", $status === 200 ? 'got the lock' : "gave up ($status)", "; $sources",
            ($report['opcache'] ?? false) ? '' : ' (opcache off)', "\n";
    }
    // The requests that gave up warned; nothing else did (but Apache's
    // notices of children all busy, AH00161).
    $log = preg_grep('/Failed to (acquire session lock|read session data)/', explode("\n", served_log("$dir/error.log", 'AH00161')), PREG_GREP_INVERT);
    echo "Apache's error log: ", $log === [] ? 'lock failures only' : implode("\n", $log), "\n";
} finally {
    served_stop('apache', $dir);
    exec('rm -rf ' . escapeshellarg($src));
}
?>
--EXPECT--
nothing set: got the lock; 20000 (default), 100 (default)
php_value: gave up (503); 2000 (runtime), 2 (runtime)
php_admin_value: gave up (503); 2000 (runtime), 2 (runtime)
.htaccess: gave up (503); 2000 (runtime), 2 (runtime)
Apache's error log: lock failures only
