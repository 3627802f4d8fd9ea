#!/usr/bin/env bash
# The chaos test in one command: installs what it needs, builds, and for each
# server flavor starts a local cluster (cluster-node-timeout 1 s in the phases that fail a primary over), runs
# chaos/chaos.php (a stalling primary, failovers, slot migration, and in the full run a rolling
# deploy beside the previous release, with and without stalls) under locked session load, and stops
# the cluster.
#   chaos/run.sh [--short] [--only=PHASE,...] [redis] [valkey] [valkey9]   (default: all three, full length)
# The full run builds the previous release (PREVIOUS_RELEASE, a commit) once
# into a cache outside the checkout, for the rolling-deploy phase.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$ROOT"

# The main before issue 48, whose lease is the lock key's TTL: a rolling deploy
# goes from one release to the next.
PREVIOUS_RELEASE=${PREVIOUS_RELEASE:-0e7f74c}

args=() flavors=() short=no
for arg in "$@"; do
    case "$arg" in --short) short=yes; args+=("$arg") ;; --*) args+=("$arg") ;; *) flavors+=("$arg") ;; esac
done
[ ${#flavors[@]} -gt 0 ] || flavors=(redis valkey valkey9)
[ -n "${CHAOS_SKIP_SETUP:-}" ] || { "$ROOT/scripts/install-deps.sh"; "$ROOT/scripts/build.sh"; }

if [ "$short" = no ] && [ -z "${RCS_EXT_PREVIOUS:-}" ]; then
    export RCS_EXT_PREVIOUS=$(previous_release "$PREVIOUS_RELEASE")
fi

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
