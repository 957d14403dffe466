#!/usr/bin/env bash
# The x86_64 SVM stage of .ci/run: hypclear at CPL0 under real KVM (kvm_amd,
# nested paging) inside QEMU, where TCG emulates SVM. The host's own KVM is
# PVM (no VMX/SVM: CPL0 there is emulated), so this is the only CI run of the
# path every VMX/SVM user takes.
#
#   1. setup.sh (QEMU 10 from bookworm-backports, Debian's 6.12 amd64 kernel,
#      its KVM modules and busybox-static, downloaded, never installed)
#   2. the host's own release hypclear (the one the x86 stage tested; the
#      initramfs gets its shared libraries, so no second build for a
#      crt-static target), and a kernel-tree blob built on this host with
#      `hypclear blob --kernel-tree` (the tree: ci/kernel-source.sh)
#   3. one boot (ci.sh; retried only for QEMU's own triple fault): info
#      (svm, NPT, --cpl auto picks CPL0), the suite (--geometry full: every
#      size and offset, what the hypervisor calls), selftest, the hostile
#      guests (the corrupt-harness ones must report the registers lost to
#      kvm_amd's re-INIT), the suite on the kernel blob, and a short bench,
#      all at CPL0
# Cheap on purpose: 64 MB guests, one mode, one boot.
#
#   ci/x86_64-svm/hypclear-stage.sh [prepare | boot]
#
# No argument: the whole stage. .ci/run runs steps 1-2 (`prepare`: apt,
# downloads, cargo) before its QEMU lanes (ci/lib/lanes.sh) and step 3
# (`boot`, which installs and builds nothing) in one of them.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$HC_REPO"
T0="$(hc_now)"
PART="${1:-all}"
case "$PART:$#" in
    all:0 | prepare:1 | boot:1) ;;
    *) hc_die "usage: $0 [prepare | boot]" ;;
esac
BIN="$HC_REPO/target/release/hypclear"
KBLOB="$HC_CACHE/kernel-x86_64.blob"

if [ "$PART" != boot ]; then
    "$HC_CI_DIR/setup.sh"

    hc_stage_begin "hypclear for the host and the guest"
    # Already built (and tested) by the x86 stage in .ci/run: then a no-op.
    cargo build --release --quiet --bin hypclear
    hc_stage_end

    hc_stage_begin "kernel blob (hypclear blob --kernel-tree on this host)"
    KTREE="${HYPCLEAR_KERNEL_TREE:-$(bash "$HC_REPO/ci/kernel-source.sh" 6.12 | tail -n1)}"
    "$BIN" blob --kernel-tree "$KTREE" -o "$KBLOB"
    # run-in-qemu.sh --bin copies executable files to the guest's /bin.
    chmod +x "$KBLOB"
    hc_stage_end
fi
if [ "$PART" = prepare ]; then
    hc_log "x86_64 SVM stage prepare done in $(hc_elapsed "$T0")s"
    exit 0
fi
for f in "$BIN" "$KBLOB"; do
    [ -x "$f" ] || hc_die "$f missing: run $0 prepare first"
done

# TCG runs the nested guest far slower than hardware: the watchdog's 5 s
# default is for hardware. No progress bars on the serial console.
H='HYPCLEAR_PROGRESS=0 hypclear --timeout 60'
LOST='registers lost: the vCPU was re-initialised by KVM on shutdown'
"$HC_CI_DIR/ci.sh" --no-setup --timeout "${HYPCLEAR_X86_SVM_TIMEOUT:-900}" --bin "$BIN" --bin "$KBLOB" -- \
    "$H info --mem 64MB --json /tmp/info.json >/tmp/info.txt; rc=\$?; cat /tmp/info.txt; [ \$rc -eq 0 ] &&
     grep -q '\"kvm_flavour\": \"svm\"' /tmp/info.json && grep -q '\"kvm_paging\": \"npt\"' /tmp/info.json &&
     grep -q 'svm, NPT' /tmp/info.txt && grep -q 'CPL0 (kernel-level guest code runs natively' /tmp/info.txt" \
    "$H run --cpl 0 --geometry full --mem 64MB --seed 1" \
    "$H selftest --cpl 0 --mem 64MB" \
    "HYPCLEAR_PROGRESS=0 hypclear --timeout 20 selftest --hostile --cpl 0 --mem 64MB --json /tmp/hostile.json &&
     n=\$(grep -c '$LOST' /tmp/hostile.json) && echo \"'$LOST' in \$n cases\" && [ \"\$n\" -eq 2 ]" \
    "$H run --cpl 0 --mem 64MB --seed 1 --blob /bin/$(basename "$KBLOB")" \
    "$H bench clear_page -s 4MB -k 4KB,2MB -f all --sessions 1 --repeats 2 --config both --cpl 0"

hc_log "hypclear x86_64 SVM stage$([ "$PART" = all ] || echo " $PART") passed in $(hc_elapsed "$T0")s"
