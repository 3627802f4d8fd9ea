#!/usr/bin/env bash
# What the lock's lease buys and costs, side by side in one run:
# 1. a holder SIGKILLed 0.2-3 s into a request that would sleep 30 s: the time
#    until the next request holds the lock, for this extension with a lease of
#    1000 ms, without one (lock_expire 10), phpredis's own `redis` handler
#    (lock_expire 10, a standalone server) and PHP's `files` handler;
# 2. the primaries' CPU over 100 concurrent 10-s locked requests, lease 1000 vs 0.
#   bench/lease-death.sh          about 4 minutes on 2 cores
# LEASE_DEATH_TRIALS (default 10), LEASE_CPU_REQUESTS (default 100),
# LEASE_DEATH_PORT (default 9500): the cluster on 9500-9505, the standalone server on +90.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$ROOT"

port=${LEASE_DEATH_PORT:-9500}
standalone_port=$((port + 90))
[ -f "$EXT_SO" ] || "$ROOT/scripts/build.sh"
phpredis=$(phpredis_modules)
[ -n "$phpredis" ] || die "phpredis is not installed for $PHP (scripts/install-deps.sh)"

stop_servers() {
    "$ROOT/scripts/cluster.sh" stop redis "$port"
    standalone_stop "$standalone_port"
}
trap stop_servers EXIT
"$ROOT/scripts/cluster.sh" start redis "$port"
standalone_start "$standalone_port"

RCS_EXT=$EXT_SO RCS_SEEDS=$(cluster_seeds "$port") RCS_STANDALONE=127.0.0.1:$standalone_port RCS_PHPREDIS=$phpredis \
    LEASE_DEATH_TRIALS=${LEASE_DEATH_TRIALS:-10} LEASE_CPU_REQUESTS=${LEASE_CPU_REQUESTS:-100} \
    "$PHP" -n "$ROOT/bench/lease-death.php"
