#!/usr/bin/env bash
# Cross-build the static aarch64 KVM probe into the cache dir and print its path.
#   ci/aarch64/probe/build.sh            -> prints e.g. target/aarch64-ci/probe/hc-kvm-probe
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
CC="${HYPCLEAR_AARCH64_CC:-aarch64-linux-gnu-gcc}"
SRC="$HC_CI_DIR/probe/probe.c"
OUT="$HC_CACHE/probe/hc-kvm-probe"
mkdir -p "$(dirname "$OUT")"
if [ ! -x "$OUT" ] || [ "$SRC" -nt "$OUT" ]; then
    "$CC" -static -O2 -Wall -Wextra -Werror -o "$OUT.tmp" "$SRC"
    mv "$OUT.tmp" "$OUT"
fi
echo "$OUT"
