#!/usr/bin/env bash
# Debian roots, each made once per machine in a cache outside the checkout, and
# commands run in them:
#   scripts/debian-root.sh NAME root             makes the root if needed, prints its path
#   scripts/debian-root.sh NAME run COMMAND...   runs COMMAND in the root, in this checkout
#   scripts/debian-root.sh NAME fresh DIR COMMAND...
#                                                runs COMMAND in a throwaway copy of the
#                                                root (an overlay, gone when it ends) with
#                                                DIR's files in /srv/given, in a PID
#                                                namespace of its own, with a minimal /dev
#                                                and the host's network (as root: a
#                                                clean machine, not a sandbox)
# The roots (NAME):
#   debian13   Debian 13 "trixie": PHP 8.4 with php-fpm and Apache's mod_php,
#              phpredis 6.2, Redis 8.0,
#              and what scripts/deb.sh builds a package with
#   php85      Debian "sid" with "experimental": PHP 8.5 with php-fpm and
#              Apache's mod_php, Redis,
#              and what scripts/deb.sh builds a package with (sid's default
#              PHP 8.4 comes with php-all-dev; "php" is 8.5, the newest)
#   minimal12, minimal13, minimal85
#              what a server of each has before the extension: php-cli, php-fpm
#              and redis-server, no compiler, no Rust (for installing a package)
# Debian does not serve these releases' source packages here, so their PHP is
# Debian's own build (NTS, no debug, no ZTS). Rust comes from the host (its
# toolchain is bind-mounted into "run"'s root) or, for packages, from Debian's
# cargo-web. Every mount lives in a private mount namespace that ends with the
# command, whatever way it exits, so none outlives it and nothing can reach the
# host's files through the root afterwards.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# What scripts/deb.sh needs to build and check a package (dh-php's Build-Depends
# and Debian's Rust >= the crate's rust-version: cargo-web on 12 and 13).
PACKAGING=(build-essential dpkg-dev debhelper dh-php libclang-dev lintian xml2 fakeroot git)
TESTING=(redis-server nginx apache2 libclang-dev gcc libc6-dev curl openssl procps strace python3-prometheus-client)

name=${1:-}
# Per root: the suite, whether experimental is added, and the packages (those
# named with /experimental come from there; php-common/sid, as experimental's
# php-common is for PHP 8.6 and breaks 8.5's).
case $name in
    debian13)
        suite=trixie experimental=no
        packages=(php8.4-cli php8.4-dev php8.4-fpm php8.4-igbinary php-redis php-all-dev libapache2-mod-php8.4 "${TESTING[@]}"
            "${PACKAGING[@]}" cargo-web rustc-web)
        ;;
    php85)
        suite=sid experimental=yes
        packages=(php8.5-cli/experimental php8.5-dev/experimental php8.5-fpm/experimental
            libapache2-mod-php8.5/experimental php-common/sid
            php-all-dev/sid "${TESTING[@]}" "${PACKAGING[@]}" cargo rustc)
        ;;
    minimal12) suite=bookworm experimental=no packages=(php-cli php-fpm redis-server) ;;
    minimal13) suite=trixie experimental=no packages=(php-cli php-fpm redis-server) ;;
    minimal85)
        suite=sid experimental=yes
        packages=(php8.5-cli/experimental php8.5-fpm/experimental php-common/sid redis-server)
        ;;
    *) die "usage: scripts/debian-root.sh debian13|php85|minimal12|minimal13|minimal85 root|run COMMAND...|fresh DIR COMMAND..." ;;
esac
shift
DIR=$CACHE/root-$name
# The old name of the Debian 13 root, made by earlier versions of this script.
[ "$name" != debian13 ] || [ -e "$DIR" ] || [ ! -e "$CACHE/debian13-root" ] || mv "$CACHE/debian13-root" "$DIR"

make_root() {
    local want="$suite ${packages[*]}"
    [ "$(cat "$DIR/.complete" 2>/dev/null)" = "$want" ] && return
    mkdir -p "$CACHE"
    if [ ! -f "$DIR/.complete" ]; then
        # debootstrap works aside; a root it left without .complete is made again.
        install_packages debootstrap
        local mirror work
        mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources | head -1)
        [ -n "$mirror" ] || die "no Debian mirror in /etc/apt/sources.list.d/debian.sources"
        log "making a Debian $suite root in $DIR (about 3 minutes)"
        # What an interrupted debootstrap left (nothing is ever mounted there).
        local stale
        for stale in "$CACHE/root-$name-new."*; do
            [ -d "$stale" ] || continue
            unmounted "$stale"
            as_root rm -rf --one-file-system "$stale" "$stale.log"
        done
        work=$(mktemp -d "$CACHE/root-$name-new.XXXXXX")
        as_root debootstrap --variant=minbase --include=ca-certificates "$suite" "$work" "$mirror" >"$work.log" 2>&1 ||
            { tail -20 "$work.log"; die "debootstrap failed (log: $work.log)"; }
        rm -f "$work.log"
        if [ "$experimental" = yes ]; then
            echo "deb $mirror experimental main" | as_root tee "$work/etc/apt/sources.list.d/experimental.list" >/dev/null
            # The mirror here serves sid and experimental as a snapshot whose
            # Release files are past their Valid-Until date.
            echo 'Acquire::Check-Valid-Until "false";' | as_root tee "$work/etc/apt/apt.conf.d/99snapshot" >/dev/null
        fi
        as_root cp /etc/resolv.conf "$work/etc/resolv.conf"
        if [ -e "$DIR" ]; then
            unmounted "$DIR"
            as_root rm -rf --one-file-system "$DIR"
        fi
        as_root mv "$work" "$DIR"
    fi
    # mktemp -d made it 0700: Apache's children (www-data) must enter it.
    as_root chmod 755 "$DIR"
    # No package starts its service (redis-server, php-fpm, Apache) in a root.
    printf '#!/bin/sh\nexit 101\n' | as_root tee "$DIR/usr/sbin/policy-rc.d" >/dev/null
    as_root chmod 755 "$DIR/usr/sbin/policy-rc.d"
    log "installing packages in the $name root ($DIR)"
    local apt="apt-get -o APT::Sandbox::User=root"
    # Recommends stay out: a server built from these lists has only what it names.
    # dpkg --configure -a first: an install that was killed half-way (test.sh
    # ends its jobs when it stops early) leaves dpkg waiting for it.
    in_root "$DIR" "" sh -c "dpkg --configure -a && $apt update -qq && DEBIAN_FRONTEND=noninteractive \
        $apt install -y -qq --no-install-recommends ${packages[*]} >/dev/null" ||
        die "installing the $name root's packages failed"
    # Tells scripts/debian-tests.sh which root it runs in.
    echo "$name" | as_root tee "$DIR/srv/debian-root" >/dev/null
    echo "$want" | as_root tee "$DIR/.complete" >/dev/null
}

# Dies if anything is mounted at or under DIR: rm -rf would delete the host's
# files through it.
unmounted() {
    # grep reads to the end: -q would stop early and fail findmnt with SIGPIPE.
    if findmnt -rn -o TARGET | grep "^$(realpath "$1")\(/\|$\)" >/dev/null; then
        die "something is mounted under $1; not deleting it"
    fi
}

# in_root ROOT MODE COMMAND...: COMMAND in ROOT, as root, with /proc and /dev
# mounted in a mount namespace of its own, which the kernel tears down with its
# last process. MODE "checkout": the host's Rust toolchain and this checkout
# mounted too, COMMAND run in the checkout; "fresh:DIR": ROOT seen through an
# overlay whose changes go to a scratch directory removed afterwards, DIR's
# files in /srv/given, COMMAND run there; "": nothing more.
in_root() {
    local root=$1 mode=$2
    shift 2
    local cargo_home rustup_home scratch=
    cargo_home=${CARGO_HOME:-$(dirname "$(dirname "$(command -v cargo)")")}
    rustup_home=${RUSTUP_HOME:-$(rustup show home 2>/dev/null || echo "$HOME/.rustup")}
    if [[ $mode == fresh:* ]]; then
        scratch=$(mktemp -d "$CACHE/fresh-$name.XXXXXX")
        # shellcheck disable=SC2064 # the path is fixed now
        trap "unmounted '$scratch'; as_root rm -rf --one-file-system '$scratch'" EXIT
    fi
    # A fresh copy also gets a PID namespace of its own (no host process is
    # seen or signalled, and whatever it starts ends with it) and a /dev of a
    # few character devices. A checkout run shares the host's processes: the
    # pid files of the clusters it starts are read on the host.
    local isolate=()
    [ -z "$scratch" ] || isolate=(--pid --fork)
    # shellcheck disable=SC2016
    as_root unshare --mount --propagation private "${isolate[@]}" -- env ROOTFS="$root" MODE="$mode" CHECKOUT="$ROOT" \
        SCRATCH="$scratch" CARGO_SRC="$cargo_home" RUSTUP_SRC="$rustup_home" bash -euc '
        workdir=/
        if [ "$MODE" = checkout ]; then
            mkdir -p "$ROOTFS/root/.cargo" "$ROOTFS/root/.rustup" "$ROOTFS$CHECKOUT"
            mount --bind "$CARGO_SRC" "$ROOTFS/root/.cargo"
            mount --bind "$RUSTUP_SRC" "$ROOTFS/root/.rustup"
            mount --bind "$CHECKOUT" "$ROOTFS$CHECKOUT"
            workdir=$CHECKOUT
        elif [ -n "$SCRATCH" ]; then
            mkdir -p "$SCRATCH/upper" "$SCRATCH/work" "$SCRATCH/merged"
            mount -t overlay overlay -o "lowerdir=$ROOTFS,upperdir=$SCRATCH/upper,workdir=$SCRATCH/work" "$SCRATCH/merged"
            ROOTFS=$SCRATCH/merged
            mkdir -p "$ROOTFS/srv/given"
            cp -r "${MODE#fresh:}/." "$ROOTFS/srv/given/"
            workdir=/srv/given
        fi
        mkdir -p "$ROOTFS/proc" "$ROOTFS/dev"
        mount -t proc proc "$ROOTFS/proc"
        if [ -n "$SCRATCH" ]; then
            mount -t tmpfs -o mode=755,nosuid dev "$ROOTFS/dev"
            for node in null zero full random urandom tty; do
                touch "$ROOTFS/dev/$node"
                mount --bind "/dev/$node" "$ROOTFS/dev/$node"
            done
            mkdir -p "$ROOTFS/dev/shm" "$ROOTFS/dev/pts"
            mount -t tmpfs -o mode=1777,nosuid,nodev shm "$ROOTFS/dev/shm"
        else
            mount --rbind /dev "$ROOTFS/dev"
        fi
        exec chroot "$ROOTFS" env -i HOME=/root TERM="${TERM:-dumb}" CI="${CI:-}" \
            PATH=/root/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
            bash -c "cd \"\$0\" && exec \"\$@\"" "$workdir" "$@"
    ' bash "$@"
}

case ${1:-} in
    root)
        make_root
        echo "$DIR"
        ;;
    run)
        shift
        [ $# -gt 0 ] || die "usage: scripts/debian-root.sh $name run COMMAND..."
        make_root
        in_root "$DIR" checkout "$@"
        ;;
    fresh)
        shift
        [ $# -gt 1 ] && [ -d "$1" ] || die "usage: scripts/debian-root.sh $name fresh DIR COMMAND..."
        make_root
        given=$(realpath "$1")
        shift
        in_root "$DIR" "fresh:$given" "$@"
        ;;
    *) die "usage: scripts/debian-root.sh $name root | run COMMAND... | fresh DIR COMMAND..." ;;
esac
