#!/usr/bin/env bash
# Install / fetch everything the aarch64 QEMU+KVM CI needs. Idempotent; fast
# (well under a second) when everything is already in place.
#
#   ci/aarch64/setup.sh [--refresh]
#
#   --refresh   re-resolve and re-download the arm64 kernels and busybox even
#               if the cache already has them.
#
# Host side (system-wide, needs root or sudo):
#   * apt source for <codename>-backports (bookworm only: QEMU 7.2 lacks
#     FEAT_MOPS in `-cpu max`, and installing it would replace the preinstalled
#     qemu-utils 10 from backports)
#   * qemu-system-arm (>= 10) from backports, gcc-aarch64-linux-gnu,
#     libc6-dev-arm64-cross, cpio; shellcheck if available (best effort)
#   * rustup target aarch64-unknown-linux-gnu (best effort: only needed to
#     cross-build the Rust VMM itself, not for the C probe)
# Guest side (in the cache dir, no system change: a private apt state with
# APT::Architecture=arm64, so the host's dpkg gets no foreign architecture):
#   * Debian's arm64 kernel (linux-image-<ver>-arm64-unsigned, from backports)
#   * Debian's 7.x arm64 kernel from trixie-backports (nested virtualization:
#     KVM_CAP_ARM_EL2/_E2H0; protected VMs from userspace): the newest
#     linux-binary-unsigned-7.*+deb13-arm64 (usr/lib/modules/<rel>/vmlinuz.unsigned,
#     already an uncompressed Image) and its linux-base-<rel> (the config);
#     run-in-qemu.sh --kernel 7 boots it
#   * busybox-static:arm64
# Result: $HYPCLEAR_AARCH64_CACHE/env.sh (default target/aarch64-ci/env.sh):
#   HC_KERNEL* (6.12), HC_KERNEL7* (7.x), HC_BUSYBOX*.
#
# Environment:
#   HYPCLEAR_AARCH64_CACHE          cache dir (default <repo>/target/aarch64-ci)
#   HYPCLEAR_AARCH64_KERNEL_SERIES  kernel series to pick the newest of (6.12)
#   HYPCLEAR_AARCH64_KERNEL_PKG     exact package instead, e.g.
#                                   linux-image-6.12.95+deb12-arm64-16k-unsigned
#   HYPCLEAR_AARCH64_KERNEL7_PKG    exact 7.x release instead of the newest,
#                                   e.g. 7.3.4+deb13-arm64 (the suffix of both
#                                   linux-binary-unsigned- and linux-base-)
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

# Debian kernel series to use (6.1 from bookworm hides MOPS from userspace).
KSERIES="${HYPCLEAR_AARCH64_KERNEL_SERIES:-6.12}"
# The 7.x kernel comes from trixie-backports whatever the host runs (only
# downloaded, never installed, so its trixie dependencies do not matter).
K7_SUITE=trixie-backports
QEMU_MIN_MAJOR=10
SETUP_T0="$(hc_now)"

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || hc_die "not root and no sudo: cannot install packages"
    SUDO=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive

. /etc/os-release
CODENAME="${VERSION_CODENAME:-}"
APT_TARGET=()
if [ "$CODENAME" = bookworm ]; then
    APT_TARGET=(-t bookworm-backports)
fi

DEBIAN_URI="$(hc_debian_uri)"
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

qemu_major() {
    command -v qemu-system-aarch64 >/dev/null || { echo 0; return; }
    qemu-system-aarch64 --version | awk 'NR == 1 { split($4, v, "."); print v[1] + 0 }'
}

# ---------------------------------------------------------------- host tools
hc_stage_begin "host packages"
MISSING=()
[ "$(qemu_major)" -ge "$QEMU_MIN_MAJOR" ] || MISSING+=(qemu-system-arm)
command -v aarch64-linux-gnu-gcc >/dev/null || MISSING+=(gcc-aarch64-linux-gnu)
[ -e /usr/aarch64-linux-gnu/lib/libc.a ] || MISSING+=(libc6-dev-arm64-cross)
command -v cpio >/dev/null || MISSING+=(cpio)
command -v timeout >/dev/null || MISSING+=(coreutils)
if [ "${#MISSING[@]}" -gt 0 ]; then
    hc_log "installing: ${MISSING[*]}"
    hc_ensure_backports ${SUDO[@]+"${SUDO[@]}"}
    "${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq
    # Everything from backports where it exists there (-t only raises priority;
    # packages absent from backports still come from bookworm).
    "${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${APT_TARGET[@]}" "${MISSING[@]}" >/dev/null
    [ "$(qemu_major)" -ge "$QEMU_MIN_MAJOR" ] ||
        hc_die "qemu-system-aarch64 is $(qemu-system-aarch64 --version | head -1), need >= $QEMU_MIN_MAJOR"
fi
if ! command -v shellcheck >/dev/null; then
    "${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends shellcheck >/dev/null 2>&1 ||
        hc_log "note: shellcheck not installable (optional)"
fi
hc_stage_end

hc_stage_begin "rust target"
RUST_TARGET_OK=0
if command -v rustup >/dev/null; then
    if rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu; then
        RUST_TARGET_OK=1
    elif rustup target add aarch64-unknown-linux-gnu >/dev/null 2>&1; then
        RUST_TARGET_OK=1
    else
        hc_log "WARNING: 'rustup target add aarch64-unknown-linux-gnu' failed (only needed for Rust binaries)"
    fi
else
    hc_log "WARNING: no rustup (only needed for Rust binaries)"
fi
hc_stage_end

# ---------------------------------------------------------- guest artefacts
# Private apt configuration for arm64 downloads: own lists/cache/status, only
# the two suites we need, so nothing on the host changes.
APT_DIR="$HC_CACHE/apt"
ARM_APT=(apt-get
    -o "Dir::Etc::SourceList=$APT_DIR/sources.list"
    -o "Dir::Etc::SourceParts=$APT_DIR/sources.list.d"
    -o "Dir::Etc::Preferences=$APT_DIR/preferences"
    -o "Dir::Etc::PreferencesParts=$APT_DIR/preferences.d"
    -o "Dir::State=$APT_DIR/state"
    -o "Dir::State::status=$APT_DIR/state/status"
    -o "Dir::Cache=$APT_DIR/cache"
    -o "APT::Architecture=arm64"
    -o "APT::Architectures::=arm64"
    -o "Acquire::Languages=none"
    -o "APT::Sandbox::User=root"
    -q)
arm_apt_cache() { "${ARM_APT[@]/#apt-get/apt-cache}" "$@"; }

have_guest_files() {
    [ -f "$HC_ENV_FILE" ] || return 1
    # shellcheck disable=SC1090
    ( . "$HC_ENV_FILE" && [ -f "$HC_KERNEL" ] && [ -x "$HC_BUSYBOX" ] &&
        [ "${HYPCLEAR_AARCH64_KERNEL_PKG:-$HC_KERNEL_PKG}" = "$HC_KERNEL_PKG" ] &&
        [ -f "${HC_KERNEL7:-}" ] && [ -f "${HC_KERNEL7_CONFIG:-}" ] &&
        [ "${HYPCLEAR_AARCH64_KERNEL7_PKG:-$HC_KERNEL7_RELEASE}" = "$HC_KERNEL7_RELEASE" ] )
}

if [ "$REFRESH" -eq 1 ] || ! have_guest_files; then
    hc_stage_begin "arm64 apt index"
    mkdir -p "$APT_DIR"/{sources.list.d,preferences.d,state/lists/partial,cache/archives/partial} "$HC_CACHE/debs"
    : >"$APT_DIR/state/status"
    : >"$APT_DIR/preferences"
    suites="bookworm bookworm-backports"
    [ "$CODENAME" = bookworm ] || suites="$CODENAME"
    [[ " $suites " = *" $K7_SUITE "* ]] || suites="$suites $K7_SUITE"
    for s in $suites; do
        echo "deb [arch=arm64 signed-by=$KEYRING] $DEBIAN_URI $s main"
    done >"$APT_DIR/sources.list"
    "${ARM_APT[@]}" update -qq
    hc_stage_end

    hc_stage_begin "arm64 kernel + busybox download"
    KPKG="${HYPCLEAR_AARCH64_KERNEL_PKG:-}"
    if [ -z "$KPKG" ]; then
        KPKG="$(arm_apt_cache pkgnames "linux-image-$KSERIES" |
            grep -E "^linux-image-${KSERIES//./\\.}\.[0-9]+\+deb[0-9.]+-arm64-unsigned$" | sort -V | tail -1)"
        [ -n "$KPKG" ] || hc_die "no linux-image-$KSERIES*-arm64-unsigned package found"
    fi
    # 7.x: the newest linux-binary-unsigned-7.<x>[.<y>]+deb<n>-arm64 (the
    # plain 4K-page flavour: not -16k, -rt or -cloud), so a new point
    # release in backports does not break the setup.
    K7REL="${HYPCLEAR_AARCH64_KERNEL7_PKG:-}"
    if [ -z "$K7REL" ]; then
        K7REL="$(arm_apt_cache pkgnames linux-binary-unsigned-7. |
            sed -nE 's/^linux-binary-unsigned-(7\.[0-9]+(\.[0-9]+)?\+deb[0-9.]+-arm64)$/\1/p' | sort -V | tail -1)"
        [ -n "$K7REL" ] || hc_die "no linux-binary-unsigned-7.*-arm64 package found in $K7_SUITE"
    fi
    rm -f "$HC_CACHE"/debs/*.deb
    (cd "$HC_CACHE/debs" && "${ARM_APT[@]}" download "$KPKG" busybox-static \
        "linux-binary-unsigned-$K7REL" "linux-base-$K7REL")
    hc_stage_end

    hc_stage_begin "extract"
    KDEB="$(ls "$HC_CACHE"/debs/linux-image-*.deb)"
    BDEB="$(ls "$HC_CACHE"/debs/busybox-static_*.deb)"
    KVER_DEB="$(dpkg-deb -f "$KDEB" Version)"
    KDIR="$HC_CACHE/kernel/${KPKG}_${KVER_DEB#*:}"
    rm -rf "$KDIR.tmp" && mkdir -p "$KDIR.tmp"
    # Only the image and its config: the modules are not needed (KVM, PL011,
    # initrd support are built in). ./boot comes first in the archive, so tar
    # stops early (--occurrence) and dpkg-deb dies of SIGPIPE: ~1 s instead of
    # ~3 s to decompress everything, and no ~400 MB of module writes.
    KREL="${KPKG#linux-image-}"
    KREL="${KREL%-unsigned}"
    dpkg-deb --fsys-tarfile "$KDEB" 2>/dev/null |
        tar -x -C "$KDIR.tmp" --occurrence=1 "./boot/vmlinuz-$KREL" "./boot/config-$KREL" || true
    if [ ! -s "$KDIR.tmp/boot/vmlinuz-$KREL" ] || [ ! -s "$KDIR.tmp/boot/config-$KREL" ]; then
        hc_die "could not extract boot/vmlinuz-$KREL from $KDEB"
    fi
    rm -rf "$KDIR" && mv "$KDIR.tmp" "$KDIR"
    # 7.x: the image from linux-binary-unsigned, the config from linux-base
    # (whose dtbs are skipped the same way).
    K7BIN="$(ls "$HC_CACHE"/debs/linux-binary-unsigned-*.deb)"
    K7BASE="$(ls "$HC_CACHE"/debs/linux-base-*.deb)"
    K7VER_DEB="$(dpkg-deb -f "$K7BIN" Version)"
    K7DIR="$HC_CACHE/kernel/linux-binary-unsigned-${K7REL}_${K7VER_DEB#*:}"
    rm -rf "$K7DIR.tmp" && mkdir -p "$K7DIR.tmp"
    for member in "$K7BIN:vmlinuz.unsigned" "$K7BASE:config"; do
        dpkg-deb --fsys-tarfile "${member%:*}" 2>/dev/null |
            tar -x -C "$K7DIR.tmp" --occurrence=1 "./usr/lib/modules/$K7REL/${member##*:}" || true
        [ -s "$K7DIR.tmp/usr/lib/modules/$K7REL/${member##*:}" ] ||
            hc_die "could not extract usr/lib/modules/$K7REL/${member##*:} from ${member%:*}"
    done
    rm -rf "$K7DIR" && mv "$K7DIR.tmp" "$K7DIR"
    BBVER="$(dpkg-deb -f "$BDEB" Version)"
    BBDIR="$HC_CACHE/busybox/${BBVER#*:}"
    rm -rf "$BBDIR" && mkdir -p "$BBDIR" && dpkg -x "$BDEB" "$BBDIR"
    KERNEL="$KDIR/boot/vmlinuz-$KREL"
    KRELEASE="$KREL"
    {
        echo "# generated by ci/aarch64/setup.sh"
        printf 'HC_KERNEL=%q\n' "$KERNEL"
        printf 'HC_KERNEL_PKG=%q\n' "$KPKG"
        printf 'HC_KERNEL_VERSION=%q\n' "$KVER_DEB"
        printf 'HC_KERNEL_RELEASE=%q\n' "$KRELEASE"
        printf 'HC_KERNEL_CONFIG=%q\n' "$KDIR/boot/config-$KRELEASE"
        printf 'HC_KERNEL7=%q\n' "$K7DIR/usr/lib/modules/$K7REL/vmlinuz.unsigned"
        printf 'HC_KERNEL7_PKG=%q\n' "linux-binary-unsigned-$K7REL"
        printf 'HC_KERNEL7_VERSION=%q\n' "$K7VER_DEB"
        printf 'HC_KERNEL7_RELEASE=%q\n' "$K7REL"
        printf 'HC_KERNEL7_CONFIG=%q\n' "$K7DIR/usr/lib/modules/$K7REL/config"
        printf 'HC_BUSYBOX=%q\n' "$BBDIR/bin/busybox"
        printf 'HC_BUSYBOX_VERSION=%q\n' "$BBVER"
    } >"$HC_ENV_FILE.tmp"
    mv "$HC_ENV_FILE.tmp" "$HC_ENV_FILE"
    rm -f "$HC_CACHE"/debs/*.deb
    hc_stage_end
fi

# --------------------------------------------------------------- summary
# shellcheck disable=SC1090
. "$HC_ENV_FILE"
hc_log "cache:    $HC_CACHE"
hc_log "qemu:     $(command -v qemu-system-aarch64) ($(qemu-system-aarch64 --version | head -1))"
hc_log "cross cc: $(command -v aarch64-linux-gnu-gcc) ($(aarch64-linux-gnu-gcc -dumpfullversion))"
hc_log "rust:     aarch64-unknown-linux-gnu target $([ "$RUST_TARGET_OK" -eq 1 ] && echo installed || echo MISSING)"
hc_log "kernel:   $HC_KERNEL ($HC_KERNEL_PKG $HC_KERNEL_VERSION)"
hc_log "kernel 7: $HC_KERNEL7 ($HC_KERNEL7_PKG $HC_KERNEL7_VERSION)"
hc_log "busybox:  $HC_BUSYBOX ($HC_BUSYBOX_VERSION)"
hc_log "setup done in $(hc_elapsed "$SETUP_T0")s"
