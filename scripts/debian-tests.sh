#!/usr/bin/env bash
# The Rust cluster tests and the whole .phpt suite on a Debian root's PHP (with
# its php-fpm, and phpredis where the release has it) against a Redis cluster
# on BASE_PORT (default 7800), a TLS one on BASE_PORT + 50 for the TLS tests,
# then the ACL user's tests. Runs inside a root of scripts/debian-root.sh,
# which shares the host's network:
#   scripts/debian-root.sh ROOT run scripts/debian-tests.sh [--test-binary=PATH] [BASE_PORT] [TEST...]
# --test-binary: the host's build of the Rust tests (test_binary in lib.sh),
# which runs here too; without it they are built here.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
[ -f /srv/debian-root ] || die "run it through scripts/debian-root.sh ROOT run"

test_bin=
if [[ ${1:-} == --test-binary=* ]]; then test_bin=${1#--test-binary=}; shift; fi
base=7800
if [[ ${1:-} =~ ^[0-9]+$ ]]; then base=$1; shift; fi
# The module tested is the Debian package's, built here by scripts/deb.sh with
# cargo's cache kept in the root between runs (only this crate is built again).
# The PIE archive is made of it too.
CARGO_TARGET_DIR=/root/.cache/deb-target "$ROOT/scripts/deb.sh"
packages=$(deb_dir)
export CARGO_TARGET_DIR=$ROOT/target/$(cat /srv/debian-root)
rm -rf "$CARGO_TARGET_DIR/deb-module"
mkdir -p "$CARGO_TARGET_DIR"
# (The glob leaves out php8.X-rediscluster-session-dbgsym_*.)
dpkg-deb -x "$packages"/php*-rediscluster-session_*_amd64.deb "$CARGO_TARGET_DIR/deb-module"
RCS_EXT_SO=$(ls "$CARGO_TARGET_DIR"/deb-module/usr/lib/php/*/rediscluster_session.so) || die "no module in the package"
export RCS_EXT_SO
"$ROOT/scripts/pie-binaries.sh"
[ -n "$test_bin" ] || test_bin=$(test_binary)
# The TLS test's cluster beside it, with certificates of its own.
tls_base=$((base + 50)) tls_dir=$ROOT/.cluster/tls-certs-$(cat /srv/debian-root)
stop_all() {
    "$ROOT/scripts/cluster.sh" stop redis "$base"
    CLUSTER_TLS_DIR=$tls_dir "$ROOT/scripts/cluster.sh" stop redis "$tls_base"
}
trap stop_all EXIT
"$ROOT/scripts/tls-certs.sh" "$tls_dir"
CLUSTER_TLS_DIR=$tls_dir "$ROOT/scripts/cluster.sh" start redis "$tls_base"
"$ROOT/scripts/cluster.sh" start redis "$base"
# The Rust cluster tests first: what this Redis answers where the router sorts replies.
RCS_SEEDS=$(cluster_seeds "$base") RCS_SERVER_BIN=$(command -v redis-server) \
    "$test_bin" --ignored --skip lock::model --test-threads=1
RCS_TLS_DIR=$tls_dir RCS_TLS_SEEDS=$(cluster_seeds "$tls_base") "$ROOT/scripts/php-tests.sh" redis "$base" "$@"
# Then the ACL user's tests, as on the other servers.
if [ $# -eq 0 ]; then
    mapfile -t acl <<<"$(acl_tests)"
    acl_pass=$(acl_user redis "$base")
    RCS_ACL_USER=rcs_sessions RCS_ACL_PASS=$acl_pass "$ROOT/scripts/php-tests.sh" redis "$base" "${acl[@]}"
fi
