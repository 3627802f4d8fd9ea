#!/usr/bin/env bash
# A lock holder's death behind nginx and php-fpm (issue 48, item 2): see
# bench/lease-death-fpm.php. About 3 minutes on 2 cores.
#   bench/lease-death-fpm.sh      LEASE_DEATH_TRIALS (default 20); the cluster on 9600-9605
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$ROOT"

port=${LEASE_DEATH_PORT:-9600}
[ -f "$EXT_SO" ] || "$ROOT/scripts/build.sh"
trap '"$ROOT/scripts/cluster.sh" stop redis "$port"' EXIT
"$ROOT/scripts/cluster.sh" start redis "$port"
RCS_EXT=$EXT_SO RCS_SEEDS=$(cluster_seeds "$port") RCS_FLAVOR=redis LEASE_DEATH_TRIALS=${LEASE_DEATH_TRIALS:-20} \
    "$PHP" -n -d "extension=$EXT_SO" "$ROOT/bench/lease-death-fpm.php"
