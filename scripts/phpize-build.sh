#!/usr/bin/env bash
# Checks the PHP-extension build path: phpize && ./configure && make && make install,
# in a scratch copy of the working tree, installed under a scratch INSTALL_ROOT,
# then loads the installed rediscluster_session.so.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$ROOT" && git ls-files -co --exclude-standard -z | xargs -0 tar -cf - ) | tar -xf - -C "$work"
cd "$work"
phpize >/dev/null
./configure >configure.log || { cat configure.log; die "configure failed"; }
# Reuse the project's cargo cache: config.m4 builds with the same PHP_CONFIG.
CARGO_TARGET_DIR="$ROOT/target" make >make.log 2>&1 || { tail -40 make.log; die "make failed"; }
make install INSTALL_ROOT="$work/root" >/dev/null
so="$work/root$(php-config --extension-dir)/rediscluster_session.so"
[ -f "$so" ] || die "make install did not install rediscluster_session.so"
php -n -d "extension=$so" -m | grep -qx rediscluster_session || die "the installed module does not load"
log "phpize build: ok ($(du -k "$so" | cut -f1) KiB installed)"
