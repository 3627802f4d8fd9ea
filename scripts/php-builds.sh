#!/usr/bin/env bash
# Builds the other PHPs the tests run on: PHP 8.2 with --enable-debug, thread-safe
# (ZTS, with the embed SAPI) or not, minimal (CLI, session, pcntl, posix), each with phpredis, from
# Debian's source packages. They go to a cache outside the checkout, keyed by
# version and flavor, that later runs on this machine reuse (a fresh machine
# builds both once, about 10 minutes on 2 cores):
#   ~/.cache/rediscluster_session/php-<version>-<flavor>/bin/{php,php-config}
#   scripts/php-builds.sh [debug] [zts-debug]     prints each build's prefix
set -euo pipefail
. "$(dirname "$0")/lib.sh"

PHP_VERSION=8.2.32
DEB_PHP=8.2.32-1~deb12u1        # the security archive's newer one lacks its .debian.tar.xz
DEB_PHPREDIS=5.3.7+4.3.0-3
PHPREDIS_DIR=redis-5.3.7
SOURCES=$CACHE/php-src

# Debian's source packages: PHP's upstream tree and phpredis's (Debian's
# patches are not needed for a test build). deb-src is listed only meanwhile.
fetch_sources() {
    [ -f "$SOURCES/php8.2_$PHP_VERSION.orig.tar.xz" ] && [ -f "$SOURCES/php-redis_${DEB_PHPREDIS%-*}.orig.tar.xz" ] && return
    mkdir -p "$SOURCES"
    local listed=/etc/apt/sources.list.d/rediscluster-session-src.sources
    as_root sh -c "sed 's/^Types: deb\$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources > $listed"
    as_root apt-get update -qq
    (cd "$SOURCES" && apt-get source --download-only "php8.2=$DEB_PHP" "php-redis=$DEB_PHPREDIS" >/dev/null 2>&1) ||
        { as_root rm -f "$listed"; die "apt-get source php8.2=$DEB_PHP php-redis=$DEB_PHPREDIS failed"; }
    as_root rm -f "$listed"
    as_root apt-get update -qq
}

build() {
    local flavor=$1 prefix="$CACHE/php-$PHP_VERSION-$1"
    local flags=(--enable-debug --disable-all --enable-session --enable-cli --disable-cgi
        --disable-phpdbg --enable-pcntl --enable-posix)
    case $flavor in
        debug) ;;
        # The embed SAPI (libphp.so) runs PHP on several threads of one process.
        zts-debug) flags+=(--enable-zts --enable-embed) ;;
        *) die "unknown PHP flavor: $flavor (debug or zts-debug)" ;;
    esac
    # A build made with other flags is made again.
    if [ "$(cat "$prefix/.complete" 2>/dev/null)" = "${flags[*]}" ]; then
        echo "$prefix"
        return
    fi
    local work
    work=$(mktemp -d)
    log "building PHP $PHP_VERSION ($flavor) into $prefix"
    rm -rf "$prefix"
    tar -xJf "$SOURCES/php8.2_$PHP_VERSION.orig.tar.xz" -C "$work"
    (cd "$work/php-$PHP_VERSION" && ./configure --prefix="$prefix" "${flags[@]}" && make -j"$(nproc)" && make install) \
        >"$work/php.log" 2>&1 || { tail -30 "$work/php.log"; die "PHP $flavor build failed (log: $work/php.log)"; }
    # run-tests.php is the tests' runner; the source tree has it.
    cp "$work/php-$PHP_VERSION/run-tests.php" "$prefix/lib/run-tests.php"
    log "building phpredis for PHP $flavor"
    tar -xJf "$SOURCES/php-redis_${DEB_PHPREDIS%-*}.orig.tar.xz" -C "$work"
    # With the compressions Debian's phpredis has, for the compression test.
    (cd "$work/$PHPREDIS_DIR" && "$prefix/bin/phpize" && ./configure --with-php-config="$prefix/bin/php-config" \
        --enable-redis-lzf --enable-redis-zstd --enable-redis-lz4 --with-liblz4 &&
        make -j"$(nproc)" && make install) >"$work/phpredis.log" 2>&1 ||
        { tail -30 "$work/phpredis.log"; die "phpredis build for PHP $flavor failed (log: $work/phpredis.log)"; }
    rm -rf "$work"
    echo "${flags[*]}" >"$prefix/.complete"
    echo "$prefix"
}

# phpredis's zstd and LZ4 support builds against Debian's libraries.
install_packages libzstd-dev liblz4-dev
fetch_sources
flavors=("$@")
[ ${#flavors[@]} -gt 0 ] || flavors=(debug zts-debug)
for flavor in "${flavors[@]}"; do build "$flavor"; done
