#!/usr/bin/env bash
# Fetch and unpack Debian's linux-source package for `hypclear --kernel-tree`,
# and install what kbuild needs. Idempotent: a cached, unpacked tree costs
# only a few stat calls.
#
#   ci/kernel-source.sh [VERSION]      VERSION: 6.12 (default), 6.1, 7.3 ...
#
# A version the host's apt sources lack (7.x on bookworm) is downloaded from
# trixie-backports through a private apt state under the cache (its own
# sources, lists and status), so the host's apt configuration never changes.
#
# Env: HYPCLEAR_KERNEL_SRC_CACHE  where packages and trees live
#                                 (default /var/cache/hypclear/src)
#      HYPCLEAR_KERNEL_SRC_SUITE  the suite for versions the host lacks
#                                 (default trixie-backports)
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

# apt-get with a private state holding only SUITE (arch-independent
# packages: linux-source is `all`).
private_apt() {
    local suite=$1 dir=$cache/apt-$1 uri=http://deb.debian.org/debian f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -e "$f" ] || continue
        f=$(awk '/^URIs:/ && $2 !~ /security/ && $2 ~ /debian\/?$/ { print $2; exit }' "$f")
        [ -n "$f" ] && { uri=$f; break; }
    done
    mkdir -p "$dir"/{sources.list.d,preferences.d,state/lists/partial,cache/archives/partial}
    [ -e "$dir/state/status" ] || : >"$dir/state/status"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri $suite main" >"$dir/sources.list"
    PRIVATE_APT=(apt-get -q
        -o "Dir::Etc::SourceList=$dir/sources.list" -o "Dir::Etc::SourceParts=$dir/sources.list.d"
        -o "Dir::Etc::Preferences=$dir/preferences" -o "Dir::Etc::PreferencesParts=$dir/preferences.d"
        -o "Dir::State=$dir/state" -o "Dir::State::status=$dir/state/status"
        -o "Dir::Cache=$dir/cache" -o "Acquire::Languages=none" -o "APT::Sandbox::User=root")
    "${PRIVATE_APT[@]}" update -qq >&2
}

deb=$(ls "$cache"/"${pkg}"_*_all.deb 2>/dev/null | sort -V | tail -n1 || true)
if [ -z "$deb" ]; then
    apt-get update -qq >&2
    if apt-cache show "$pkg" >/dev/null 2>&1; then
        log "downloading $pkg"
        (cd "$cache" && apt-get download "$pkg" >&2)
    else
        suite=${HYPCLEAR_KERNEL_SRC_SUITE:-trixie-backports}
        log "downloading $pkg from $suite (private apt state in $cache/apt-$suite)"
        private_apt "$suite"
        (cd "$cache" && "${PRIVATE_APT[@]}" download "$pkg" >&2)
    fi
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
