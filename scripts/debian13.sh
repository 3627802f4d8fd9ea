#!/usr/bin/env bash
# A Debian 13 "trixie" root (PHP 8.4 with php-fpm and Apache's mod_php,
# phpredis 6.2, Redis 8.0),
# made once per machine in a cache outside the checkout, and commands run in it:
#   scripts/debian13.sh root            makes the root if needed, prints its path
#   scripts/debian13.sh run COMMAND...  runs COMMAND in the root, in this checkout
# Debian 13's source packages are not served here, so its PHP is Debian's own
# build (NTS, no debug, no ZTS). Its rustc (1.85) is older than the build needs:
# the host's toolchain is bind-mounted in. Every mount lives in a private mount
# namespace that ends with the command, whatever way it exits, so none outlives
# it and nothing can reach the host's files through the root afterwards.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

CACHE=${RCS_CACHE:-$HOME/.cache/rediscluster_session}
DEBIAN13=$CACHE/debian13-root
PACKAGES=(php8.4-cli php8.4-dev php8.4-fpm php8.4-igbinary php-redis redis-server nginx apache2 libapache2-mod-php8.4
    libclang-dev gcc libc6-dev curl openssl procps python3-prometheus-client)

make_root() {
    [ "$(cat "$DEBIAN13/.complete" 2>/dev/null)" = "${PACKAGES[*]}" ] && return
    mkdir -p "$CACHE"
    if [ ! -f "$DEBIAN13/.complete" ]; then
        # debootstrap works aside; a root it left without .complete is made again.
        install_packages debootstrap
        local mirror work
        mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources | head -1)
        [ -n "$mirror" ] || die "no Debian mirror in /etc/apt/sources.list.d/debian.sources"
        log "making a Debian 13 root in $DEBIAN13 (about 3 minutes, 600 MB)"
        work=$(mktemp -d "$CACHE/debian13-new.XXXXXX")
        as_root debootstrap --variant=minbase --include=ca-certificates trixie "$work" "$mirror" >"$work.log" 2>&1 ||
            { tail -20 "$work.log"; die "debootstrap failed (log: $work.log)"; }
        rm -f "$work.log"
        as_root cp /etc/resolv.conf "$work/etc/resolv.conf"
        if [ -e "$DEBIAN13" ]; then
            unmounted "$DEBIAN13"
            as_root rm -rf --one-file-system "$DEBIAN13"
        fi
        as_root mv "$work" "$DEBIAN13"
    fi
    # mktemp -d made it 0700: Apache's children (www-data) must enter it.
    as_root chmod 755 "$DEBIAN13"
    log "installing Debian 13's packages in $DEBIAN13"
    local apt="apt-get -o APT::Sandbox::User=root"
    in_root "$DEBIAN13" sh -c "$apt update -qq && DEBIAN_FRONTEND=noninteractive $apt install -y -qq \
        --no-install-recommends ${PACKAGES[*]} >/dev/null" || die "installing Debian 13's packages failed"
    echo "${PACKAGES[*]}" | as_root tee "$DEBIAN13/.complete" >/dev/null
}

# Dies if anything is mounted at or under DIR: rm -rf would delete the host's
# files through it.
unmounted() {
    # grep reads to the end: -q would stop early and fail findmnt with SIGPIPE.
    if findmnt -rn -o TARGET | grep "^$(realpath "$1")\(/\|$\)" >/dev/null; then
        die "something is mounted under $1; not deleting it"
    fi
}

# in_root DIR COMMAND...: COMMAND in the root DIR, as root, with /proc, /dev,
# the host's Rust toolchain and this checkout mounted in a mount namespace of
# its own, which the kernel tears down with its last process.
in_root() {
    local root=$1
    shift
    local cargo_home rustup_home
    cargo_home=${CARGO_HOME:-$(dirname "$(dirname "$(command -v cargo)")")}
    rustup_home=${RUSTUP_HOME:-$(rustup show home 2>/dev/null || echo "$HOME/.rustup")}
    # shellcheck disable=SC2016
    as_root unshare --mount --propagation private -- env ROOTFS="$root" CHECKOUT="$ROOT" \
        CARGO_SRC="$cargo_home" RUSTUP_SRC="$rustup_home" bash -euc '
        mkdir -p "$ROOTFS/proc" "$ROOTFS/dev" "$ROOTFS/root/.cargo" "$ROOTFS/root/.rustup" "$ROOTFS$CHECKOUT"
        mount -t proc proc "$ROOTFS/proc"
        mount --rbind /dev "$ROOTFS/dev"
        mount --bind "$CARGO_SRC" "$ROOTFS/root/.cargo"
        mount --bind "$RUSTUP_SRC" "$ROOTFS/root/.rustup"
        mount --bind "$CHECKOUT" "$ROOTFS$CHECKOUT"
        exec chroot "$ROOTFS" env -i HOME=/root TERM="${TERM:-dumb}" CI="${CI:-}" \
            PATH=/root/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
            bash -c "cd \"\$0\" && exec \"\$@\"" "$CHECKOUT" "$@"
    ' bash "$@"
}

case ${1:-} in
    root)
        make_root
        echo "$DEBIAN13"
        ;;
    run)
        shift
        [ $# -gt 0 ] || die "usage: scripts/debian13.sh run COMMAND..."
        make_root
        in_root "$DEBIAN13" "$@"
        ;;
    *) die "usage: scripts/debian13.sh root | run COMMAND..." ;;
esac
