#!/usr/bin/env bash
# What the lock's lease costs (issue 48, item 7), each part against
# lock_lease_ms=0 in one run, the two interleaved:
#   waiters     100 sessions, each a 10-s holder and 3 waiters (lock_wait_time 20 ms):
#               the primaries' CPU (INFO cpu) per batch and per second of the steady
#               window (every waiter queued, every holder holding), their ratio per
#               round, and the calls the primaries counted in that window
#               (INFO commandstats): the watching waiter's polls per second
#   callgrind   client instructions per warm locked request, as bench/run.sh counts
#               them (the whole process under callgrind, 220 minus 20 cycles)
#   cold        the first locked request of fresh processes, timed inside each
#               from session_start() to session_write_close(), alternating
#   cold-trace  the same under perf record (system calls, the scheduler's
#               switches, uprobes on watchdog::watch, pin_library and
#               pthread_create): where the lease's extra time goes
#   bench/lease-cost.sh [PART...]     default: all four; about 5 minutes on 2 cores
# Environment: LEASE_COST_PORT (9450: the cluster on 9450-9455), RCS_EXT_SO (the
# extension; default this checkout's release build, under $CARGO_TARGET_DIR if
# set), LEASE_COST_SESSIONS (100), LEASE_COST_WAITERS (3), LEASE_COST_HOLD (10),
# LEASE_COST_ROUNDS (4: batches per lease), LEASE_COST_CALLGRIND_REPS (3),
# LEASE_COST_COLD (41 per lease), LEASE_COST_TRACED (21 per lease), LEASE_COST_UPROBES (1; 0: cold-trace
# without the uprobes, whose hits cost a few µs each).
# cold-trace needs root (uprobes, perf record -a) and perf; it removes its probes on exit.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$ROOT"

parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(waiters callgrind cold cold-trace)
port=${LEASE_COST_PORT:-9450}
[ -f "$EXT_SO" ] || die "no extension at $EXT_SO: scripts/build.sh first"
dir=$(mktemp -d /tmp/rcs-lease-cost.XXXXXX)
probes=()

cleanup() {
    local probe
    for probe in "${probes[@]}"; do perf probe -q -d "$probe" 2>/dev/null || true; done
    "$ROOT/scripts/cluster.sh" stop redis "$port"
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Uprobes for cold-trace: perf probe takes a file offset; nm gives addresses.
add_probe() { # NAME FILE SYMBOL_REGEX [%return]
    local name=$1 file=$2 addr offset
    # (awk reads to the end: an early exit would fail nm's write, and pipefail with it.)
    addr=$({ nm "$file" 2>/dev/null || true; } | awk -v re="$3" '!found && $3 ~ re { print $1; found = 1 }')
    [ -n "$addr" ] || addr=$(nm -D "$file" | awk -v re="$3" '!found && $3 ~ re { print $1; found = 1 }')
    [ -n "$addr" ] || die "no symbol matching $3 in $file"
    offset=$(python3 - "$file" "$addr" <<'PYTHON'
import subprocess, sys
path, addr = sys.argv[1], int(sys.argv[2], 16)
for line in subprocess.run(['readelf', '-lW', path], capture_output=True, text=True).stdout.splitlines():
    f = line.split()
    if f and f[0] == 'LOAD':
        off, vaddr, size = int(f[1], 16), int(f[2], 16), int(f[5], 16)
        if vaddr <= addr < vaddr + size:
            print(hex(addr - vaddr + off))
PYTHON
)
    perf probe -q -x "$file" -a "$name=$offset${4:-}"
    probes+=("probe_$(basename "$file" | sed 's/\.so.*//; s/[^A-Za-z0-9_]/_/g'):$name${4:+__return}")
}

"$ROOT/scripts/cluster.sh" start redis "$port"
export RCS_EXT=$EXT_SO RCS_SEEDS=$(cluster_seeds "$port") LEASE_COST_DIR=$dir
log "extension $EXT_SO; $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for part in "${parts[@]}"; do
    case "$part" in
        waiters | callgrind | cold) "$PHP" -n "$ROOT/bench/lease-cost.php" "$part" ;;
        cold-trace)
            command -v perf >/dev/null || die "perf is not installed (apt-get install linux-perf)"
            libc=$(ldd "$PHP" | awk '/libc\.so/ { print $3 }')
            # LEASE_COST_UPROBES=0: none (each hit costs a few µs: compare the parts without them).
            if [ "${LEASE_COST_UPROBES:-1}" != 0 ]; then
                add_probe rcs_watch "$EXT_SO" '^_ZN20rediscluster_session8watchdog5watch17h'
                add_probe rcs_watch "$EXT_SO" '^_ZN20rediscluster_session8watchdog5watch17h' %return
                add_probe rcs_pin_library "$EXT_SO" '^_ZN20rediscluster_session8watchdog11pin_library17h'
                add_probe rcs_pthread_create "$libc" '^pthread_create(@@.*)?$'
                add_probe rcs_pthread_create "$libc" '^pthread_create(@@.*)?$' %return
            fi
            events=raw_syscalls:sys_enter,raw_syscalls:sys_exit,sched:sched_switch
            for probe in "${probes[@]}"; do events+=",$probe"; done
            LEASE_COST_PERF="perf record -a -q -m 1024 -k CLOCK_MONOTONIC -e $events" "$PHP" -n "$ROOT/bench/lease-cost.php" cold-trace ;;
        *) die "unknown part '$part' (waiters, callgrind, cold, cold-trace)" ;;
    esac
done
