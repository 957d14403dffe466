#!/usr/bin/env bash
# Install / fetch everything the x86_64 nested-SVM CI needs. Idempotent;
# well under a second when everything is in place.
#
#   ci/x86_64-svm/setup.sh [--refresh]
#
#   --refresh   re-resolve and re-download the kernel and busybox even if
#               the cache already has them.
#
# Host side (system-wide, needs root or sudo):
#   * apt source for bookworm-backports (on bookworm: QEMU 10, kernel 6.12)
#   * qemu-system-x86 (>= 10) from backports, cpio, xz-utils, binutils
# Guest side (in the cache dir; downloaded with `apt-get download`, unpacked
# there, never installed on the host):
#   * Debian's linux-image-<ver>-amd64-unsigned (newest 6.12 in backports):
#     the vmlinuz and the modules KVM on AMD needs, unxz'ed, in load order
#     irqbypass, kvm, ccp, kvm-amd (kvm_amd needs ccp for SEV, built as
#     a module in Debian's config)
#   * busybox-static
# Result: $HYPCLEAR_X86_SVM_CACHE/env.sh (default target/x86_64-svm-ci/env.sh).
#
# Environment:
#   HYPCLEAR_X86_SVM_CACHE          cache dir (default <repo>/target/x86_64-svm-ci)
#   HYPCLEAR_X86_SVM_KERNEL_SERIES  kernel series to pick the newest of (6.12)
#   HYPCLEAR_X86_SVM_KERNEL_PKG     exact package instead, e.g.
#                                   linux-image-6.12.117+deb12-amd64-unsigned
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REFRESH=0
for arg in "$@"; do
    case "$arg" in
        --refresh) REFRESH=1 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) hc_die "unknown argument: $arg" ;;
    esac
done

KSERIES="${HYPCLEAR_X86_SVM_KERNEL_SERIES:-6.12}"
QEMU_MIN_MAJOR=10
MODULES=(virt/lib/irqbypass arch/x86/kvm/kvm drivers/crypto/ccp/ccp arch/x86/kvm/kvm-amd)
SETUP_T0="$(hc_now)"
[ "$(dpkg --print-architecture)" = amd64 ] || hc_die "the x86_64 SVM stage needs an amd64 host"

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || hc_die "not root and no sudo: cannot install packages"
    SUDO=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
APT_TARGET=()
[ "$(. /etc/os-release && echo "${VERSION_CODENAME:-}")" != bookworm ] || APT_TARGET=(-t bookworm-backports)

qemu_major() {
    command -v qemu-system-x86_64 >/dev/null || { echo 0; return; }
    qemu-system-x86_64 --version | awk 'NR == 1 { split($4, v, "."); print v[1] + 0 }'
}

hc_stage_begin "host packages"
MISSING=()
[ "$(qemu_major)" -ge "$QEMU_MIN_MAJOR" ] || MISSING+=(qemu-system-x86)
command -v cpio >/dev/null || MISSING+=(cpio)
command -v unxz >/dev/null || MISSING+=(xz-utils)
command -v timeout >/dev/null || MISSING+=(coreutils)
# readelf: run-in-qemu.sh copies a dynamically linked --bin's libraries.
command -v readelf >/dev/null || MISSING+=(binutils)
if [ "${#MISSING[@]}" -gt 0 ]; then
    hc_log "installing: ${MISSING[*]}"
    hc_ensure_backports ${SUDO[@]+"${SUDO[@]}"}
    "${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq
    "${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
        "${APT_TARGET[@]}" "${MISSING[@]}" >/dev/null
    [ "$(qemu_major)" -ge "$QEMU_MIN_MAJOR" ] ||
        hc_die "qemu-system-x86_64 is $(qemu-system-x86_64 --version | head -1), need >= $QEMU_MIN_MAJOR"
fi
hc_stage_end

have_guest_files() {
    [ -f "$HC_ENV_FILE" ] || return 1
    # shellcheck disable=SC1090
    ( . "$HC_ENV_FILE" && [ -f "$HC_KERNEL" ] && [ -x "$HC_BUSYBOX" ] &&
        for m in "${HC_MODULES[@]}"; do [ -f "$m" ] || exit 1; done &&
        [ "${HYPCLEAR_X86_SVM_KERNEL_PKG:-$HC_KERNEL_PKG}" = "$HC_KERNEL_PKG" ] )
}

if [ "$REFRESH" -eq 1 ] || ! have_guest_files; then
    hc_stage_begin "kernel + busybox download"
    mkdir -p "$HC_CACHE/debs"
    KPKG="${HYPCLEAR_X86_SVM_KERNEL_PKG:-}"
    if [ -z "$KPKG" ]; then
        pick() {
            apt-cache pkgnames "linux-image-$KSERIES" |
                grep -E "^linux-image-${KSERIES//./\\.}\.[0-9]+\+deb[0-9.]+-amd64-unsigned$" | sort -V | tail -1
        }
        KPKG="$(pick)"
        if [ -z "$KPKG" ]; then
            hc_ensure_backports ${SUDO[@]+"${SUDO[@]}"}
            "${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq
            KPKG="$(pick)"
        fi
        [ -n "$KPKG" ] || hc_die "no linux-image-$KSERIES*-amd64-unsigned package found"
    fi
    rm -f "$HC_CACHE"/debs/*.deb
    # `apt-get download` as root drops to _apt, which cannot write here.
    (cd "$HC_CACHE/debs" && apt-get -q -o APT::Sandbox::User=root download "$KPKG" busybox-static)
    hc_stage_end

    hc_stage_begin "extract"
    KDEB="$(ls "$HC_CACHE"/debs/linux-image-*.deb)"
    BDEB="$(ls "$HC_CACHE"/debs/busybox-static_*.deb)"
    KVER_DEB="$(dpkg-deb -f "$KDEB" Version)"
    KREL="${KPKG#linux-image-}"
    KREL="${KREL%-unsigned}"
    KDIR="$HC_CACHE/kernel/${KPKG}_${KVER_DEB#*:}"
    rm -rf "$KDIR.tmp" && mkdir -p "$KDIR.tmp"
    members=("./boot/vmlinuz-$KREL" "./boot/config-$KREL")
    for m in "${MODULES[@]}"; do members+=("./lib/modules/$KREL/kernel/$m.ko.xz"); done
    # Only these members: tar stops once it has them all (--occurrence),
    # instead of writing ~400 MB of modules.
    dpkg-deb --fsys-tarfile "$KDEB" 2>/dev/null |
        tar -x -C "$KDIR.tmp" --occurrence=1 "${members[@]}" || true
    for m in "${members[@]}"; do
        [ -s "$KDIR.tmp/$m" ] || hc_die "could not extract $m from $KDEB"
    done
    mods=()
    for m in "${MODULES[@]}"; do
        unxz "$KDIR.tmp/lib/modules/$KREL/kernel/$m.ko.xz"
        mods+=("$KDIR/lib/modules/$KREL/kernel/$m.ko")
    done
    rm -rf "$KDIR" && mv "$KDIR.tmp" "$KDIR"
    BBVER="$(dpkg-deb -f "$BDEB" Version)"
    BBDIR="$HC_CACHE/busybox/${BBVER#*:}"
    rm -rf "$BBDIR" && mkdir -p "$BBDIR" && dpkg -x "$BDEB" "$BBDIR"
    {
        echo "# generated by ci/x86_64-svm/setup.sh"
        printf 'HC_KERNEL=%q\n' "$KDIR/boot/vmlinuz-$KREL"
        printf 'HC_KERNEL_PKG=%q\n' "$KPKG"
        printf 'HC_KERNEL_VERSION=%q\n' "$KVER_DEB"
        printf 'HC_KERNEL_RELEASE=%q\n' "$KREL"
        printf 'HC_KERNEL_CONFIG=%q\n' "$KDIR/boot/config-$KREL"
        printf 'HC_MODULES=(%s)\n' "$(printf '%q ' "${mods[@]}")"
        printf 'HC_BUSYBOX=%q\n' "$BBDIR/bin/busybox"
        printf 'HC_BUSYBOX_VERSION=%q\n' "$BBVER"
    } >"$HC_ENV_FILE.tmp"
    mv "$HC_ENV_FILE.tmp" "$HC_ENV_FILE"
    rm -f "$HC_CACHE"/debs/*.deb
    hc_stage_end
fi

# shellcheck disable=SC1090
. "$HC_ENV_FILE"
hc_log "cache:    $HC_CACHE"
hc_log "qemu:     $(command -v qemu-system-x86_64) ($(qemu-system-x86_64 --version | head -1))"
hc_log "kernel:   $HC_KERNEL ($HC_KERNEL_PKG $HC_KERNEL_VERSION)"
hc_log "modules:  ${HC_MODULES[*]##*/}"
hc_log "busybox:  $HC_BUSYBOX ($HC_BUSYBOX_VERSION)"
hc_log "setup done in $(hc_elapsed "$SETUP_T0")s"
