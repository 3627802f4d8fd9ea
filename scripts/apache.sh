#!/usr/bin/env bash
# Serves a PHP app through Apache 2 with Debian's mod_php (prefork MPM, a fixed
# number of children), the other way PHP is served, with this extension and
# phpredis loaded. Everything (config, php.ini, a copy of the app, pid file,
# logs) lives in DIR; the system's Apache (/etc/apache2, its service, its
# enabled modules) is neither read nor touched.
#   scripts/apache.sh start DIR HTTP_PORT APP_DIR WORKERS [INI=VALUE...]
#   scripts/apache.sh stop DIR
# APACHE_CONF_EXTRA: lines added to its config (DIR/app is the app's copy).
# Apache's error log (DIR/error.log) gets every PHP warning and notice of the
# children. Started as root, the children run as www-data (Apache refuses
# root): the app is copied into DIR, readable by them; the extension and
# php.ini are read by the parent, as root, before it forks.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# Debian's Apache and its mod_php of the PHP the tests run on.
php_version=$(php_minor_version)
APACHE_BIN=${APACHE_BIN:-/usr/sbin/apache2}
APACHE_MODULES=${APACHE_MODULES:-/usr/lib/apache2/modules}
MOD_PHP=${MOD_PHP:-$APACHE_MODULES/libphp$php_version.so}

start_server() {
    local dir=$1 http_port=$2 app=$3 workers=$4
    shift 4
    local needed
    for needed in "$APACHE_BIN" "$MOD_PHP"; do
        [ -e "$needed" ] || die "$needed not found (Debian: apache2 libapache2-mod-php$php_version); run scripts/install-deps.sh"
    done
    rm -rf "$dir/app"
    mkdir -p "$dir"
    cp -r "$app" "$dir/app"
    chmod -R a+rX "$dir"
    : >"$dir/error.log"
    local user_lines=""
    if [ "$(id -u)" -eq 0 ]; then
        local user=www-data
        id -u "$user" >/dev/null 2>&1 || user=nobody
        user_lines="User $user
Group $(id -gn "$user")"
        setpriv --reuid="$user" --regid="$(id -g "$user")" --clear-groups test -r "$dir/app/index.php" ||
            die "$user cannot read $dir/app: choose a DIR under a directory it can enter"
    fi
    cat >"$dir/httpd.conf" <<EOF
ServerRoot "$dir"
ServerName 127.0.0.1
Listen 127.0.0.1:$http_port
PidFile "$dir/apache.pid"
DefaultRuntimeDir "$dir"
ErrorLog "$dir/error.log"
LogLevel warn
$user_lines
LoadModule mpm_prefork_module "$APACHE_MODULES/mod_mpm_prefork.so"
LoadModule authz_core_module "$APACHE_MODULES/mod_authz_core.so"
LoadModule dir_module "$APACHE_MODULES/mod_dir.so"
LoadModule php_module "$MOD_PHP"
# Exactly WORKERS children, from start to stop: none started, none ended.
StartServers $workers
ServerLimit $workers
MaxRequestWorkers $workers
MinSpareServers 1
MaxSpareServers $workers
MaxConnectionsPerChild 0
KeepAlive Off
PHPIniDir "$dir"
DocumentRoot "$dir/app"
DirectoryIndex index.php
<Directory "$dir/app">
    Require all granted
</Directory>
<FilesMatch "\.php\$">
    SetHandler application/x-httpd-php
</FilesMatch>
${APACHE_CONF_EXTRA:-}
EOF
    # Only what is named here is loaded (PHP_INI_SCAN_DIR empty: not the
    # system's conf.d): phpredis (with igbinary, as Debian ships it; where it
    # is built) for the app's cache, and this extension.
    {
        # shellcheck disable=SC2046 # one module per word
        printf 'extension=%s\n' $(phpredis_modules) "$EXT_SO"
        printf '%s\n' session.save_handler=rediscluster \
            log_errors=On display_errors=Off
        printf '%s\n' "$@"
    } >"$dir/php.ini"
    env PHP_INI_SCAN_DIR= "$APACHE_BIN" -d "$dir" -f "$dir/httpd.conf" \
        || die "Apache did not start; see $dir/error.log"
}

stop_server() {
    local dir=$1 pid children child
    [ -f "$dir/apache.pid" ] || return 0
    pid=$(cat "$dir/apache.pid")
    # Only the Apache this script started on DIR (a pid file left behind may
    # name another process by now), and its children, should one outlive it.
    if grep -qF "$dir/httpd.conf" "/proc/$pid/cmdline" 2>/dev/null; then
        children=$(pgrep -P "$pid" || true)
        stop_process "$pid"
        for child in $children; do stop_process "$child"; done
    fi
    rm -f "$dir/apache.pid"
}

# Ready once Apache answers a path PHP does not serve: no session made. PHP
# started in the parent before it listened.
serve_command /ready "$@"
