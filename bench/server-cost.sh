#!/usr/bin/env bash
# What a warm request costs the primary, in instructions: the server side of
# issue 40's harness, locked and unlocked side by side in one run.
#
# One redis-server (the tests' own, see scripts/lib.sh) holding every slot
# (`--cluster-enabled yes`, `CLUSTER ADDSLOTSRANGE 0 16383`; `--hz 1` so that
# its timers hardly count) runs under valgrind's callgrind. For each mode, a
# PHP CLI process runs bench/worker.php's `cycles`: session_start(), an
# increment, session_write_close(). After WARM warm-up requests (connection
# and slot map in place, scripts loaded) the harness zeroes the server's
# counters (`callgrind_control -z`, `CONFIG RESETSTAT`), the process runs N
# more, and the harness dumps them (`callgrind_control --dump`). Per mode it
# prints the instructions per request (the dump's total / N), the commands
# per request by `INFO commandstats` (those the scripts call with
# redis.call included), and the server functions that cost most, per
# request: self cost, then inclusive cost of the Lua and command layers.
#
#   bench/server-cost.sh [PORT]       PORT: the server's (default
#                                     $RCS_COST_PORT, else 9800)
#
# Environment: RCS_EXT_SO the extension (default this checkout's release
# build, under $CARGO_TARGET_DIR if set), RCS_COST_SERVER another
# redis-server (Debian's is stripped: Lua's own functions show as addresses;
# one built from the same source with symbols names them), N (200), WARM
# (20), TOP (25 functions listed), MODES ("locked unlocked"; locked is
# redis.session.locking_enabled=1 with the default lease, locked-no-lease
# the same with lock_lease_ms=0), RCS_COST_DIR=DIR
# keeps the dumps there (default: a temporary directory, removed). Ctrl-C
# stops the server and the PHP process.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$ROOT"

PORT=${1:-${RCS_COST_PORT:-9800}}
N=${N:-200}
WARM=${WARM:-20}
TOP=${TOP:-25}
MODES=${MODES:-locked unlocked}
server_binaries redis
SERVER_BIN=${RCS_COST_SERVER:-$SERVER_BIN}
[ -f "$EXT_SO" ] || die "no extension at $EXT_SO: cargo build --release first"
command -v callgrind_control >/dev/null || die "valgrind is not installed"

dir=${RCS_COST_DIR:-$(mktemp -d)}
mkdir -p "$dir"
server_pid= worker_pid=
cleanup() {
    [ -z "$worker_pid" ] || stop_process "$worker_pid"
    [ -z "$server_pid" ] || stop_process "$server_pid"
    [ -n "${RCS_COST_DIR:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cli() { "$CLI_BIN" -p "$PORT" "$@"; }

log "redis-server under callgrind on port $PORT ($("$SERVER_BIN" --version | cut -d' ' -f1-3))"
rm -f "$dir"/callgrind.out* "$dir/nodes.conf"
valgrind --tool=callgrind --callgrind-out-file="$dir/callgrind.out" \
    "$SERVER_BIN" --port "$PORT" --bind 127.0.0.1 --dir "$dir" --hz 1 \
    --cluster-enabled yes --cluster-config-file nodes.conf \
    --save '' --appendonly no --logfile "$dir/server.log" 2>"$dir/valgrind.log" &
server_pid=$!
for _ in $(seq 300); do cli ping >/dev/null 2>&1 && break; sleep 0.1; done
cli ping >/dev/null || die "the server does not answer; see $dir/valgrind.log"
cli cluster addslotsrange 0 16383 >/dev/null
for _ in $(seq 300); do
    cli cluster info | grep -q '^cluster_state:ok' && break
    sleep 0.1
done
cli cluster info | grep -q '^cluster_state:ok' || die "the cluster state is not ok"

# The INI of a mode: the extension, the one seed, and the lock or none.
mode_ini() {
    local locking=1 lease=()
    case "$1" in
        unlocked) locking=0 ;;
        locked-no-lease) lease=(-d rediscluster_session.lock_lease_ms=0) ;;
    esac
    printf '%s\n' -n -d "extension=$EXT_SO" -d session.save_handler=rediscluster "${lease[@]}" \
        -d "session.save_path=\"seed[]=127.0.0.1:$PORT\"" \
        -d "redis.session.locking_enabled=$locking" -d session.use_strict_mode=0 \
        -d session.use_cookies=0 -d session.use_only_cookies=0 -d session.cache_limiter= \
        -d session.lazy_write=1 -d session.gc_probability=0
}

# Runs one mode; leaves its dump in $dir/$mode.out and its commandstats in $dir/$mode.stats.
measure() {
    local mode=$1 ini job line
    mapfile -t ini < <(mode_ini "$mode")
    # One id length for every mode: the server hashes the keys' bytes.
    job="{\"sid\":\"servercost-$(printf %s "$mode" | md5sum | cut -c1-8)\",\"kind\":\"changed\",\"n\":$N,\"warm\":$WARM,\"gate\":true}"
    coproc WORKER { exec php "${ini[@]}" bench/worker.php cycles "$job" 2>&1; }
    worker_pid=$WORKER_PID
    read -r line <&"${WORKER[0]}"
    [ "$line" = warm ] || die "$mode: the worker said '$line'"
    cli config resetstat >/dev/null
    callgrind_control -z "$server_pid" >/dev/null 2>&1
    echo go >&"${WORKER[1]}"
    read -r line <&"${WORKER[0]}"
    wait "$worker_pid" || die "$mode: the worker failed: $line"
    worker_pid=
    case "$line" in *'"failures":0'*) ;; *) die "$mode: $line" ;; esac
    rm -f "$dir"/callgrind.out.*
    callgrind_control --dump="$mode" "$server_pid" >/dev/null 2>&1
    # Complete once its last line, the totals, is written.
    for _ in $(seq 100); do
        grep -qs '^totals:' "$dir"/callgrind.out.* && break
        sleep 0.1
    done
    mv "$dir"/callgrind.out.* "$dir/$mode.out"
    # After the dump: INFO's own cost stays out of it.
    cli info commandstats >"$dir/$mode.stats"
}

# Instructions per request in a dump.
per_request() { awk -v n="$N" '/^(summary|totals):/ { printf "%.0f\n", $2 / n; exit }' "$1"; }

for mode in $MODES; do measure "$mode"; done

printf '\nprimary instructions per warm request (%s requests after %s warm-up):\n' "$N" "$WARM"
for mode in $MODES; do printf '  %-16s %s\n' "$mode" "$(per_request "$dir/$mode.out")"; done

# Per-function costs of a dump, per request: the TOP highest self costs, or
# with a regex the inclusive costs of the functions it matches.
functions() {
    python3 - "$@" <<'PYTHON'
import re, sys
from collections import defaultdict
# usage: cgtop.py DUMP N TOP [FUNCTION-REGEX]
path, n, top = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
wanted = re.compile(sys.argv[4]) if len(sys.argv) > 4 else None
names = {}
def name(spec):
    m = re.match(r'\((\d+)\)(?: (.*))?', spec)
    if not m: return spec
    if m.group(2) is not None: names[m.group(1)] = m.group(2)
    return names[m.group(1)]
self_cost, incl_calls, calls = defaultdict(int), defaultdict(int), defaultdict(int)
fn = cfn = None; pending = 0
for line in open(path):
    if line.startswith('fn='): fn = name(line[3:].strip())
    elif line.startswith('cfn='): cfn = name(line[4:].strip())
    elif line.startswith('calls='):
        pending = int(line[6:].split()[0])
    elif line[:1].isdigit() or line[:1] in '+-*':
        parts = line.split()
        cost = int(parts[1]) if len(parts) > 1 else 0
        if pending:
            if cfn != fn: incl_calls[fn] += cost
            calls[cfn] += pending; pending = 0
        elif fn is not None: self_cost[fn] += cost
incl = {f: self_cost[f] + incl_calls[f] for f in set(self_cost) | set(incl_calls)}
if wanted:
    rows = sorted((f for f in incl if wanted.search(f)), key=lambda f: -incl[f])
    print('  %9s %9s %7s  %s' % ('inclusive', 'self', 'calls', 'function (per request)'))
    for f in rows[:top]:
        print('  %9.0f %9.0f %7.2f  %s' % (incl[f] / n, self_cost[f] / n, calls[f] / n, f))
else:
    print('  %9s %7s %9s  %s' % ('self', 'calls', 'inclusive', 'function (per request)'))
    for f in sorted(self_cost, key=lambda f: -self_cost[f])[:top]:
        print('  %9.0f %7.2f %9.0f  %s' % (self_cost[f] / n, calls[f] / n, incl[f] / n, f))
PYTHON
}

# The layers of a scripted call: EVALSHA, the Lua VM, redis.call's dispatch,
# the commands, Lua's strings and tables, allocations.
layers='^(evalShaCommand|luaCallFunction|lua_pcall|luaV_execute|luaD_precall|scriptCall|call.2|luaRedisGenericCommand|luaRedisCallCommand|luaPushReply|luaReplyToRedisReply|luaArgsToRedisArgv|luaS_newlstr|lua_pushlstring|luaV_concat|luaH_.*|luaC_step|luaC_fullgc|gmatch_aux|str_find_aux|str_format|str_sub|match|do_match|sha1hex|SHA1.*|mp_.*|propagatePendingCommands|propagateNow|alsoPropagate|replicationFeedSlaves|execCommandPropagateMulti|rewriteClientCommandVector|replaceClientCommandVector|getNodeByQuery|keyHashSlot|[a-z]+Command|zmalloc.*|ztrymalloc.*|zfree|malloc|free|realloc|createStringObject|.*sdsnewlen)$'

for mode in $MODES; do
    printf '\n== %s: commands per request (INFO commandstats; redis.call included)\n' "$mode"
    tr -d '\r' <"$dir/$mode.stats" | awk -F'[:=,]' -v n="$N" '/^cmdstat_/ {
        sub(/^cmdstat_/, "", $1); printf "  %-16s %6.2f calls  %7.2f usec\n", $1, $3 / n, $5 / n }' |
        sort -k2,2nr
    printf '\n== %s: top server functions by self cost\n' "$mode"
    functions "$dir/$mode.out" "$N" "$TOP"
    printf '\n== %s: the layers of a scripted call, inclusive\n' "$mode"
    functions "$dir/$mode.out" "$N" "$TOP" "$layers"
done
printf '\n(dumps: %s%s)\n' "$dir" "$([ -n "${RCS_COST_DIR:-}" ] || echo ', removed on exit; RCS_COST_DIR=DIR keeps them')"
