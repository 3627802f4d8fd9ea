#!/usr/bin/env bash
# The benchmark in one command: installs what it needs, builds, starts a local
# Redis cluster, a 16-node one for the cold start, and a plain Redis server (for
# phpredis's standalone handler),
# runs every scenario against every contender and prints one table.
#   bench/run.sh [--smoke]     --smoke: tiny sizes, only proves it still runs
# BENCH_PREVIOUS=REV also builds git revision REV (once, cached outside the
# checkout) and measures it beside this build as "previous release locked".
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$ROOT"

BASE_PORT=${BENCH_BASE_PORT:-7300}
STANDALONE_PORT=$((BASE_PORT + 90))

[ -n "${BENCH_SKIP_SETUP:-}" ] || { "$ROOT/scripts/install-deps.sh"; "$ROOT/scripts/build.sh"; }
cargo build --release --locked --quiet --example metrics_cost
previous_so=
[ -z "${BENCH_PREVIOUS:-}" ] || previous_so=$(previous_release "$BENCH_PREVIOUS")

LARGE_PORT=$((BASE_PORT + 20))   # the 16-node cluster (8 primaries + 8 replicas)

stop_servers() {
    "$ROOT/scripts/cluster.sh" stop redis "$BASE_PORT"
    "$ROOT/scripts/cluster.sh" stop redis "$LARGE_PORT"
    standalone_stop "$STANDALONE_PORT"
}
trap stop_servers EXIT
"$ROOT/scripts/cluster.sh" start redis "$BASE_PORT"
CLUSTER_NODES=16 "$ROOT/scripts/cluster.sh" start redis "$LARGE_PORT"
standalone_start "$STANDALONE_PORT"

RCS_EXT=$EXT_SO RCS_EXT_PREVIOUS=$previous_so RCS_SEEDS=$(cluster_seeds "$BASE_PORT") RCS_SEEDS16=$(cluster_seeds "$LARGE_PORT" 16) RCS_STANDALONE=127.0.0.1:$STANDALONE_PORT RCS_FPM_PORT=$((BASE_PORT + 80)) \
    RCS_METRICS_COST="${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/metrics_cost" \
    "$PHP" -n "$ROOT/bench/bench.php" "$@"
