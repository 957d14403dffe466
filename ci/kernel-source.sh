#!/usr/bin/env bash
# Fetch and unpack Debian's linux-source package for `hypclear --kernel-tree`,
# and install what kbuild needs. Idempotent: a cached, unpacked tree costs
# only a few stat calls.
#
#   ci/kernel-source.sh [VERSION]      VERSION: 6.12 (default) or e.g. 6.1
#
# Env: HYPCLEAR_KERNEL_SRC_CACHE  where packages and trees live
#                                 (default /var/cache/hypclear/src)
#      HYPCLEAR_KERNEL_CROSS=0    skip the aarch64 cross toolchain
# The last line on stdout is the tree's path; progress goes to stderr.
set -euo pipefail

version=${1:-6.12}
cache=${HYPCLEAR_KERNEL_SRC_CACHE:-/var/cache/hypclear/src}
pkg=linux-source-$version
tree=$cache/$pkg

log() { echo "kernel-source: $*" >&2; }

need=(make gcc bison flex bc libelf-dev xz-utils)
if [ "${HYPCLEAR_KERNEL_CROSS:-1}" != 0 ]; then
    need+=(gcc-aarch64-linux-gnu binutils-aarch64-linux-gnu)
fi
missing=()
for p in "${need[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
fi

mkdir -p "$cache"
if [ -f "$tree/Makefile" ] && [ -d "$tree/arch" ]; then
    log "$tree already unpacked"
    echo "$tree"
    exit 0
fi

deb=$(ls "$cache"/"${pkg}"_*_all.deb 2>/dev/null | sort -V | tail -n1 || true)
if [ -z "$deb" ]; then
    log "downloading $pkg"
    apt-get update -qq >&2
    (cd "$cache" && apt-get download "$pkg" >&2)
    deb=$(ls "$cache"/"${pkg}"_*_all.deb | sort -V | tail -n1)
fi

log "unpacking $deb"
work=$(mktemp -d "$cache/.unpack.XXXXXX")
trap 'rm -rf "$work"' EXIT
dpkg -x "$deb" "$work"
tarball=$(ls "$work"/usr/src/"$pkg".tar.xz)
tar -xJf "$tarball" -C "$work"
rm -rf "$tree"
mv "$work/$pkg" "$tree"
log "unpacked into $tree"
echo "$tree"
