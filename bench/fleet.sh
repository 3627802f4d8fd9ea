#!/usr/bin/env bash
# The fleet benchmark in one command: a php-fpm pool of 256 static children
# (fewer if memory does not allow them) behind nginx, 256 concurrent clients
# each keeping its own session cookie, on a 3-primary + 3-replica cluster of
# its own; this extension (persistent=1 and 0) and phpredis's cluster handler
# (persistent=0 and 1) side by side, steady, with the servers' `timeout 1` and
# bursts, at `maxclients 64`, and with pm.max_requests=50. Prints one Markdown
# table (also left in FLEET_DIR/fleet.md). See bench/README.md, "Fleet".
#   bench/fleet.sh [--smoke]    --smoke: 16 children, 16 clients, tiny windows
#   bench/fleet.sh --http [--smoke]   bench/fleet/http.php instead: locked requests'
#     throughput and the primaries' CPU per request, this extension against
#     phpredis's handlers in interleaved rounds, 8 children and 8 clients; it also
#     starts a plain Redis server on +90 (bench/README.md, "Locked requests behind nginx").
# Uses the built release extension (builds it only when it is missing).
# FLEET_BASE_PORT (7500: nodes 7500-7505, nginx on +80, --http's plain server on +90), FLEET_CHILDREN,
# FLEET_CLIENTS, FLEET_DIR (work dir, default /tmp/rcs-fleet),
# FLEET_FRESH_CLUSTER=1|0 (a new cluster per run; default 1, 0 with --smoke).
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$ROOT"

smoke= http=
for arg in "$@"; do
    case "$arg" in --smoke) smoke=1 ;; --http) http=1 ;; esac
done

BASE_PORT=${FLEET_BASE_PORT:-7500}
HTTP_PORT=$((BASE_PORT + 80))
STANDALONE_PORT=$((BASE_PORT + 90))
WORK=${FLEET_DIR:-${TMPDIR:-/tmp}/rcs-fleet}

# What it needs beside the build: php-fpm, nginx, Redis, phpredis with
# igbinary (phpredis's handler), PHP's curl (the load tool).
install_packages php8.2-cli php8.2-fpm php8.2-curl nginx redis-server php-redis php8.2-igbinary curl
if [ ! -f "$EXT_SO" ]; then
    "$ROOT/scripts/install-deps.sh"
    "$ROOT/scripts/build.sh"
fi
PHP=${PHP:-$(command -v php)}
export PHP

wanted=${FLEET_CHILDREN:-$([ -n "$http" ] && echo 8 || { [ -n "$smoke" ] && echo 16 || echo 256; })}
clients=${FLEET_CLIENTS:-$wanted}
# As many children as memory allows, at a generous 40 MB each, 2 GB kept free
# (a child of this pool measures a few MB of PSS: the table's header says).
avail_mb=$(awk '/^MemAvailable:/ { print int($2 / 1024) }' /proc/meminfo)
allowed=$(((avail_mb - 2048) / 40))
children=$((wanted < allowed ? wanted : allowed))
[ "$children" -ge 1 ] || die "not enough memory for php-fpm children (${avail_mb} MB available)"
[ "$children" -eq "$wanted" ] || log "memory allows $children php-fpm children, not $wanted"
log "php-fpm children: $children (memory would allow $allowed), clients: $clients"

mkdir -p "$WORK"
rm -rf "$WORK/logs" "$WORK/fleet.md"
driver=
cleanup() {
    local status=$?
    if [ -n "$driver" ] && kill -0 "$driver" 2>/dev/null; then
        kill "$driver" 2>/dev/null || true
        wait "$driver" 2>/dev/null || true
    fi
    "$ROOT/scripts/fpm.sh" stop "$WORK/fpm" || true
    "$ROOT/scripts/cluster.sh" stop redis "$BASE_PORT" || true
    [ -z "$http" ] || standalone_stop "$STANDALONE_PORT"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

[ -z "$http" ] || standalone_start "$STANDALONE_PORT"

# In the background so that a signal reaches the trap at once.
FLEET_ROOT=$ROOT FLEET_BASE_PORT=$BASE_PORT FLEET_HTTP_PORT=$HTTP_PORT FLEET_CHILDREN=$children \
    FLEET_CLIENTS=$clients FLEET_DIR=$WORK FLEET_STANDALONE_PORT=$STANDALONE_PORT \
    "$PHP" -n -d extension=curl -d memory_limit=1G "$ROOT/bench/fleet/$([ -n "$http" ] && echo http || echo fleet).php" "$@" &
driver=$!
wait "$driver"
