#!/usr/bin/env bash
# Runs inside a fresh minimal Debian root (scripts/deb-install-tests.sh puts it
# there with the packages beside it), as a user would on a server with PHP and
# no Rust:
#   deb-install-check.sh install SEEDS   apt installs the packages here; every
#       SAPI loads the module, two processes share a locked session on the
#       cluster at SEEDS (host:port,...), lose nothing and leave no lock; then
#       apt remove and purge leave PHP starting with no warning and no trace
#       of the module.
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
        # The README and every document it links to, in the module package's
        # doc directory (dh_compress may have gzipped them).
        doc=/usr/share/doc/php$ver-rediscluster-session
        readme=$(ls "$doc"/README.md* 2>/dev/null | head -1 || true)
        [ -n "$readme" ] || fail "no README in $doc"
        linked=$(zcat -f "$readme" | grep -o '](docs/[^)#]*' | cut -c3- | sort -u || true)
        [ -n "$linked" ] || fail "$readme links to nothing in docs/"
        for f in $linked; do
            [ -f "$doc/$f" ] || [ -f "$doc/$f.gz" ] || fail "the README links to $f, not in $doc"
        done
        echo "documentation: $doc has the README and the $(wc -w <<<"$linked") documents it links to"
        # Two PHP processes at once, 10 requests each, on one session: each
        # request takes the lock (the module's own count) and none loses the
        # other's update; no lock is left.
        save_path=$(tr ',' '\n' <<<"$seeds" | sed 's/^/seed[]=/' | paste -sd'&')
        sid=debinstall$RANDOM$RANDOM
        request() {
            php -d session.save_handler=rediscluster -d "session.save_path=\"$save_path&timeout=2\"" \
                -d redis.session.locking_enabled=1 -d redis.session.lock_wait_time=20000 \
                -d redis.session.lock_retries=-1 -d session.use_strict_mode=0 -r '
                for ($i = 0; $i < 10; $i++) {
                    session_id($argv[1]);
                    if (!session_start()) exit(1);
                    $_SESSION["n"] = ($_SESSION["n"] ?? 0) + 1;
                    if (!session_write_close()) exit(1);
                }
                echo rediscluster_session_stats()["locks_acquired"];' "$sid"
        }
        request >locks.1 2>&1 & first=$!
        request >locks.2 2>&1 || fail "session requests failed: $(cat locks.2)"
        wait "$first" || fail "session requests failed: $(cat locks.1)"
        [ "$(cat locks.1)" = 10 ] && [ "$(cat locks.2)" = 10 ] ||
            fail "locks taken: $(cat locks.1) and $(cat locks.2), not 10 each"
        host=${seeds%%,*}
        cli() { redis-cli -c -h "${host%:*}" -p "${host#*:}" "$@"; }
        key=PHPREDIS_CLUSTER_SESSION:$sid   # phpredis's default prefix for its cluster handler
        [ "$(cli exists "{$key}_LOCK")" = 0 ] || fail "the lock outlived the requests"
        cli get "$key" | grep "n|i:20;" >/dev/null || fail "the session holds $(cli get "$key"), not 20 updates"
        cli del "$key" >/dev/null
        echo "a locked session shared by two processes: 20 requests, 20 locks, no update lost, no lock left"
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
        reason=$(grep -o 'Depends: phpapi-[0-9]*[^|]*' apt.log | head -1 || true)
        [ -n "$reason" ] || { cat apt.log; fail "apt failed, but not for the PHP ABI"; }
        echo "refused: $reason"
        ! loaded || fail "loaded after a refused install"
        starts_clean
        ;;
    *) fail "usage: deb-install-check.sh install SEEDS | refuse" ;;
esac
