#!/usr/bin/env bash
# Build the aarch64 routine unit tests (routines_test.c + trampoline.S + every
# guest/aarch64/lib and selftest routine) as static binaries and run them,
# natively on arm64 or under qemu-aarch64 elsewhere:
#   - with the real DCZID_EL0 on -cpu max (FEAT_MOPS, 64-byte DC ZVA block)
#   - with the real DCZID_EL0 on -cpu a64fx (no MOPS, 256-byte DC ZVA block)
#   - with the real DCZID_EL0 on -cpu neoverse-n1 (no MOPS, 64-byte block: the
#     kernel memset's DC ZVA path from 128 bytes, and 64-byte clear_page blocks)
#   - with DCZID_EL0 forced to DZP = 1 (the EL0 / --no-dc-zva fallbacks)
# The first run tests every routine; the others differ only in DCZID_EL0, so
# they test only the routines that read it (--dczid-only: memset, clear_page
# dczva).
# usage: guest/aarch64/test/run.sh [--quick]   (--quick: fewer offsets for the big sizes)
# Needs aarch64-linux-gnu-gcc (or a native gcc on arm64) and, on other hosts,
# qemu-aarch64 >= 8.0 (FEAT_MOPS), e.g. Debian bookworm-backports' qemu-user.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
guest="$(cd "$here/../.." && pwd)"
out="${TMPDIR:-/tmp}/hypclear-aarch64-routines-test"
mkdir -p "$out"
if [ "$(uname -m)" = aarch64 ]; then
    cc="${CC:-gcc}"; run=()
else
    cc="${CC:-aarch64-linux-gnu-gcc}"; run=(qemu-aarch64)
fi
srcs=("$here/routines_test.c" "$here/trampoline.S" "$guest"/aarch64/lib/*.S "$guest"/aarch64/selftest/*.S)
flags=(-O2 -g -static -Wall -Wextra -I"$guest/include" -I"$guest/aarch64")
"$cc" "${flags[@]}" -o "$out/routines_test" "${srcs[@]}"
"$cc" "${flags[@]}" -DHYPCLEAR_TEST_DCZID=0x14 -o "$out/routines_test_dzp" "${srcs[@]}"
rc=0
echo "== -cpu max (real DCZID_EL0)"
QEMU_CPU=max "${run[@]}" "$out/routines_test" "$@" || rc=1
if [ ${#run[@]} -gt 0 ]; then
    echo "== -cpu a64fx (256-byte DC ZVA block, no MOPS)"
    QEMU_CPU=a64fx "${run[@]}" "$out/routines_test" --dczid-only "$@" || rc=1
    echo "== -cpu neoverse-n1 (64-byte DC ZVA block, no MOPS)"
    QEMU_CPU=neoverse-n1 "${run[@]}" "$out/routines_test" --dczid-only "$@" || rc=1
fi
echo "== DCZID_EL0 forced to 0x14 (DZP = 1: DC ZVA prohibited)"
QEMU_CPU=max "${run[@]}" "$out/routines_test_dzp" --dczid-only "$@" || rc=1
exit $rc
