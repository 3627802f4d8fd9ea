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

# RCS_FLAVOR: for tests that stop and start nodes with scripts/cluster.sh.
export RCS_SEEDS=$(cluster_seeds "$base") RCS_FLAVOR=$flavor RCS_EXT=$EXT_SO NO_INTERACTION=1 REPORT_EXIT_STATUS=1
if [ -n "${RCS_PHP_PREFIX:-}" ]; then
    # A PHP of scripts/php-builds.sh: Debian's php-fpm and mod_php cannot
    # load modules built for it.
    run_tests=$RCS_PHP_PREFIX/lib/run-tests.php
    export RCS_NO_FPM="php-fpm is Debian's own build, not this PHP's" \
        RCS_NO_APACHE="Debian's mod_php is its own build, not this PHP's"
else
    run_tests=$(php-config --extension-dir)/build/run-tests.php
fi
# The tests that read or write through phpredis skip where it is missing.
phpredis=$(phpredis_modules)
export RCS_PHPREDIS=${phpredis// /,}
[ -n "$phpredis" ] || export RCS_NO_PHPREDIS="phpredis is not built for PHP $(php_minor_version) here"
# run-tests.php writes each test's script and output beside its .phpt and
# deletes them once it passed: runs side by side (test.sh has several) each
# get a copy of the tests, with the scripts they call at the same place.
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
cp -r "$ROOT/php-tests" "$copy/php-tests"
ln -s "$ROOT/scripts" "$copy/scripts"
tests=()
for test in "${@:-$ROOT/php-tests}"; do
    path=$(realpath -m "$test")
    [[ $path == "$ROOT/php-tests"* ]] && path=$copy/php-tests${path#"$ROOT/php-tests"}
    tests+=("$path")
done
log "php tests on the $flavor cluster ($RCS_SEEDS), PHP $("$PHP" -r 'echo PHP_VERSION, PHP_ZTS ? " ZTS" : "", PHP_DEBUG ? " debug" : "";')"
"$PHP" "$run_tests" -q -n -p "$PHP" -d "extension=$EXT_SO" --show-diff --show-slow 1000 "${tests[@]}"
