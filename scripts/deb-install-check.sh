#!/usr/bin/env bash
# Runs inside a fresh minimal Debian root (scripts/deb-install-tests.sh puts it
# there with the packages beside it), as a user would on a server with PHP and
# no Rust:
#   deb-install-check.sh install SEEDS   apt installs the packages here; every
#       SAPI loads the module, a locked session round-trips on the cluster at
#       SEEDS (host:port,...) and leaves no lock; then apt remove and purge
#       leave PHP starting with no warning and no trace of the module.
#   deb-install-check.sh refuse          the packages here are for another PHP
#       ABI: apt refuses them and PHP is untouched.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt_get() { apt-get -o APT::Sandbox::User=root -y -q --no-install-recommends "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
ver=$(php -r 'echo PHP_MAJOR_VERSION, ".", PHP_MINOR_VERSION;')
packages=(./php-rediscluster-session_*_all.deb ./php*-rediscluster-session_*_amd64.deb)

# PHP's CLI and php-fpm start with nothing on stderr and no startup message.
starts_clean() {
    local out
    out=$(php -v 2>&1 >/dev/null; php -r '' 2>&1)
    [ -z "$out" ] || fail "php prints at startup: $out"
    out=$(php-fpm"$ver" -t 2>&1 | grep -v 'configuration file .* test is successful' || true)
    [ -z "$out" ] || fail "php-fpm$ver -t prints: $out"
}
loaded() { php -m | grep -x rediscluster_session >/dev/null; }

case ${1:-} in
    install)
        seeds=${2:?SEEDS}
        apt_get install "${packages[@]}" >apt.log 2>&1 || { cat apt.log; fail "apt install failed"; }
        echo "installed: $(dpkg-query -W -f='${Package} ${Version}\n' 'php*-rediscluster-session' | paste -sd, | sed 's/,/, /g')"
        loaded || fail "php -m does not list rediscluster_session"
        php --ri rediscluster_session | grep "rediscluster_session support => enabled" >/dev/null ||
            fail "php --ri rediscluster_session: $(php --ri rediscluster_session 2>&1)"
        php-fpm"$ver" -m | grep -x rediscluster_session >/dev/null || fail "php-fpm$ver -m does not list it"
        starts_clean
        echo "loaded by: php (cli) and php-fpm$ver, enabled in $(ls /etc/php/"$ver"/*/conf.d/*rediscluster_session.ini | wc -l) SAPIs"
        # Two requests on one session: the second sees the first's write, and
        # the lock is gone after each.
        save_path=$(tr ',' '\n' <<<"$seeds" | sed 's/^/seed[]=/' | paste -sd'&')
        sid=debinstall$RANDOM$RANDOM
        for expected in 1 2; do
            got=$(php -d session.save_handler=rediscluster -d "session.save_path=\"$save_path&timeout=2\"" \
                -d redis.session.locking_enabled=1 -d session.use_strict_mode=0 -r '
                session_id($argv[1]);
                if (!session_start()) exit(1);
                $_SESSION["n"] = ($_SESSION["n"] ?? 0) + 1;
                if (!session_write_close()) exit(1);
                echo $_SESSION["n"];' "$sid" 2>&1) || fail "session request failed: $got"
            [ "$got" = "$expected" ] || fail "session request $expected read $got"
        done
        host=${seeds%%,*}
        cli() { redis-cli -c -h "${host%:*}" -p "${host#*:}" "$@"; }
        key=PHPREDIS_CLUSTER_SESSION:$sid   # phpredis's default prefix for its cluster handler
        [ "$(cli exists "{$key}_LOCK")" = 0 ] || fail "the lock outlived the request"
        cli get "$key" | grep "n|i:2;" >/dev/null || fail "the session holds $(cli get "$key")"
        cli del "$key" >/dev/null
        echo "a locked session round-tripped: 2 requests, lock released"
        apt_get remove 'php*-rediscluster-session' >apt.log 2>&1 || { cat apt.log; fail "apt remove failed"; }
        ! loaded || fail "still loaded after apt remove"
        starts_clean
        apt_get purge 'php*-rediscluster-session' >apt.log 2>&1 || { cat apt.log; fail "apt purge failed"; }
        left=$(find /etc/php /usr/lib/php -name '*rediscluster_session*')
        [ -z "$left" ] || fail "left after purge: $left"
        starts_clean
        echo "removed and purged: PHP starts clean, nothing left"
        ;;
    refuse)
        if apt_get install "${packages[@]}" >apt.log 2>&1; then
            fail "packages for another PHP installed on PHP $ver"
        fi
        grep -o 'Depends: phpapi-[0-9]*[^|]*' apt.log | head -1 | sed 's/^/refused: /'
        ! loaded || fail "loaded after a refused install"
        starts_clean
        ;;
    *) fail "usage: deb-install-check.sh install SEEDS | refuse" ;;
esac
