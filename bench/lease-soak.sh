#!/usr/bin/env bash
# Soak test of the lock's lease under CPU starvation: locked requests of 20 s
# on a few sessions, 3 processes queued on each, beside 4 busy loops per core,
# so that the watchdog thread has to win a core in time for every renewal.
# Prints one line; expected: 0 refused writes, 0 lost updates.
#   bench/lease-soak.sh [--minutes N] [--lease MS]      (default 10 minutes, lease 1000)
# LEASE_SOAK_PORT (default 9400) is the cluster's first port (9400-9405).
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$ROOT"

minutes=10 lease=1000
while [ $# -gt 0 ]; do
    case "$1" in
        --minutes) minutes=$2; shift 2 ;;
        --lease) lease=$2; shift 2 ;;
        *) die "usage: bench/lease-soak.sh [--minutes N] [--lease MS]" ;;
    esac
done
port=${LEASE_SOAK_PORT:-9400} sessions=5 per_session=3 hold=20
hogs=$((4 * $(nproc)))
[ -f "$EXT_SO" ] || "$ROOT/scripts/build.sh"
out=$(mktemp -d /tmp/rcs-lease-soak.XXXXXX)

pids=()
cleanup() {
    local pid
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    "$ROOT/scripts/cluster.sh" stop redis "$port"
}
trap cleanup EXIT
"$ROOT/scripts/cluster.sh" start redis "$port"
seeds=$(cluster_seeds "$port" | sed 's/^/seed[]=/; s/,/\&seed[]=/g')

# lock_wait_time 20 ms x 3000 retries: a waiter behind two 20-s holders waits up to 60 s.
# An array, not a function: started with &, the PHP process is the pid that cleanup kills.
php_ours=("$PHP" -n -d extension="$EXT_SO" -d session.save_handler=rediscluster -d session.save_path="\"$seeds\""
    -d session.use_cookies=0 -d session.use_strict_mode=0 -d session.gc_probability=0
    -d redis.session.locking_enabled=1 -d redis.session.lock_expire=30
    -d redis.session.lock_wait_time=20000 -d redis.session.lock_retries=3000
    -d rediscluster_session.lock_lease_ms="$lease" "$ROOT/bench/lease.php")

for _ in $(seq "$hogs"); do sh -c 'while :; do :; done' & pids+=($!); done
deadline=$(($(date +%s) + minutes * 60))
log "lease $lease ms, $minutes min: $sessions sessions x $per_session processes, ${hold}-s requests, $hogs busy loops; results in $out"
workers=()
for s in $(seq "$sessions"); do
    sid=soak$s$(openssl rand -hex 8)
    for k in $(seq "$per_session"); do
        "${php_ours[@]}" soak "$sid" "$deadline" "$hold" >"$out/$sid.$k.json" & workers+=($!)
    done
done
pids+=("${workers[@]}")
wait "${workers[@]}"
for f in "$out"/*.1.json; do
    sid=$(basename "$f" .1.json)
    "${php_ours[@]}" read "$sid" >"$out/$sid.read.json"
done
printf 'lease-soak: lease %s ms, %s min, %s sessions x %s, %s busy loops: %s\n' "$lease" "$minutes" \
    "$sessions" "$per_session" "$hogs" "$("$PHP" -n "$ROOT/bench/lease.php" soak-summary "$out")"
