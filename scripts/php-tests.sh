#!/usr/bin/env bash
# Runs the .phpt tests with PHP's run-tests.php against a running cluster.
#   scripts/php-tests.sh FLAVOR [BASE_PORT] [TEST...]
set -euo pipefail
. "$(dirname "$0")/lib.sh"

flavor=${1:?usage: scripts/php-tests.sh redis|valkey [BASE_PORT] [TEST...]}
shift
base=$(default_base_port "$flavor")
if [[ ${1:-} =~ ^[0-9]+$ ]]; then base=$1; shift; fi
[ -f "$EXT_SO" ] || die "build first: scripts/build.sh"

export RCS_SEEDS=$(cluster_seeds "$base") RCS_EXT=$EXT_SO NO_INTERACTION=1 REPORT_EXIT_STATUS=1
run_tests=$(php-config --extension-dir)/build/run-tests.php
log "php tests on the $flavor cluster ($RCS_SEEDS)"
php "$run_tests" -q -n -p "$(command -v php)" -d "extension=$EXT_SO" \
    --show-diff "${@:-$ROOT/php-tests}"
