#!/usr/bin/env bash
# The main job, end to end: installs what is needed, builds, starts a local
# Redis cluster, serves demo/index.php through nginx and php-fpm (8 workers,
# phpredis loaded beside this extension), fires concurrent requests that share
# one session, with and without locking, and prints what happened, the lock
# waits of the whole pool from its /metrics among it. Everything it started is
# stopped at the end.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

"$ROOT/scripts/install-deps.sh"
"$ROOT/scripts/build.sh"
port=${DEMO_PORT:-8088} requests=${DEMO_REQUESTS:-50} workers=8
fpm_dir="$ROOT/.demo"
"$ROOT/scripts/cluster.sh" start redis
trap '"$ROOT/scripts/fpm.sh" stop "$fpm_dir"; "$ROOT/scripts/cluster.sh" stop redis' EXIT

# Debian's phpredis 5.3 registers lock_retries=10 and lock_wait_time=2000 (20 ms
# of waiting in all); the demo asks for phpredis 6's 100 x 20 ms.
"$ROOT/scripts/fpm.sh" start "$fpm_dir" "$port" "$ROOT/demo" "$workers" \
    "session.save_path=\"$(cluster_seeds 7100 | sed 's/^/seed[]=/; s/,/\&seed[]=/g')&timeout=1&read_timeout=2\"" \
    redis.session.locking_enabled=1 redis.session.lock_wait_time=20000 redis.session.lock_retries=100

run() { # lock(1|0)
    local sid out served final expected
    sid=$(curl -sf "http://127.0.0.1:$port/?lock=$1" | sed 's/.*"session":"\([^"]*\)".*/\1/')
    out=$(mktemp)
    for _ in $(seq "$requests"); do
        curl -sf -b "PHPSESSID=$sid" "http://127.0.0.1:$port/?lock=$1" >>"$out" &
    done
    wait
    served=$(sed 's/.*"worker":\([0-9]*\).*/\1/' "$out" | sort -u | wc -l)
    final=$(curl -sf -b "PHPSESSID=$sid" "http://127.0.0.1:$port/?lock=$1" | sed 's/.*"visits":\([0-9]*\).*/\1/')
    expected=$((requests + 2))
    printf '  locking %-3s %d concurrent requests on one session, %d FPM workers: visits = %d of %d (%d lost)\n' \
        "$([ "$1" = 1 ] && echo on || echo off)" "$requests" "$served" "$final" "$expected" $((expected - final))
    rm -f "$out"
}
echo "Session visit counter behind nginx + php-fpm on a local Redis Cluster (3 primaries, 3 replicas):"
run 1
run 0
sets=$(curl -sf "http://127.0.0.1:$port/?stats=1")
echo "  connection sets opened by the worker that answered last: $sets (one per worker, kept across requests)"
# The pool's lock waits, from /metrics (Prometheus format): the histogram as bars.
echo "  lock waits of the whole pool (GET /metrics, rediscluster_session_lock_wait_seconds):"
curl -sf "http://127.0.0.1:$port/metrics" | awk '
    /^rediscluster_session_lock_wait_seconds_bucket/ {
        match($0, /le="[^"]*"/); le = substr($0, RSTART + 4, RLENGTH - 5)
        n++; bound[n] = le; count[n] = $2 - previous; previous = $2; if (count[n] > most) most = count[n]
    }
    END {
        for (i = 1; i <= n; i++) {
            bar = ""; width = most ? int(40 * count[i] / most + 0.5) : 0
            for (j = 0; j < width; j++) bar = bar "#"
            printf "    <= %-6s s %5d %s\n", bound[i], count[i], bar
        }
    }'
problems=$(cat "$fpm_dir/fpm.log")
echo "  FPM log: ${problems:-no warnings}"
