#!/usr/bin/env bash
# The Rust cluster tests and the whole .phpt suite on Debian 13 (PHP 8.4 with
# its php-fpm and phpredis 6.2) against a Redis 8.0 cluster on BASE_PORT
# (default 7800), a TLS one on BASE_PORT + 50 for the TLS tests, then the ACL
# user's tests. Runs inside the root of scripts/debian13.sh, which shares the
# host's network:
#   scripts/debian13.sh run scripts/debian13-tests.sh [--test-binary=PATH] [BASE_PORT] [TEST...]
# --test-binary: the host's build of the Rust tests (test_binary in lib.sh),
# which runs here too; without it they are built here.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
[ -f /etc/debian_version ] && [[ $(cat /etc/debian_version) == 13* ]] || die "run it through scripts/debian13.sh run"

test_bin=
if [[ ${1:-} == --test-binary=* ]]; then test_bin=${1#--test-binary=}; shift; fi
base=7800
if [[ ${1:-} =~ ^[0-9]+$ ]]; then base=$1; shift; fi
# Built for PHP 8.4 and Debian 13's libraries: a target directory of its own.
export CARGO_TARGET_DIR=$ROOT/target/debian13
"$ROOT/scripts/build.sh"
"$ROOT/scripts/pie-binaries.sh"
[ -n "$test_bin" ] || test_bin=$(test_binary)
# The TLS test's cluster beside it, with certificates of its own.
tls_base=$((base + 50)) tls_dir=$ROOT/.cluster/tls-certs-debian13
stop_all() {
    "$ROOT/scripts/cluster.sh" stop redis "$base"
    CLUSTER_TLS_DIR=$tls_dir "$ROOT/scripts/cluster.sh" stop redis "$tls_base"
}
trap stop_all EXIT
"$ROOT/scripts/tls-certs.sh" "$tls_dir"
CLUSTER_TLS_DIR=$tls_dir "$ROOT/scripts/cluster.sh" start redis "$tls_base"
"$ROOT/scripts/cluster.sh" start redis "$base"
# The Rust cluster tests first: what Redis 8.0 answers where the router sorts replies.
RCS_SEEDS=$(cluster_seeds "$base") RCS_SERVER_BIN=$(command -v redis-server) \
    "$test_bin" --ignored --skip lock::model --test-threads=1
RCS_TLS_DIR=$tls_dir RCS_TLS_SEEDS=$(cluster_seeds "$tls_base") "$ROOT/scripts/php-tests.sh" redis "$base" "$@"
# Then the ACL user's tests, as on the other servers.
if [ $# -eq 0 ]; then
    mapfile -t acl <<<"$(acl_tests)"
    acl_pass=$(acl_user redis "$base")
    RCS_ACL_USER=rcs_sessions RCS_ACL_PASS=$acl_pass "$ROOT/scripts/php-tests.sh" redis "$base" "${acl[@]}"
fi
