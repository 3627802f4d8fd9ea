#!/usr/bin/env bash
# Serves a PHP app through Debian's php-fpm behind nginx, as production does,
# with this extension and phpredis loaded. Everything (configs, pid files,
# logs) lives in DIR; nothing system-wide is touched.
#   scripts/fpm.sh start DIR HTTP_PORT APP_DIR WORKERS [INI=VALUE...]
#   scripts/fpm.sh stop DIR
# The FPM log (DIR/fpm.log) gets every PHP warning and notice of the workers.
# FPM_MAX_REQUESTS=N sets the pool's pm.max_requests (each worker is replaced
# after N requests); unset, php-fpm's default (0: never). FPM_PHP_INI=FILE:
# php-fpm reads that php.ini (and no conf.d) instead of none. FPM_CONF_EXTRA and
# FPM_NGINX_EXTRA: lines added to php-fpm's config (more pools) and to nginx's
# server block (more locations).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# Debian's php-fpm of the PHP the tests run on.
fpm_name=php-fpm$(php_minor_version)
FPM_BIN=${FPM_BIN:-$(command -v "$fpm_name" || echo "/usr/sbin/$fpm_name")}
NGINX_BIN=${NGINX_BIN:-$(command -v nginx || echo /usr/sbin/nginx)}

start_server() {
    local dir=$1 http_port=$2 app=$3 workers=$4
    shift 4
    [ -x "$FPM_BIN" ] || die "php-fpm not found; run scripts/install-deps.sh"
    [ -x "$NGINX_BIN" ] || die "nginx not found; run scripts/install-deps.sh"
    mkdir -p "$dir/tmp"
    : >"$dir/fpm.log"
    local fpm_listen="$dir/fpm.sock" as_root=() user_lines=""
    # Run as root only where the caller is root (CI, containers); both servers
    # refuse to without being told.
    if [ "$(id -u)" -eq 0 ]; then
        as_root=(-R)
        user_lines=$'user = root\ngroup = root'
    fi
    cat >"$dir/fpm.conf" <<EOF
[global]
pid = $dir/fpm.pid
error_log = $dir/fpm.log
log_level = warning
daemonize = yes

[app]
$user_lines
listen = $fpm_listen
pm = static
pm.max_children = $workers
${FPM_MAX_REQUESTS:+pm.max_requests = $FPM_MAX_REQUESTS}
catch_workers_output = yes
decorate_workers_output = no
clear_env = no
php_admin_flag[log_errors] = on
php_admin_flag[display_errors] = off
${FPM_CONF_EXTRA:-}
EOF
    cat >"$dir/nginx.conf" <<EOF
$([ "$(id -u)" -eq 0 ] && echo "user root;")
worker_processes 2;
pid $dir/nginx.pid;
error_log $dir/nginx-error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $dir/tmp/body;
    fastcgi_temp_path $dir/tmp/fastcgi;
    proxy_temp_path $dir/tmp/proxy;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    server {
        listen 127.0.0.1:$http_port;
        root $app;
        location / {
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME \$document_root/index.php;
            fastcgi_pass unix:$fpm_listen;
        }
        ${FPM_NGINX_EXTRA:-}
    }
}
EOF
    # php.ini is left out (-n; FPM_PHP_INI's alone, where given) so only what
    # is named here is loaded: phpredis (with igbinary, as Debian ships it;
    # where it is built) for the app's cache, and this extension, unless
    # FPM_WITHOUT_EXTENSION=1 (phpredis's own handler then).
    local ini=(-d session.save_handler=rediscluster) module
    for module in $(phpredis_modules); do ini+=(-d "extension=$module"); done
    [ -n "${FPM_WITHOUT_EXTENSION:-}" ] || ini+=(-d "extension=$EXT_SO")
    local setting
    for setting in "$@"; do ini+=(-d "$setting"); done
    local php_ini=(-n)
    [ -z "${FPM_PHP_INI:-}" ] || php_ini=(-c "$FPM_PHP_INI")
    env PHP_INI_SCAN_DIR= "$FPM_BIN" "${php_ini[@]}" "${ini[@]}" "${as_root[@]}" -y "$dir/fpm.conf" \
        || die "php-fpm did not start; see $dir/fpm.log"
    "$NGINX_BIN" -q -p "$dir" -e "$dir/nginx-error.log" -c "$dir/nginx.conf" \
        || die "nginx did not start; see $dir/nginx-error.log"
}

stop_server() {
    local dir=$1 pid_file pid
    for pid_file in "$dir/nginx.pid" "$dir/fpm.pid"; do
        [ -f "$pid_file" ] || continue
        pid=$(cat "$pid_file")
        stop_process "$pid"
        rm -f "$pid_file"
    done
}

# Ready once nginx answers and a worker has served the app.
serve_command / "$@"
