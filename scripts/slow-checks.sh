#!/usr/bin/env bash
# What keeps one core busy for minutes, run beside the cluster tests by
# scripts/test.sh: the lock protocol's model checker (every configuration to
# the end), the property tests again with a million cases each (save_path
# parser, key and lock-key rules), and the proof that a panic = "abort" build
# is refused (every FFI entry point relies on catching panics).
#   scripts/slow-checks.sh TEST_BINARY           (from test_binary in scripts/lib.sh)
#   scripts/slow-checks.sh --quick TEST_BINARY   the model's quick configurations only:
#                                                every property, every model feature,
#                                                small bounds (the quick tier's)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
if [ "${1:-}" = --quick ]; then
    exec "${2:?usage: scripts/slow-checks.sh --quick TEST_BINARY}" lock::model::quick \
        lock::model::serving::tests::a_stall_then_a_failover \
        lock::model::serving::tests::two_holders_a_waiter_a_stall_ending_in_a_failover \
        --ignored --nocapture --test-threads=1
fi
test_bin=${1:?usage: scripts/slow-checks.sh [--quick] TEST_BINARY}

# The check build first: minutes of compiling are better spent while the
# cluster tests wait on their timed tests than at the end of the run.
if out=$(cargo check --locked --lib --target-dir target/panic-abort-check --config 'profile.dev.panic="abort"' 2>&1); then
    die "a panic = \"abort\" build was not refused"
fi
grep -q 'needs panic = "unwind"' <<<"$out" || die "panic = \"abort\" build failed for another reason: $out"
log "a panic = \"abort\" build is refused"
# (The quick configurations are the model stage's, which --all runs too.)
"$test_bin" lock::model::tests lock::model::leases --ignored --nocapture --test-threads=1
PROPTEST_CASES=1000000 "$test_bin" fuzz
