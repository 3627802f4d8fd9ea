#!/usr/bin/env bash
# The main job, end to end: installs what is needed, builds, starts a local
# Redis cluster, serves demo/index.php with PHP's built-in server (8 workers),
# fires concurrent requests that share one session, with and without locking,
# and prints what happened. Everything it started is stopped at the end.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

"$ROOT/scripts/install-deps.sh"
"$ROOT/scripts/build.sh"
port=${DEMO_PORT:-8088} requests=${DEMO_REQUESTS:-50}
"$ROOT/scripts/cluster.sh" start redis
server_pid=
# The server forks its workers: it runs in a process group of its own, and the
# whole group is stopped, so no worker outlives the demo and holds the port.
trap '[ -n "$server_pid" ] && kill -- "-$server_pid" 2>/dev/null; "$ROOT/scripts/cluster.sh" stop redis' EXIT

PHP_CLI_SERVER_WORKERS=8 setsid php -n -d "extension=$EXT_SO" \
    -d session.save_handler=rediscluster \
    -d "session.save_path=\"$(cluster_seeds 7100 | sed 's/^/seed[]=/; s/,/\&seed[]=/g')&timeout=1&read_timeout=2\"" \
    -d redis.session.locking_enabled=1 \
    -S "127.0.0.1:$port" -t "$ROOT/demo" >/dev/null 2>&1 &
server_pid=$!
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/" >/dev/null && break; sleep 0.1; done

run() { # lock(1|0)
    local sid workers
    sid=$(curl -sf "http://127.0.0.1:$port/?lock=$1" | sed 's/.*"session":"\([^"]*\)".*/\1/')
    local out; out=$(mktemp)
    for _ in $(seq "$requests"); do
        curl -sf -b "PHPSESSID=$sid" "http://127.0.0.1:$port/?lock=$1" >>"$out" &
    done
    wait $(jobs -p | grep -v "^$server_pid$") 2>/dev/null || true
    workers=$(sed 's/.*"worker":\([0-9]*\).*/\1/' "$out" | sort -u | wc -l)
    local final; final=$(curl -sf -b "PHPSESSID=$sid" "http://127.0.0.1:$port/?lock=$1" | sed 's/.*"visits":\([0-9]*\).*/\1/')
    local expected=$((requests + 2))
    printf '  locking %-3s %d concurrent requests on one session, %d PHP workers: visits = %d of %d (%d lost)\n' \
        "$([ "$1" = 1 ] && echo on || echo off)" "$requests" "$workers" "$final" "$expected" $((expected - final))
    rm -f "$out"
}
echo "Session visit counter on a local Redis Cluster (3 primaries, 3 replicas):"
run 1
run 0
