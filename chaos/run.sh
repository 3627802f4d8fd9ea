#!/usr/bin/env bash
# The failover chaos test in one command: installs what it needs, builds, and
# for each server flavor starts a local cluster with a 1 s cluster-node-timeout,
# runs chaos/chaos.php (graceful failover, SIGKILL of a primary, restart of the
# killed node, under locked session load) and stops the cluster.
#   chaos/run.sh [--short] [redis] [valkey]     (default: both, full length)
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$ROOT"

args=() flavors=()
for arg in "$@"; do
    case "$arg" in --*) args+=("$arg") ;; *) flavors+=("$arg") ;; esac
done
[ ${#flavors[@]} -gt 0 ] || flavors=(redis valkey)
[ -n "${CHAOS_SKIP_SETUP:-}" ] || { "$ROOT/scripts/install-deps.sh"; "$ROOT/scripts/build.sh"; }

status=0
for flavor in "${flavors[@]}"; do
    base=$(( $(default_base_port "$flavor") + 300 ))
    trap '"$ROOT/scripts/cluster.sh" stop "$flavor" "$base"' EXIT
    CLUSTER_NODE_TIMEOUT=1000 "$ROOT/scripts/cluster.sh" start "$flavor" "$base"
    RCS_EXT=$EXT_SO "$PHP" -n "$ROOT/chaos/chaos.php" "$flavor" "$base" "${args[@]}" || status=1
    "$ROOT/scripts/cluster.sh" stop "$flavor" "$base"
    trap - EXIT
done
exit $status
