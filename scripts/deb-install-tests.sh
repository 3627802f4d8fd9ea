#!/usr/bin/env bash
# The Debian packages that scripts/deb.sh wrote (target/deb/debian12, debian13,
# debian-sid), installed as a user would: each in a fresh copy of a minimal
# root of its release (php-cli, php-fpm and redis-server; no compiler, no
# Rust), through scripts/deb-install-check.sh, against a Redis cluster started
# here on BASE_PORT (default 8100); and each refused by another release's PHP.
#   scripts/deb-install-tests.sh [BASE_PORT] [RELEASE...]   (RELEASE: 12 13 sid)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

base=8100
if [[ ${1:-} =~ ^[0-9]+$ ]]; then base=$1; shift; fi
releases=("$@")
[ $# -gt 0 ] || releases=(12 13 sid)
minimal_root() { case $1 in 12) echo minimal12 ;; 13) echo minimal13 ;; sid) echo minimal85 ;; esac; }
# A release whose PHP has another ABI than $1's (none of Debian's releases here
# has two PHPs).
other() { case $1 in 12) echo 13 ;; *) echo 12 ;; esac; }

given=$(mktemp -d)
trap '"$ROOT/scripts/cluster.sh" stop redis "$base"; rm -rf "$given"' EXIT
"$ROOT/scripts/cluster.sh" start redis "$base"
seeds=$(cluster_seeds "$base")

# check RELEASE_OF_PACKAGES ROOT MODE [ARG]: the packages, the check script and
# nothing else in a fresh copy of ROOT.
check() {
    local dir
    dir=$(deb_dir "$1")
    compgen -G "$dir/php*-rediscluster-session_*_amd64.deb" >/dev/null || die "no package in $dir: run scripts/deb.sh there first"
    rm -rf "${given:?}"/*
    cp "$dir"/php-rediscluster-session_*_all.deb "$dir"/php*-rediscluster-session_*_amd64.deb "$given/"
    cp "$ROOT/scripts/deb-install-check.sh" "$given/"
    "$ROOT/scripts/debian-root.sh" "$2" fresh "$given" ./deb-install-check.sh "${@:3}"
}
for release in "${releases[@]}"; do
    root=$(minimal_root "$release")
    [ -n "$root" ] || die "unknown release $release (12, 13 or sid)"
    log "Debian $release's package on a fresh $root root"
    check "$release" "$root" install "$seeds"
    log "Debian $(other "$release")'s package on a fresh $root root: refused"
    check "$(other "$release")" "$root" refuse
done
