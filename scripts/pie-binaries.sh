#!/usr/bin/env bash
# The release archives PIE's pre-packaged-binary method downloads, for the PHP
# this runs on (the host's 8.2; scripts/debian-tests.sh runs it for 8.4 and
# 8.5), from the module tested (EXT_SO: the release build, or the Debian
# package's in the roots), into target/pie/ with a SHA256SUMS
# line each; then each archive is unpacked and its module loaded by that PHP.
#   scripts/pie-binaries.sh
# Names as PIE 1.3+ looks for them on Linux (src/Platform/PrePackagedBinaryAssetName.php):
#   php_{extension}-{version}_php{major.minor}-{arch}-linux-{glibc|musl}[-zts].tgz
# with the module, {extension}.so, at the archive's root, and beside it the
# README and the documents it links to (docs/), as in the repository, so that
# its links resolve in the unpacked archive. Release builds of
# PHP here are NTS only, so no -zts archive is made. Checked against PIE's
# source and documentation only: PIE cannot be installed here.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ -f "$EXT_SO" ] || die "build first: scripts/build.sh"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -1)
read -r php_version zts arch < <("$PHP" -n -r 'echo PHP_MAJOR_VERSION, ".", PHP_MINOR_VERSION, " ", (int)PHP_ZTS, " ", php_uname("m"), "\n";')
[ "$zts" = 0 ] || die "a ZTS PHP: its module is not released here"
# glibc's loader names itself; musl's does not (and is not built here).
libc=glibc
ldd --version 2>&1 | grep -qi musl && libc=musl
name="php_rediscluster_session-${version}_php${php_version}-${arch}-linux-${libc}.tgz"
out="${CARGO_TARGET_DIR:-$ROOT/target}/pie"
mkdir -p "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp "$EXT_SO" "$stage/rediscluster_session.so"
cp "$ROOT/README.md" "$stage/README.md"
cp -R "$ROOT/docs" "$stage/docs"
# Reproducible: fixed owner, order and times.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$stage" -czf "$out/$name" \
    rediscluster_session.so README.md docs
(cd "$out" && sha256sum "$name" >"$name.sha256" && cat ./*.tgz.sha256 >SHA256SUMS)

# As PIE would: unpack, take the module from the root, load it in this PHP.
check=$(mktemp -d -p "$stage")
tar -xzf "$out/$name" -C "$check"
(cd "$out" && sha256sum --quiet -c "$name.sha256") || die "$name: checksum does not match"
loaded=$("$PHP" -n -d "extension=$check/rediscluster_session.so" -r \
    'echo extension_loaded("rediscluster_session") ? PHP_MAJOR_VERSION . "." . PHP_MINOR_VERSION : "no";') ||
    die "$name: the module does not load in PHP $php_version"
[ "$loaded" = "$php_version" ] || die "$name: the module does not load in PHP $php_version"
# Every document the README links to is in the archive.
for doc in $(grep -o '](docs/[^)#]*' "$check/README.md" | cut -c3- | sort -u); do
    [ -f "$check/$doc" ] || die "$name: the README links to $doc, which the archive lacks"
done
log "PIE archive: $out/$name loads in PHP $php_version"
