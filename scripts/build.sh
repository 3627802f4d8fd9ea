#!/usr/bin/env bash
# Builds the release extension: target/release/librediscluster_session.so
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
# ext-php-rs generates its PHP bindings with bindgen, which needs libclang at
# build time; without it the build would stop in a bindgen panic.
libclang_found=no
for lib in ${LIBCLANG_PATH:+"$LIBCLANG_PATH"/libclang*.so*} /usr/lib/llvm-*/lib/libclang*.so* /usr/lib/*/libclang*.so* /usr/lib64/libclang*.so*; do
    [ -e "$lib" ] && libclang_found=yes
done
[ "$libclang_found" = yes ] \
    || die "libclang not found: install it (Debian/Ubuntu: apt-get install libclang-dev) or set LIBCLANG_PATH"
command -v php-config >/dev/null \
    || die "php-config not found: install PHP's headers (Debian/Ubuntu: apt-get install php8.2-dev)"
cargo build --release --locked
log "built $EXT_SO ($(du -k "$EXT_SO" | cut -f1) KiB)"
