#!/usr/bin/env bash
# The whole .phpt suite on PHP's debug builds (scripts/php-builds.sh), NTS and
# ZTS, each with the extension built for it: engine assertions on, leaks
# reported. On a Redis cluster of its own on BASE_PORT (default 7700), so that
# it can run beside the other suites; each line of a build's run starts with
# its name.
#   scripts/debug-php-tests.sh [BASE_PORT]
set -euo pipefail
. "$(dirname "$0")/lib.sh"

base=${1:-7700}
builds=$("$ROOT/scripts/php-builds.sh")
mapfile -t prefixes <<<"$builds"
trap '"$ROOT/scripts/cluster.sh" stop redis "$base"' EXIT
"$ROOT/scripts/cluster.sh" start redis "$base"
status=0
for prefix in "${prefixes[@]}"; do
    label="[$(basename "$prefix")] "
    RCS_PHP_PREFIX=$prefix "$ROOT/scripts/build.sh" 2>&1 | sed "s|^|$label|"
    RCS_PHP_PREFIX=$prefix "$ROOT/scripts/php-tests.sh" redis "$base" 2>&1 | sed "s|^|$label|" || status=1
done
exit "$status"
