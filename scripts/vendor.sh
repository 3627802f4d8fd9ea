#!/usr/bin/env bash
# The crates of Cargo.lock, vendored once on the host for the package builds
# (scripts/deb.sh), which then build offline, as Debian builds do:
#   scripts/vendor.sh    -> prints the directory (target/vendor in this checkout)
# Vendoring is source preparation: it downloads with the host's cargo and the
# host's trust store. The Debian roots (scripts/debian-root.sh) see this
# checkout but not the CA certificates the host trusts (an inspecting proxy's,
# say), so there it only checks that the directory matches Cargo.lock.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

dir=$ROOT/target/vendor
want=$(sha256sum "$ROOT/Cargo.lock" | cut -d' ' -f1)
mkdir -p "$(dirname "$dir")"
# One vendoring at a time per checkout (they would share vendor.new).
exec 9>"$dir.lock"
flock 9
if [ "$(cat "$dir/.cargo-lock-sha256" 2>/dev/null)" != "$want" ]; then
    [ ! -f /srv/debian-root ] || die "the vendored crates are missing or older than Cargo.lock: run scripts/vendor.sh on the host first"
    log "vendoring the crates of Cargo.lock into $dir"
    rm -rf "$dir.new"
    cargo vendor --quiet --locked --versioned-dirs --manifest-path "$ROOT/Cargo.toml" "$dir.new" >/dev/null
    echo "$want" >"$dir.new/.cargo-lock-sha256"
    rm -rf "$dir"
    mv "$dir.new" "$dir"
fi
echo "$dir"
