#!/usr/bin/env bash
# Builds the Debian package of the extension for the PHP this machine runs on,
# the way Debian builds PHP extensions (dh-php, see debian/rules):
#   scripts/deb.sh            -> target/deb/debian<release>/php<ver>-rediscluster-session_*.deb
# (debian12, debian13, debian-sid: each release's packages apart, as the
# Debian roots of scripts/debian-root.sh share this checkout). It lays out a
# build tree in build/ there (the tracked source, debian/,
# the crates vendored on the host by scripts/vendor.sh and a .cargo/config.toml
# that points cargo at them), builds it offline with dpkg-buildpackage, copies the .debs
# beside it and runs lintian on them (failing on an error).
#
# Toolchain (RCS_DEB_TOOLCHAIN): "debian" builds with Debian's cargo and rustc
# (on Debian 12 the newer cargo-web/rustc-web, installed here if missing),
# "rustup" with the rustup toolchain (its cargo is then not a Build-Depends
# Debian can check: dpkg-buildpackage runs with -d). The default, "auto", takes
# Debian's when it is at least the crate's rust-version, otherwise rustup's.
# The binary package depends on neither.
#
# Other settings: RCS_DEB_INSTALL_DEPS=0 does not apt-get the build
# dependencies; CARGO_TARGET_DIR=DIR keeps cargo's build cache there between
# runs, and the build tree in it (by default each run builds from scratch
# inside the build tree, in build/ beside the packages).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
# lib.sh exports the PHP to build for; the package build names its own per version.
unset PHP_CONFIG PHP

msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml")
crate_version=$(sed -n '/^\[package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml")
deb_version=$(dpkg-parsechangelog -l "$ROOT/debian/changelog" -SVersion)
[ "${deb_version%%-*}" = "$crate_version" ] ||
    die "debian/changelog is at ${deb_version%%-*}, Cargo.toml at $crate_version: add a changelog entry"

if [ "${RCS_DEB_INSTALL_DEPS:-1}" = 1 ]; then
    install_packages build-essential dpkg-dev debhelper dh-php php-all-dev libclang-dev lintian xml2 git
fi

version_ge() { dpkg --compare-versions "$1" ge "$2"; }
cargo_version() { "$1" --version 2>/dev/null | awk '{print $2}'; }

# Picks the toolchain: sets PATH so that cargo and rustc are the chosen ones.
toolchain=${RCS_DEB_TOOLCHAIN:-auto}
system_path=$(tr ':' '\n' <<<"$PATH" | grep -v '/\.cargo/bin$' | paste -sd:)
if [ "$toolchain" != rustup ]; then
    debian_cargo=$(PATH=$system_path cargo_version cargo || true)
    # Installs Debian's toolchain when the archive has a new enough one: cargo
    # and rustc (Debian 13's are 1.85), or on Debian 12 cargo-web and rustc-web,
    # which take the place of bookworm's 1.63 with a newer Rust.
    for pair in "cargo rustc" "cargo-web rustc-web"; do
        version_ge "${debian_cargo:-0}" "$msrv" && break
        candidate=$(apt-cache show --no-all-versions "${pair%% *}" 2>/dev/null | sed -n 's/^Version: //p')
        if [ -n "$candidate" ] && version_ge "$candidate" "$msrv"; then
            # cargo-web and rustc-web conflict with cargo and rustc: apt would
            # remove an installed Debian Rust (and what needs it) to make room.
            if [ "$pair" = "cargo-web rustc-web" ] && dpkg-query -W -f='${Status}\n' cargo rustc 2>/dev/null | grep -q 'install ok installed'; then
                die "Debian's cargo/rustc ($debian_cargo) are installed and older than $msrv; cargo-web and rustc-web would replace them: install those yourself, or RCS_DEB_TOOLCHAIN=rustup"
            fi
            # shellcheck disable=SC2086 # two package names
            install_packages $pair
            debian_cargo=$(PATH=$system_path cargo_version cargo || true)
        fi
    done
    if version_ge "${debian_cargo:-0}" "$msrv"; then
        toolchain=debian
    elif [ "$toolchain" = debian ]; then
        die "Debian's cargo is ${debian_cargo:-missing}, below the crate's rust-version $msrv"
    fi
fi
buildpackage_opts=(-b -us -uc)
if [ "$toolchain" = debian ]; then
    export PATH=$system_path
    log "toolchain: Debian's $(cargo --version), $(rustc --version)"
else
    rustup_bin=${CARGO_HOME:-$HOME/.cargo}/bin
    [ -x "$rustup_bin/cargo" ] || die "no cargo >= $msrv: install rustup's toolchain or Debian's cargo-web"
    export PATH=$rustup_bin:$PATH
    # debhelper sets HOME to a scratch directory: the rustup proxies need their home.
    export RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup}
    version_ge "$(cargo_version cargo)" "$msrv" || die "rustup's cargo is below the crate's rust-version $msrv"
    # Build-Depends names Debian's cargo/rustc, which this build does not use.
    buildpackage_opts+=(-d)
    log "toolchain: rustup's $(cargo --version), $(rustc --version) (Build-Depends not checked)"
fi

. /etc/os-release
out=$(deb_dir)
# The build tree sits in a kept CARGO_TARGET_DIR when there is one: cargo
# keys the vendored crates' cache by their path, which must not depend on the
# checkout's.
build=$out/build
[ -z "${CARGO_TARGET_DIR:-}" ] || build=$CARGO_TARGET_DIR/deb-build
tree=$build/php-rediscluster-session-$crate_version
src=$tree/rediscluster_session-$crate_version
# One build at a time per tree: another checkout's run (a CI job beside a
# hand-run one in the same root) would delete this one's tree.
mkdir -p "$(dirname "$build")"
exec 9>"$build.lock"
flock 9
rm -rf "$build"
mkdir -p "$src" "$out"
rm -f "$out"/*.deb "$out"/lintian.txt "$out"/build.log

# The source as committed (and any new files not ignored), without debian/.
(cd "$ROOT" && git ls-files -co --exclude-standard -z -- . ':!debian' | xargs -0 tar -cf -) | tar -xf - -C "$src"
cp -a "$ROOT/debian" "$tree/debian"
# For the PHP it runs on (php-config on PATH: the release's PHP, or the newest
# of several), whatever other PHP versions are installed.
php_version=$(php-config --version | cut -d. -f1,2)
[[ " $(sed -n 's/^X-PHP-Versions: //p' "$ROOT/debian/control.in") " == *" $php_version "* ]] ||
    die "PHP $php_version is not among debian/control.in's X-PHP-Versions"
sed -i "s/^X-PHP-Versions: .*/X-PHP-Versions: $php_version\nX-PHP-Default-Version: $php_version/" "$tree/debian/control.in"
# debian/control, from control.in, as the package build itself makes it.
(cd "$tree" && /usr/share/dh-php/gen-control -a)

# A stable release gets its own version (~deb12 < ~deb13 < the unstable
# upload), so the arch-all php-rediscluster-session of two releases never
# share a version with different dependencies.
if [ -n "${VERSION_ID:-}" ] && [ "${ID:-}" = debian ]; then
    entry=$(mktemp)
    {
        printf 'php-rediscluster-session (%s~deb%s) %s; urgency=medium\n\n' "$deb_version" "$VERSION_ID" "$VERSION_CODENAME"
        printf '  * Built for Debian %s.\n\n' "$VERSION_ID"
        # Dated by the commit built, and after the entry it follows.
        date=$(git -C "$ROOT" log -1 --format=%ct)
        previous=$(dpkg-parsechangelog -l "$ROOT/debian/changelog" -STimestamp)
        [ "$date" -gt "$previous" ] || date=$((previous + 1))
        printf ' -- %s  %s\n\n' "$(dpkg-parsechangelog -l "$ROOT/debian/changelog" -SMaintainer)" \
            "$(LC_ALL=C date -u -R -d "@$date")"
        cat "$tree/debian/changelog"
    } >"$entry"
    mv "$entry" "$tree/debian/changelog"
fi

# Every crate the build needs, in the build tree: the build itself is offline.
# Vendored on the host (in a Debian root, only found there).
cp -a "$("$ROOT/scripts/vendor.sh")" "$tree/vendor"
rm "$tree/vendor/.cargo-lock-sha256"
mkdir -p "$tree/.cargo"
cat >"$tree/.cargo/config.toml" <<'EOF'
[source.crates-io]
replace-with = "vendored-sources"

[source.vendored-sources]
directory = "vendor"
EOF

# debian/copyright ends with the crates linked into the module (proc-macros
# and build tools are not), with their authors and licenses as they declare.
host=$(rustc -vV | sed -n 's/^host: //p')
(cd "$tree" && CARGO_NET_OFFLINE=true cargo tree --locked --manifest-path "$src/Cargo.toml" \
    -e normal,no-proc-macro --target "$host" --prefix none --no-dedupe -f '{p}|{l}') |
    sed 's/ (.*)//; s/ v/|/' | sort -u | while IFS='|' read -r name version license; do
        [ "$name" != rediscluster_session ] || continue
        dir=vendor/$name-$version
        [ -d "$tree/$dir" ] || die "$dir: not vendored"
        authors=$(awk '/^authors = \[/ { on = 1 } on { print } on && /\]/ { exit }' "$tree/$dir/Cargo.toml" |
            grep -o '"[^"]*"' | tr -d '"' | sed 's/ *<[^>]*>//' || true)
        # SPDX expressions in debian/copyright's syntax: "MIT or Apache-2.0".
        license=$(sed 's/) AND /), and /g; s/ OR / or /g; s/ AND / and /g; s,MIT/Apache-2.0,MIT or Apache-2.0,; s/[()]//g' <<<"$license")
        printf '\nFiles: %s/*\nCopyright: %s\nLicense: %s\n' "$dir" \
            "$(sed '2,$s/^/ /' <<<"${authors:-the $name developers}")" "$license"
    done >>"$tree/debian/copyright"
# The C libraries bundled inside crates, after their crate's paragraph (the
# last matching paragraph applies).
zstd=$(cd "$tree" && ls -d vendor/zstd-sys-*) lz4=$(cd "$tree" && ls -d vendor/lz4-sys-*)
cat >>"$tree/debian/copyright" <<EOF

Files: $zstd/zstd/*
Copyright: Meta Platforms, Inc. and affiliates
License: BSD-3-Clause or GPL-2

Files: $lz4/liblz4/*
Copyright: 2011-2020 Yann Collet
License: BSD-2-Clause
EOF

log "building in $tree"
start=$(date +%s)
(cd "$tree" && dpkg-buildpackage "${buildpackage_opts[@]}") >"$out/build.log" 2>&1 ||
    { tail -60 "$out/build.log"; die "dpkg-buildpackage failed (log: $out/build.log)"; }
log "built in $(($(date +%s) - start)) s (log: $out/build.log)"

cp "$build"/*.deb "$out/"
changes=$(ls "$build"/*.changes)
for deb in "$out"/*.deb; do
    log "$(basename "$deb")"
    dpkg-deb -f "$deb" Package Version Architecture Depends Pre-Depends | sed 's/^/    /' >&2
done

log "lintian"
status=0
lintian --display-info --pedantic --fail-on error "$changes" >"$out/lintian.txt" 2>&1 || status=$?
cat "$out/lintian.txt"
[ "$status" = 0 ] || die "lintian failed (exit $status)"
log "lintian: no errors; packages in $out"
