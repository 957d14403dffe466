#!/usr/bin/env bash
# Boot a Debian kernel under QEMU (TCG: EL2 emulated on aarch64, SVM on
# x86_64) with KVM in the requested mode, run shell command lines in the
# guest, and judge the result from the markers the guest's /init prints on
# the console. Shared by ci/aarch64 and ci/x86_64-svm (their setup.sh
# writes the kernel, modules and busybox into <cache>/env.sh).
#
# usage: run-in-qemu.sh --arch aarch64|x86_64 --mode MODE [--kernel 6|7] [--timeout SECS]
#            [--bin FILE]... [--cpu MODEL] [--smp N] [--mem SIZE] [--append 'KERNEL ARGS']
#            [--tcg-threads single|multi] [--log FILE] [--quiet] [--keep]
#            [--fetch GUEST_PATH]... [--out-dir DIR] [-- 'cmd line 1' 'cmd line 2' ...]
#
#   --arch      first argument: aarch64 (ci/aarch64) or x86_64 (ci/x86_64-svm)
#   --mode      KVM mode. aarch64: vhe (kernel default), nvhe
#               (kvm-arm.mode=nvhe), protected (kvm-arm.mode=protected, pKVM),
#               nested (kvm-arm.mode=nested: guests may start at EL2; needs
#               --kernel 7, its default). x86_64: npt (kvm_amd npt=1), shadow
#               (kvm_amd npt=0)
#   --kernel    aarch64: which of setup.sh's kernels boots: 6 (HC_KERNEL,
#               Debian's 6.12; the default) or 7 (HC_KERNEL7, Debian's newest
#               7.x from trixie-backports; the default for --mode nested).
#               Any mode works with either, e.g. --kernel 7 --mode protected
#               (pKVM protected VMs from userspace, Linux >= 7.1)
#   --timeout   wall-clock limit for the whole QEMU run (default 300)
#   --bin       executable copied to /bin/<basename> (repeatable); a dynamically
#               linked one of the host's own arch brings the shared libraries
#               ldd lists, at their paths (as mkinitramfs's copy_exec does)
#   --cpu       QEMU CPU model. aarch64: default max,pauth-impdef=on (has
#               VHE, MOPS, SVE, PAuth...; e.g. cortex-a57 has no VHE, so
#               protected mode then runs as "Protected nVHE" instead of
#               "Protected hVHE"). x86_64: default EPYC,+svm
#   --smp/--mem guest CPUs / memory (default 2 / 2G)
#   --tcg-threads  x86_64: QEMU's TCG threading (default single: the
#               multi-threaded SVM emulation triple-faults now and then)
#   --append    extra kernel command line arguments
#   --log       console log file (default: a new run dir under the cache dir)
#   --quiet     do not stream the console; only print it (tail) on failure
#   --keep      keep the run dir's initramfs and staging tree
#   --fetch     after the command lines, copy this guest file out (repeatable;
#               e.g. /tmp/a64.json): /init prints it gzipped+base64 between
#               HC-FILE markers, checked by sha256; lands in --out-dir
#               (default: <run dir>/files) under its basename
#   --out-dir   where fetched files go
# Each command line runs with `sh -c`-like semantics (busybox sh) in /tmp,
# with HC_MODE=<mode> exported; they run in order, all of them, even after a
# failure.
#
# Exit status: 0 if KVM came up in the requested mode and every command line
# exited 0; 1 on any failure (the failing command and the log tail are
# printed); 124 if the run hit --timeout; 2 on usage errors; 75 (x86_64)
# if QEMU itself logged a triple fault outside guest mode (its SVM
# emulation killed the L1 kernel) and no command had failed before: the
# only outcome a caller may retry.
#
# Console protocol printed by the generated /init (one per line):
#   === HC-BOOT uptime=<s> kernel=<release>
#   === HC-KVM <every dmesg line matching "kvm", e.g. "kvm [1]: VHE mode initialized successfully">
#   === HC-CMD <n>: <command line>
#   === HC-RC <n> <exit status> t=<seconds>
#   === HC-FILE-BEGIN <guest path> sha256=<hex>   (per --fetch; then base64
#   === HC-FILE-END <guest path>                   of the gzipped file) or
#   === HC-FILE-MISSING <guest path>
#   === HC-DONE
#   === HC-INSMOD-FAILED <module>                  (x86_64: a module refused)
# Dmesg strings per mode (Linux 6.12, arch/arm64/kvm/arm.c, arch/x86/kvm/svm/svm.c;
# verified here):
#   vhe:       "kvm [1]: VHE mode initialized successfully"
#   nvhe:      "kvm [1]: Hyp mode initialized successfully"
#   protected: "kvm [1]: Protected nVHE mode initialized successfully"
#   nested:    "kvm [1]: VHE+NV2 mode initialized successfully" (7.3.4, QEMU 10
#              -cpu max)
#   npt:       "kvm_amd: Nested Paging enabled"
#   shadow:    "kvm_amd: Nested Paging disabled"
set -euo pipefail
ARCH=""
if [ "${1:-}" = --arch ]; then ARCH="${2:-}"; shift 2 || true; fi
case "$ARCH" in
    aarch64) ARCH_DIR=aarch64 ;;
    x86_64) ARCH_DIR=x86_64-svm ;;
    *) printf 'run-in-qemu.sh: the first argument must be --arch aarch64|x86_64\n' >&2; exit 2 ;;
esac
# shellcheck source-path=SCRIPTDIR source=../aarch64/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../$ARCH_DIR/lib.sh"

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
usage_die() { printf 'run-in-qemu.sh: %s\n' "$*" >&2; usage >&2; exit 2; }

MODE="" KERNEL="" TIMEOUT=300 CPU="" SMP=2 MEM=2G APPEND="" LOG="" QUIET=0 KEEP=0 TCG_THREADS=single
BINS=() CMDS=() FETCH=() OUT_DIR=
while [ $# -gt 0 ]; do
    case "$1" in
        --mode) MODE="${2:?}"; shift 2 ;;
        --kernel) KERNEL="${2:?}"; shift 2 ;;
        --timeout) TIMEOUT="${2:?}"; shift 2 ;;
        --bin) BINS+=("${2:?}"); shift 2 ;;
        --cpu) CPU="${2:?}"; shift 2 ;;
        --smp) SMP="${2:?}"; shift 2 ;;
        --mem) MEM="${2:?}"; shift 2 ;;
        --append) APPEND="${2?}"; shift 2 ;;
        --tcg-threads) TCG_THREADS="${2:?}"; shift 2 ;;
        --log) LOG="${2:?}"; shift 2 ;;
        --quiet) QUIET=1; shift ;;
        --keep) KEEP=1; shift ;;
        --fetch) FETCH+=("${2:?}"); shift 2 ;;
        --out-dir) OUT_DIR="${2:?}"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        --) shift; CMDS=("$@"); break ;;
        *) usage_die "unknown argument: $1" ;;
    esac
done

# Per mode: kernel command line (MODE_ARG) or kvm_amd parameters
# (MODULE_ARG), and what the kernel must have said (KVM_LINE_RE finds the
# line, MODE_RE judges it).
MODE_ARG="" MODULE_ARG=""
case "$ARCH:$MODE" in
    aarch64:vhe) MODE_RE='VHE mode initialized successfully' ;;
    aarch64:nvhe) MODE_ARG="kvm-arm.mode=nvhe" ; MODE_RE='Hyp [nh]VHE mode initialized successfully' ;;
    aarch64:protected) MODE_ARG="kvm-arm.mode=protected" ; MODE_RE='Protected [nh]VHE mode initialized successfully' ;;
    aarch64:nested) MODE_ARG="kvm-arm.mode=nested" ; MODE_RE='VHE\+NV2? mode initialized successfully' ;;
    x86_64:npt) MODULE_ARG="npt=1" ; MODE_RE='Nested Paging enabled' ;;
    x86_64:shadow) MODULE_ARG="npt=0" ; MODE_RE='Nested Paging disabled' ;;
    *:) usage_die "--mode is required" ;;
    aarch64:*) usage_die "bad --mode '$MODE' (vhe|nvhe|protected|nested)" ;;
    *) usage_die "bad --mode '$MODE' (npt|shadow)" ;;
esac
case "$ARCH:$KERNEL" in
    aarch64:) KERNEL=6; [ "$MODE" != nested ] || KERNEL=7 ;;
    aarch64:6|aarch64:7) ;;
    aarch64:*) usage_die "bad --kernel '$KERNEL' (6|7)" ;;
    *:) ;;
    *) usage_die "--kernel is for --arch aarch64 only" ;;
esac
case "$TCG_THREADS" in
    single|multi) ;;
    *) usage_die "bad --tcg-threads '$TCG_THREADS' (single|multi)" ;;
esac
[[ "$TIMEOUT" =~ ^[0-9]+$ ]] || usage_die "bad --timeout '$TIMEOUT'"

[ -f "$HC_ENV_FILE" ] || hc_die "$HC_ENV_FILE missing: run ci/$ARCH_DIR/setup.sh first"
HC_MODULES=()
# shellcheck disable=SC1090
. "$HC_ENV_FILE"
if [ "$KERNEL" = 7 ]; then
    [ -n "${HC_KERNEL7:-}" ] || hc_die "$HC_ENV_FILE has no HC_KERNEL7 (older setup): run ci/$ARCH_DIR/setup.sh"
    HC_KERNEL="$HC_KERNEL7"
fi
if [ ! -f "$HC_KERNEL" ] || [ ! -x "$HC_BUSYBOX" ]; then
    hc_die "cache incomplete: run ci/$ARCH_DIR/setup.sh"
fi
QEMU_BIN=qemu-system-$ARCH
for b in ${BINS[@]+"${BINS[@]}"}; do
    if [ ! -f "$b" ] || [ ! -x "$b" ]; then hc_die "--bin $b: not an executable file"; fi
done

TOOLS=("$QEMU_BIN" cpio timeout)
[ "$ARCH" != "$(uname -m)" ] || TOOLS+=(readelf ldd)
for tool in "${TOOLS[@]}"; do
    command -v "$tool" >/dev/null || hc_die "$tool not found: run ci/$ARCH_DIR/setup.sh first"
done

# Old run dirs (console logs) are pruned after 3 days.
if [ -d "$HC_CACHE/runs" ]; then
    find "$HC_CACHE/runs" -mindepth 1 -maxdepth 1 -type d -mtime +3 -exec rm -rf {} + || true
fi
# Run dirs and latest-<mode>.log name the 7.x kernel: <mode>-k7-...
KTAG=""
[ "$KERNEL" != 7 ] || KTAG=-k7
RUN_DIR="$HC_CACHE/runs/$MODE$KTAG-$(date +%Y%m%d-%H%M%S)-$$"
mkdir -p "$RUN_DIR"
LOG="${LOG:-$RUN_DIR/console.log}"
mkdir -p "$(dirname "$LOG")"
hc_cleanup() {
    [ "$KEEP" -eq 1 ] || rm -rf "$RUN_DIR/root" "$RUN_DIR/initramfs.cpio"
}

# ------------------------------------------------------------- initramfs
hc_stage_begin "initramfs ($MODE)"
ROOT="$RUN_DIR/root"
mkdir -p "$ROOT"/{bin,sbin,dev,proc,sys,tmp,hc,usr/bin,usr/sbin}
cp "$HC_BUSYBOX" "$ROOT/bin/busybox"
for b in ${BINS[@]+"${BINS[@]}"}; do
    cp "$b" "$ROOT/bin/$(basename "$b")"
    # Only an ELF with an interpreter, and only of this host's arch, is
    # handed to ldd (which runs the loader on it).
    if [ "$ARCH" = "$(uname -m)" ] && readelf -l "$b" 2>/dev/null | grep -q 'program interpreter'; then
        for lib in $(ldd "$b" | grep -o '/[^ ]*'); do
            mkdir -p "$ROOT$(dirname "$lib")"
            cp -L "$lib" "$ROOT$lib"
        done
    fi
done
# Modules in load order (x86_64: kvm_amd is one); /init insmods them.
mkdir -p "$ROOT/lib/modules"
: >"$ROOT/hc/modules"
for m in ${HC_MODULES[@]+"${HC_MODULES[@]}"}; do
    cp "$m" "$ROOT/lib/modules/"
    args=""
    [ "$(basename "$m")" != kvm-amd.ko ] || args="$MODULE_ARG"
    printf '%s %s\n' "$(basename "$m")" "$args" >>"$ROOT/hc/modules"
done
i=0
for c in ${CMDS[@]+"${CMDS[@]}"}; do
    i=$((i + 1))
    printf '%s\n' "$c" >"$ROOT/hc/cmd.$i"
done
NCMDS=$i
echo "$NCMDS" >"$ROOT/hc/count"
echo "$MODE" >"$ROOT/hc/mode"
: >"$ROOT/hc/fetch"
for f in ${FETCH[@]+"${FETCH[@]}"}; do
    case "$f" in
        /*) ;;
        *) usage_die "--fetch $f: give an absolute guest path (commands run in /tmp)" ;;
    esac
    printf '%s\n' "$f" >>"$ROOT/hc/fetch"
done
cat >"$ROOT/init" <<'INIT'
#!/bin/busybox sh
# Generated by ci/lib/run-in-qemu.sh.
/bin/busybox --install -s /bin
export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/tmp
mount -t devtmpfs devtmpfs /dev
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t tmpfs tmpfs /tmp
# From here on only warnings and worse reach the console, so kernel chatter
# does not split our marker lines (the full log stays in dmesg).
echo 4 >/proc/sys/kernel/printk
while read -r mod args; do
    # shellcheck disable=SC2086 # module parameters are words
    insmod "/lib/modules/$mod" $args || echo "=== HC-INSMOD-FAILED $mod"
done </hc/modules
export HC_MODE="$(cat /hc/mode)"
echo "=== HC-BOOT uptime=$(cut -d' ' -f1 /proc/uptime)s kernel=$(uname -r)"
echo "=== HC-CMDLINE $(cat /proc/cmdline)"
dmesg | grep -i kvm | sed 's/^/=== HC-KVM /'
echo "=== HC-CPUINFO (head)"
cat /proc/cpuinfo | head
n=$(cat /hc/count)
i=1
fail=0
while [ "$i" -le "$n" ]; do
    echo "=== HC-CMD $i: $(cat /hc/cmd.$i)"
    t0=$(cut -d' ' -f1 /proc/uptime)
    (cd /tmp && exec sh /hc/cmd.$i)
    rc=$?
    echo "=== HC-RC $i $rc t=$(awk -v a="$t0" '{ printf "%.2f", $1 - a }' /proc/uptime)s"
    [ "$rc" -eq 0 ] || fail=1
    i=$((i + 1))
done
while read -r f; do
    if [ -f "$f" ]; then
        echo "=== HC-FILE-BEGIN $f sha256=$(sha256sum "$f" | cut -d' ' -f1)"
        gzip -c "$f" | base64
        echo "=== HC-FILE-END $f"
    else
        echo "=== HC-FILE-MISSING $f"
    fi
done </hc/fetch
if [ "$fail" -ne 0 ]; then
    echo "=== HC-DMESG-TAIL"
    dmesg | tail -n 30
fi
echo "=== HC-DONE uptime=$(cut -d' ' -f1 /proc/uptime)s"
sync
poweroff -f
INIT
chmod 755 "$ROOT/init"

# newc entry for the /dev/console char device (5,1), written by hand so no
# mknod (root) is needed; the kernel accepts concatenated cpio archives.
newc_entry() { # name mode rdevmajor rdevminor
    local name="$1" namesize=$((${#1} + 1)) pad
    printf '070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X' \
        0 "$2" 0 0 1 0 0 0 0 "$3" "$4" "$namesize" 0
    printf '%s\0' "$name"
    pad=$(((4 - (110 + namesize) % 4) % 4))
    head -c "$pad" /dev/zero
}
CPIO="$RUN_DIR/initramfs.cpio"
(cd "$ROOT" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$CPIO"
{
    newc_entry dev/console $((0020600)) 5 1
    newc_entry 'TRAILER!!!' 0 0 0
} >>"$CPIO"
hc_stage_end "$(du -h "$CPIO" | cut -f1)"

# ------------------------------------------------------------------- boot
QEMU_LOG="$RUN_DIR/qemu.log"
# shellcheck disable=SC2054 # the commas are QEMU's
case "$ARCH" in
    aarch64) MACHINE=(-M virt,virtualization=on,gic-version=3)
        CPU="${CPU:-max,pauth-impdef=on}" CONSOLE=ttyAMA0
        KVM_LINE_RE='kvm \[[0-9]+\]: [A-Za-z0-9+ ]*mode initialized successfully' ;;
    # -d cpu_reset: QEMU logs "Triple fault" when it resets the whole
    # (L1) CPU, never for a triple fault in guest mode (that is a SHUTDOWN
    # exit to kvm_amd), so the log tells QEMU's failures from hypclear's.
    x86_64) MACHINE=(-accel "tcg,thread=$TCG_THREADS" -M q35 -d cpu_reset -D "$QEMU_LOG")
        CPU="${CPU:-EPYC,+svm}" CONSOLE=ttyS0
        KVM_LINE_RE='kvm_amd: Nested Paging [a-z]+' ;;
esac
QEMU_CMD=("$QEMU_BIN"
    "${MACHINE[@]}"
    -cpu "$CPU"
    -smp "$SMP" -m "$MEM"
    -nodefaults -no-user-config -display none -monitor none
    -serial stdio -no-reboot
    -kernel "$HC_KERNEL" -initrd "$CPIO"
    -append "console=$CONSOLE panic=-1 $MODE_ARG $APPEND")
hc_stage_begin "qemu boot+run ($MODE)"
hc_log "log: $LOG"
hc_log "${QEMU_CMD[*]}"
set +e
if [ "$QUIET" -eq 1 ]; then
    timeout -k 10 "$TIMEOUT" "${QEMU_CMD[@]}" </dev/null >"$LOG" 2>&1
    QRC=$?
else
    timeout -k 10 "$TIMEOUT" "${QEMU_CMD[@]}" </dev/null 2>&1 | tee "$LOG"
    QRC=${PIPESTATUS[0]}
fi
set -e
hc_stage_end "qemu exit status $QRC"
ln -sfn "$LOG" "$HC_CACHE/runs/latest-$MODE$KTAG.log"

# ---------------------------------------------------------------- verdict
CLEAN="$RUN_DIR/console.clean"
tr -d '\r' <"$LOG" >"$CLEAN"
show_tail() {
    echo "----- last 40 console lines ($LOG) -----"
    tail -n 40 "$CLEAN"
    echo "-----"
}
verdict_fail() { # rc message...
    local rc="$1"; shift
    show_tail
    hc_log "FAIL [$MODE$KTAG]: $*"
    exit "$rc"
}

if [ "$QRC" -eq 124 ] || [ "$QRC" -eq 137 ]; then
    last_cmd="$(grep -oE '=== HC-CMD [0-9]+: .*' "$CLEAN" | tail -n 1 || true)"
    verdict_fail 124 "TIMEOUT after ${TIMEOUT}s${last_cmd:+; last started: ${last_cmd#=== }}"
fi
# QEMU's own triple fault is retryable only when no command had failed
# before it: a hypclear failure is never retried away.
if [ -f "$QEMU_LOG" ] && grep -q 'Triple fault' "$QEMU_LOG" &&
        ! grep -qE '^=== HC-RC [0-9]+ [1-9][0-9]* ' "$CLEAN"; then
    verdict_fail 75 "QEMU logged a triple fault outside guest mode ($QEMU_LOG): its own emulation failed, not hypclear"
fi
[ "$QRC" -eq 0 ] || verdict_fail 1 "qemu exited with status $QRC"
grep -q '=== HC-BOOT' "$CLEAN" || verdict_fail 1 "guest never reached /init"

KVM_LINE="$(grep -oE "=== HC-KVM .*$KVM_LINE_RE" "$CLEAN" | head -n 1 || true)"
KVM_LINE="${KVM_LINE#=== HC-KVM }"
KVM_LINE="$(sed -E 's/^\[ *[0-9.]+\] //' <<<"$KVM_LINE")"
if grep -q '=== HC-INSMOD-FAILED' "$CLEAN"; then
    verdict_fail 1 "$(grep -m1 -o 'HC-INSMOD-FAILED .*' "$CLEAN")"
fi
if ! grep -qE "$MODE_RE" <<<"$KVM_LINE"; then
    grep -E '=== HC-KVM' "$CLEAN" | sed 's/^/  /' >&2 || true
    verdict_fail 1 "KVM mode mismatch: wanted '$MODE_RE', kernel said '${KVM_LINE:-<no KVM init line>}'"
fi

FAILED=()
for ((i = 1; i <= NCMDS; i++)); do
    rc_line="$(grep -oE "=== HC-RC $i [0-9]+ .*" "$CLEAN" | head -n 1 || true)"
    if [ -z "$rc_line" ]; then
        FAILED+=("#$i did not finish: $(head -n 1 "$ROOT/hc/cmd.$i")")
        continue
    fi
    rc="$(awk '{ print $4 }' <<<"$rc_line")"
    [ "$rc" -eq 0 ] || FAILED+=("#$i exit $rc: $(head -n 1 "$ROOT/hc/cmd.$i")")
done
grep -q '=== HC-DONE' "$CLEAN" || FAILED+=("/init did not reach HC-DONE (guest crashed?)")
if [ "${#FETCH[@]}" -gt 0 ]; then
    OUT_DIR="${OUT_DIR:-$RUN_DIR/files}"
    mkdir -p "$OUT_DIR"
fi
for f in ${FETCH[@]+"${FETCH[@]}"}; do
    dest="$OUT_DIR/$(basename "$f")"
    begin="$(grep -m1 -F "=== HC-FILE-BEGIN $f sha256=" "$CLEAN" || true)"
    if [ -z "$begin" ]; then
        if grep -qxF "=== HC-FILE-MISSING $f" "$CLEAN"; then
            FAILED+=("--fetch $f: no such file in the guest (did the command write it?)")
        else
            FAILED+=("--fetch $f: not printed (guest stopped before the HC-FILE markers)")
        fi
        continue
    fi
    want="${begin##*sha256=}"
    # The base64 lines between the markers; kernel messages cannot be told
    # apart from them here, but the sha256 check catches any interleaving.
    if ! awk -v b="$begin" -v e="=== HC-FILE-END $f" \
            '$0 == e { exit } on { print } $0 == b { on = 1 }' "$CLEAN" |
            base64 -d 2>/dev/null | gzip -dc >"$dest" 2>/dev/null; then
        FAILED+=("--fetch $f: the console copy does not decode (interleaved kernel messages? see $LOG)")
        continue
    fi
    got="$(sha256sum "$dest" | cut -d' ' -f1)"
    if [ "$got" != "$want" ]; then
        FAILED+=("--fetch $f: sha256 $got of the console copy, guest said $want (see $LOG)")
        continue
    fi
    hc_log "fetched $f -> $dest ($(wc -c <"$dest") bytes, sha256 ok)"
done
if [ "${#FAILED[@]}" -gt 0 ]; then
    for f in "${FAILED[@]}"; do hc_log "failed: $f"; done
    verdict_fail 1 "${#FAILED[@]} problem(s)"
fi
hc_log "PASS [$MODE$KTAG]: '$KVM_LINE'; $NCMDS command(s) exited 0; $(grep -oE '=== HC-(BOOT|DONE) uptime=[0-9.]+s' "$CLEAN" | sed 's/=== HC-//' | tr '\n' ' ')"
