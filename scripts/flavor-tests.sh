#!/usr/bin/env bash
# One server's stage of scripts/test.sh: the Rust cluster tests and the whole
# .phpt suite on a cluster of FLAVOR started here (on its default ports), while
# MONITOR checks that every key a lock script touches is among its KEYS, then
# the ACL user's tests; the cluster is stopped again.
#   scripts/flavor-tests.sh redis|valkey|valkey9 TEST_BINARY
# (TEST_BINARY from test_binary in scripts/lib.sh; RCS_TLS_DIR names the
# certificates of scripts/tls-certs.sh and RCS_TLS_SEEDS a TLS cluster, for
# the tests that need them, which skip without.)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
flavor=${1:?usage: scripts/flavor-tests.sh FLAVOR TEST_BINARY}
test_bin=${2:?usage: scripts/flavor-tests.sh FLAVOR TEST_BINARY}

trap '"$ROOT/scripts/cluster.sh" stop "$flavor"' EXIT
"$ROOT/scripts/cluster.sh" start "$flavor"
base=$(default_base_port "$flavor")
status=0
monitor_dir="$ROOT/.cluster/keys-monitor-$flavor"
rm -rf "$monitor_dir"
primaries=()
for port in $(seq "$base" $((base + 5))); do
    [ "$(cluster_cli "$flavor" -p "$port" role | head -1)" = master ] && primaries+=("127.0.0.1:$port")
done
php "$ROOT/scripts/keys-monitor.php" watch "$monitor_dir" 1800 "${primaries[@]}" &
monitor_pid=$!
# One at a time: one of them fails the cluster over and back. Some start nodes
# of their own, of the same server.
server_binaries "$flavor"
RCS_SEEDS=$(cluster_seeds "$base") RCS_SERVER_BIN=$SERVER_BIN "$test_bin" --ignored --skip lock::model --test-threads=1 ||
    status=1
# MONITOR formats every argument: a multi-MB session would block the primary
# for seconds. Those tests run once it has stopped.
multi_mb=("$ROOT"/php-tests/{032,039,043}-*.phpt)
monitored=()
for test in "$ROOT"/php-tests/*.phpt; do
    [[ " ${multi_mb[*]} " == *" $test "* ]] || monitored+=("$test")
done
"$ROOT/scripts/php-tests.sh" "$flavor" "${monitored[@]}" || status=1
kill "$monitor_pid"
wait "$monitor_pid" 2>/dev/null || true
php "$ROOT/scripts/keys-monitor.php" check "$monitor_dir" || status=1
rm -rf "$monitor_dir"
"$ROOT/scripts/php-tests.sh" "$flavor" "${multi_mb[@]}" || status=1
acl_pass=$(acl_user "$flavor" "$base")
mapfile -t acl <<<"$(acl_tests)"
RCS_ACL_USER=rcs_sessions RCS_ACL_PASS="$acl_pass" "$ROOT/scripts/php-tests.sh" "$flavor" "${acl[@]}" 2>&1 |
    sed -u 's/^/[ACL user] /' || status=1
exit "$status"
