#!/usr/bin/env bash
# The aarch64 stage of .ci/run: hypclear itself on aarch64, under real KVM
# inside QEMU (TCG, EL2 emulated) in VHE, nVHE and protected (pKVM) modes.
#
#   1. setup.sh (QEMU 10 from bookworm-backports, arm64 kernel + busybox,
#      cross toolchain, rustup target), plus qemu-user for the routine tests
#   2. the routines' own tests under qemu-aarch64 user mode (quick; in the
#      background, beside steps 3-4 and, run whole, the KVM runs)
#   3. cross-build hypclear (static)
#   4. kernel blobs cross-built on this host with `hypclear blob --arch aarch64`
#      (each one's link configuration checked: vanilla 4 alias rows, the
#      seed-001 shape `memset` 3): from linux-source-6.12, its seed-001
#      shape (ci/seed001-shape.sh) and a mutant (ci/aarch64/mutants.sh);
#      from linux-source-7.3 (the kernel the nested boot runs), its seed-001
#      shape, a mutant of that shape (mutants.sh --zva-last-block) and a
#      contract mutant of the vanilla tree (mutants.sh --contract)
#   5. in each mode: hypclear info, run, selftest (EL1 and EL0), the hostile
#      guests (selftest --hostile), a --no-dc-zva run, and one short bench;
#      in nVHE the run is --geometry full, then the suite on each 6.12
#      kernel blob with --blob, and the mutant must fail on its fill-0 and
#      overlap rows and its 4..7-byte source-end edge checks only
#      (ci/aarch64/expect-fail), and bench --ab (both link configurations'
#      memset in one guest, each with its guest/host); VHE skips the suite, the
#      hostile guests and the EL0 selftest (nVHE and protected run them;
#      step 6's EL1 runs have a VHE host), which pays for step 6
#   6. Debian's 7.x kernel with kvm-arm.mode=nested (run-in-qemu.sh --mode
#      nested): the 7.3 seed-shape blob's suite with --el auto, which must
#      pick EL2 ("guest at EL2 (nVHE, E2H=0; --el auto ..."), then at --el 2
#      selftest (memset configuration), the hostile guests that differ at
#      EL2 (vectors, page tables, doorbell, two vCPUs, spin), the 7.3
#      vanilla blob's suite and the 7.3 mutant (fails on its clear_page,
#      clear_pages and memset fill 0x00 rows of the original instructions
#      only); at --el 2 and --el 1 the 7.3 contract mutant (memcpy and
#      memset fail on their original instructions' rows only, each for its
#      breach: x19 changed, return value not dst); at --el 1 the 7.3
#      vanilla and seed-shape suites and the
#      seed's four-column table (bench --dc-zva both on the
#      7.3 pair, compare --format rst, ci/aarch64/check-zva-table). Subsets,
#      as everything is slow in that boot (EL2 under QEMU's NV2 emulation,
#      and 5-12 s more per command under the 7.3 kernel even at EL1).
#   7. Debian's 7.x kernel in protected mode: `hypclear reclaim` (a
#      protected VM's pages read zero after teardown) and its control
# Every QEMU run sits under an outer timeout; fails on the first failure.
#
#   ci/aarch64/hypclear-stage.sh [prepare | boots [BOOT]...]
#
# No argument: the whole stage. .ci/run runs it in two parts, so that its
# QEMU boots can run side by side (ci/lib/lanes.sh): `prepare` (steps 1-4,
# everything that installs, downloads or runs cargo; then the routine
# tests' verdict), then `boots` (steps 5-7, which install and build
# nothing). BOOT: vhe, protected, nvhe, nested (step 6), reclaim (step 7);
# default $HYPCLEAR_AARCH64_MODES (vhe nvhe protected nested) and reclaim
# unless HYPCLEAR_AARCH64_RECLAIM=0.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
REPO="$(cd "$HC_CI_DIR/../.." && pwd)"
cd "$REPO"
T0="$(hc_now)"
PART="${1:-all}"
[ $# -eq 0 ] || shift
case "$PART:$#" in
    all:0 | prepare:0 | boots:*) ;;
    *) hc_die "usage: $0 [prepare | boots [vhe|protected|nvhe|nested|reclaim]...]" ;;
esac

BIN="$REPO/target/aarch64-unknown-linux-gnu/release/hypclear"
HOST_BIN="$REPO/target/release/hypclear"
KBLOB="$HC_CACHE/kernel-arm64.blob"
SBLOB="$HC_CACHE/seed001-arm64.blob"
MBLOB="$HC_CACHE/mutant-arm64.blob"
K7BLOB="$HC_CACHE/kernel7-arm64.blob"
S7BLOB="$HC_CACHE/seed001-7-arm64.blob"
M7BLOB="$HC_CACHE/mutant-zva-7-arm64.blob"
C7BLOB="$HC_CACHE/mutant-contract-7-arm64.blob"

ROUTINE_LOG="$HC_CACHE/routine-tests.log"
collect_routine_tests() {
    hc_stage_begin "routine tests under qemu-aarch64 user mode (collect)"
    local rc=0
    wait "$ROUTINE_PID" || rc=$?
    cat "$ROUTINE_LOG" >&2
    hc_log "routine tests collected $(hc_elapsed "$RT0")s after their start ($(tail -n 1 "$ROUTINE_LOG")), exit status $rc"
    [ "$rc" -eq 0 ] || hc_die "aarch64 routine tests failed (see above)"
    hc_stage_end
}

if [ "$PART" != boots ]; then
    "$HC_CI_DIR/setup.sh"

    hc_stage_begin "qemu-user (routine tests)"
    qemu_user_major() { qemu-aarch64 --version 2>/dev/null | sed -n 's/.*version \([0-9]*\).*/\1/p' | head -1; }
    if ! command -v qemu-aarch64 >/dev/null || [ "$(qemu_user_major)" -lt 8 ]; then
        SUDO=(); [ "$(id -u)" -eq 0 ] || SUDO=(sudo)
        "${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
            -t bookworm-backports qemu-user >/dev/null
    fi
    qemu-aarch64 --version | head -1 >&2
    hc_stage_end

    # The routine tests are single-threaded, so they run in the background
    # beside the cross build (prepare) or the KVM runs (whole stage).
    mkdir -p "$HC_CACHE"
    RT0="$(hc_now)"
    # The last line of the log says when they finished (the collect step's
    # own elapsed time is that of what ran beside them, not theirs).
    (
        rt_rc=0
        guest/aarch64/test/run.sh --quick || rt_rc=$?
        echo "routine tests finished after $(hc_elapsed "$RT0")s, exit status $rt_rc"
        exit "$rt_rc"
    ) >"$ROUTINE_LOG" 2>&1 &
    ROUTINE_PID=$!
    # shellcheck disable=SC2317 # called from lib.sh's EXIT trap
    hc_cleanup() { kill "$ROUTINE_PID" 2>/dev/null || true; }
    hc_log "routine tests under qemu-aarch64 user mode started in the background (log: $ROUTINE_LOG)"

    hc_stage_begin "cross-build hypclear for aarch64"
    "$HC_CI_DIR/cargo-aarch64.sh" build --release --quiet --bin hypclear
    file "$BIN" >&2 || true
    hc_stage_end

    hc_stage_begin "kernel blobs for aarch64 (hypclear blob on this host)"
    [ -x "$HOST_BIN" ] || cargo build --release --quiet --bin hypclear
    # Build a blob and check the link configuration hypclear detected in its
    # tree: a seed-001 shape that still links clear_page would make the
    # "patch" column a second vanilla.
    make_blob() {
        local tree=$1 out=$2 config=$3 rows=$4 line
        line="$("$HOST_BIN" blob --arch aarch64 --kernel-tree "$tree" -o "$out")"
        echo "$line" >&2
        [[ "$line" == *", link configuration $config ("*"), $rows alias rows" ]] ||
            hc_die "$out: want link configuration $config with $rows alias rows"
        # run-in-qemu.sh --bin copies executable files to the guest's /bin.
        chmod +x "$out"
    }
    KTREE="${HYPCLEAR_KERNEL_TREE:-$(bash "$REPO/ci/kernel-source.sh" 6.12 | tail -n1)}"
    SEED_TREE="$(bash "$REPO/ci/seed001-shape.sh" "$KTREE" | tail -n1)"
    MUTANT_TREE="$(bash "$HC_CI_DIR/mutants.sh" "$KTREE" | tail -n1)"
    make_blob "$KTREE" "$KBLOB" vanilla 4
    make_blob "$SEED_TREE" "$SBLOB" memset 3
    make_blob "$MUTANT_TREE" "$MBLOB" vanilla 4
    # The same from a 7.x tree (the kernel the nested boot runs), and a mutant
    # of its seed-001 shape whose clear_page (memset of 4096 bytes) misses its
    # last DC ZVA block.
    KTREE7="${HYPCLEAR_KERNEL_TREE_7:-$(bash "$REPO/ci/kernel-source.sh" 7.3 | tail -n1)}"
    SEED_TREE7="$(bash "$REPO/ci/seed001-shape.sh" "$KTREE7" | tail -n1)"
    MUTANT_TREE7="$(bash "$HC_CI_DIR/mutants.sh" --zva-last-block "$SEED_TREE7" | tail -n1)"
    make_blob "$KTREE7" "$K7BLOB" vanilla 4
    make_blob "$SEED_TREE7" "$S7BLOB" memset 3
    make_blob "$MUTANT_TREE7" "$M7BLOB" memset 3
    # A mutant of the vanilla 7.3 tree with every byte right and two call
    # contract breaches (mutants.sh --contract).
    CONTRACT_TREE7="$(bash "$HC_CI_DIR/mutants.sh" --contract "$KTREE7" | tail -n1)"
    make_blob "$CONTRACT_TREE7" "$C7BLOB" vanilla 4
    hc_stage_end

    hc_stage_begin "KVM probe (ci/aarch64/probe)"
    "$HC_CI_DIR/probe/build.sh" >/dev/null
    hc_stage_end
fi
if [ "$PART" = prepare ]; then
    collect_routine_tests
    hc_log "aarch64 stage prepare done in $(hc_elapsed "$T0")s"
    exit 0
fi
for f in "$BIN" "$KBLOB" "$SBLOB" "$MBLOB" "$K7BLOB" "$S7BLOB" "$M7BLOB" "$C7BLOB"; do
    [ -x "$f" ] || hc_die "$f missing: run $0 prepare first"
done

# Small guests: first touch of guest RAM is slow under TCG. The serial
# console is a terminal, so turn the progress bars off for a readable log.
# TCG runs the guest ~100x slower than hardware and the two link
# configurations' VMs share the emulated CPUs: the watchdog's default 5 s of
# no progress is for hardware, so give one command (32 MiB MOPS memset) 60 s.
H='HYPCLEAR_PROGRESS=0 hypclear --timeout 60'
# Every mode (VHE: a subset, below): the suite, selftest at EL1 and EL0,
# the hostile guests (at EL1 a zeroed page table wedges the guest, so that
# case waits the whole --timeout; 20 s is ample for the others: 16 cases
# took 17 s besides it in nVHE), the DC ZVA-less paths, a short bench.
# nVHE runs the suite in --geometry full instead of quick (full is a
# superset), then the kernel blobs and the mutant.
common=(
    "$H info --mem 64MB"
    "$H selftest --mem 64MB"
    "$H selftest --mem 64MB --cpl 3 --config vanilla"
    "HYPCLEAR_PROGRESS=0 hypclear --timeout 20 selftest --hostile --mem 64MB"
    "$H verify --mem 64MB --no-dc-zva --routine clear_page,clear_pages,memset --config both"
    "$H bench clear_page -s 4MB -k 4KB,2MB -f all --sessions 1 --repeats 2 --config both"
)
# VHE: neither the hostile guests nor the EL0 selftest, which are the same
# code paths in nVHE and protected mode, nor the suite: the nested boot's
# EL1 runs (the 7.3 blobs) are guests of a VHE host (VHE+NV2), and the
# built-in suite runs in nVHE and protected mode. Pays for step 6.
vhe_cmds=("${common[0]}" "${common[1]}" "${common[4]}" "${common[5]}")
if [ $# -gt 0 ]; then
    modes=" $* "
else
    modes=" ${HYPCLEAR_AARCH64_MODES:-vhe nvhe protected nested} "
    [ "${HYPCLEAR_AARCH64_RECLAIM:-1}" = 0 ] || modes+="reclaim "
fi
# Every other mode spec (protected, protected:cortex-a57, protected@7, ...)
# runs the suite and the whole list.
for m in $modes; do
    case "$m" in nvhe | nested | reclaim) continue ;; esac
    if [ "$m" = vhe ]; then cmds=("${vhe_cmds[@]}"); else cmds=("$H run --mem 64MB --seed 1" "${common[@]}"); fi
    HYPCLEAR_AARCH64_MODES="$m" "$HC_CI_DIR/ci.sh" --no-setup --timeout "${HYPCLEAR_AARCH64_TIMEOUT:-900}" \
        --bin "$BIN" -- "${cmds[@]}"
done
# The mutant (ci/aarch64/mutants.sh) must fail exactly where only the new
# checks look: memset's fill-0 rows, memcpy's overlap rows, and memcpy's
# edge checks whose source ends against the unmapped page at 4..7 bytes
# (its 4-7 byte path reads 4 bytes past the source: exactly those 4
# checks fault there, each an over-read).
M="/bin/$(basename "$MBLOB")"
m_memcpy_why="--why '/memcpy/kernel: 4 of [0-9]+ checks failed; first: size 4 dst\+0 src\+0: over-read: faulted 0 bytes past the source end ' \
--why '/memcpy/kernel overlap: [0-9]+ of [0-9]+ checks failed; first: size [0-9]+ dst\+[0-9]+: wrong value'"
if [[ "$modes" == *" nvhe "* ]]; then
    HYPCLEAR_AARCH64_MODES=nvhe "$HC_CI_DIR/ci.sh" --no-setup --timeout "${HYPCLEAR_AARCH64_TIMEOUT:-1500}" \
        --bin "$BIN" --bin "$KBLOB" --bin "$SBLOB" --bin "$MBLOB" --bin "$HC_CI_DIR/expect-fail" -- \
        "$H run --mem 64MB --seed 1 --geometry full" "${common[@]}" \
        "$H info --mem 64MB --blob /bin/$(basename "$SBLOB")" \
        "$H run --mem 64MB --seed 1 --blob /bin/$(basename "$KBLOB")" \
        "$H run --mem 64MB --seed 1 --blob /bin/$(basename "$SBLOB")" \
        "HYPCLEAR_PROGRESS=0 expect-fail '^kernel fill 0x00\$' hypclear --timeout 60 --format ktap verify --mem 64MB --seed 1 --blob $M -r memset" \
        "HYPCLEAR_PROGRESS=0 expect-fail $m_memcpy_why '^kernel( overlap)?\$' hypclear --timeout 60 --format ktap verify --mem 64MB --seed 1 --blob $M -r memcpy" \
        "$H bench memset -s 64KB --config both -f generic --ab --budget 2 --json /tmp/ab.json >/tmp/ab.txt; rc=\$?; cat /tmp/ab.txt;
         [ \$rc -eq 0 ] && [ \"\$(grep -c '^guest/host ' /tmp/ab.txt)\" -eq 2 ] && [ \"\$(grep -o '\"estimate\"' /tmp/ab.json | wc -l)\" -eq 2 ]"
fi

# The guest at EL2 (nested virtualization, Debian's 7.x kernel): --el auto
# must pick EL2 there (checked on the 7.3 seed-shape blob's suite, which is
# also its EL2 run), then selftest and the hostile guests at EL2, and the
# 7.3 tree's own objects at both levels: vanilla and seed shape, each
# alternatives path (HAS_MOPS and the original instructions).
if [[ "$modes" == *" nested "* ]]; then
    K7="/bin/$(basename "$K7BLOB")" S7="/bin/$(basename "$S7BLOB")" M7="/bin/$(basename "$M7BLOB")"
    C7="/bin/$(basename "$C7BLOB")"
    # The 7.3 mutant (mutants.sh --zva-last-block) misses the last DC ZVA
    # block of memset's original instructions: clear_page and clear_pages
    # (memset of whole pages) and memset's fill 0x00 on that path, nothing
    # on the HAS_MOPS path (SETP/SETM/SETE: no DC ZVA). -r: the other
    # routines' rows have the same names. At EL2 only, where DC ZVA has no
    # enable bit (SCTLR_EL2 has no DZE): EL1's DC ZVA tail is what the 6.12
    # mutant's fill 0x00 rows show in nVHE (the same leaves fail at EL1,
    # 24 s more).
    m7_leaves='^kernel: original instructions \(no HAS_MOPS\)( fill 0x00)?$'
    m7_verify="hypclear --timeout 60 --format ktap verify --mem 64MB --seed 1 --blob $M7 -r clear_page,clear_pages,memset"
    # The contract mutant (mutants.sh --contract): memcpy keeps a scratch
    # value in x19, memset one in x0, both on the original instructions
    # only; every byte is right, so each failing row must say why. Both
    # levels: the harness that checks the contract differs (EL1 is a
    # guest of the VHE host, EL2 runs under NV2). -s: sizes that reach
    # each bug (memcpy's 1-3 byte and long copies, memset past 15 bytes);
    # the built-in list costs about 60 s a level here.
    c7_expect="expect-fail --why '/memcpy/.*: [0-9]+ of [0-9]+ checks failed; first: size [0-9]+ [^:]*: callee-saved x19 changed' \
--why '/memset/.*: [0-9]+ of [0-9]+ checks failed; first: size [0-9]+ [^:]*: returned 0x[0-9a-f]+, want dst ' \
'^kernel: original instructions \(no HAS_MOPS\)'"
    c7_verify="hypclear --timeout 60 --format ktap verify --mem 64MB --seed 1 --blob $C7 -r memcpy,memset -s 1,255,4KB"
    # The seed's review table (vanilla, patch, stnp, patch_stp) from the 7.3
    # pair in one invocation: bench --dc-zva both on the two blobs, four
    # sides interleaved, then compare --format rst. --alternatives none:
    # the original instructions, as the HAS_MOPS path (the host pick under
    # QEMU's -cpu max) has no DC ZVA and would make all four columns SETPN
    # or SETP. Under TCG the figures mean nothing: check-zva-table checks
    # only the table's shape (columns in that order, rows, cells) and the
    # syntax of the marks. EL1: cheaper than EL2, and the table's question
    # (DC ZVA or not) is the same there.
    zva7=(
        "$H bench clear_page -s 2MB -k 4KB --sessions 2 --repeats 2 --max-warmup 0 --el 1 --alternatives none --dc-zva both --blob $K7 --blob $S7 --json /tmp/zva7.json"
        "check-zva-table /tmp/zva7.json $(basename "$K7BLOB" .blob) $(basename "$S7BLOB" .blob)"
    )
    NT0="$(hc_now)"
    "$HC_CI_DIR/run-in-qemu.sh" --mode nested --timeout "${HYPCLEAR_AARCH64_TIMEOUT:-1800}" \
        --bin "$BIN" --bin "$K7BLOB" --bin "$S7BLOB" --bin "$M7BLOB" --bin "$C7BLOB" \
        --bin "$HC_CI_DIR/expect-fail" --bin "$HC_CI_DIR/check-zva-table" -- \
        "$H run --mem 64MB --seed 1 --blob $S7 >/tmp/run; rc=\$?; cat /tmp/run; [ \$rc -eq 0 ] && grep -qF 'guest at EL2 (nVHE, E2H=0; --el auto' /tmp/run" \
        "$H selftest --el 2 --mem 64MB --config memset" \
        "HYPCLEAR_PROGRESS=0 hypclear --timeout 10 selftest --el 2 --hostile --mem 64MB --case vectors,page_tables,doorbell_4,doorbell_site,log_race,spin" \
        "$H run --el 2 --mem 64MB --seed 1 --blob $K7" \
        "HYPCLEAR_PROGRESS=0 expect-fail '$m7_leaves' $m7_verify --el 2" \
        "HYPCLEAR_PROGRESS=0 $c7_expect $c7_verify --el 2" \
        "$H run --el 1 --mem 64MB --seed 1 --blob $K7" \
        "HYPCLEAR_PROGRESS=0 $c7_expect $c7_verify --el 1" \
        "$H run --el 1 --mem 64MB --seed 1 --blob $S7" \
        "${zva7[@]}"
    hc_log "nested (7.x) runs took $(hc_elapsed "$NT0")s"
fi
# pKVM on Linux 7.x (issue 29): a protected VM's RAM must read zero after
# its teardown, and the control (the same run as an ordinary VM) must keep
# its seeded pattern. 32 MB (16 MB filled by the guest): the protected
# guest's stage-2 faults and the reclaim are slow under TCG.
# HYPCLEAR_AARCH64_RECLAIM=0 leaves it out (BOOT reclaim).
if [[ "$modes" == *" reclaim "* ]]; then
    HYPCLEAR_AARCH64_MODES=protected@7 "$HC_CI_DIR/ci.sh" --no-setup --timeout "${HYPCLEAR_AARCH64_TIMEOUT:-600}" \
        --bin "$BIN" -- "$H reclaim --mem 32MB --seed 1"
fi

if [ "$PART" = all ]; then
    collect_routine_tests
    hc_log "hypclear aarch64 stage passed in $(hc_elapsed "$T0")s"
else
    hc_log "aarch64 boots ($(xargs <<<"$modes")) passed in $(hc_elapsed "$T0")s"
fi
