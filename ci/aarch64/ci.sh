#!/usr/bin/env bash
# The whole aarch64 CI stage: setup, build the KVM probe, then boot each KVM
# mode once and run the probe plus any extra binaries/commands given.
#
#   ci/aarch64/ci.sh [--no-setup] [--timeout SECS] [--bin FILE]... [--fetch GUEST_PATH]...
#                    [-- 'cmd line'...]
#
# --no-setup skips setup.sh (installs and downloads): for callers that ran it
# already, e.g. beside another QEMU run (.ci/run's lanes).
#
# --fetch copies a guest file out after each mode's commands (see
# run-in-qemu.sh); it lands in <cache>/runs/<mode>-<time>-<pid>/files/.
#
# Modes: $HYPCLEAR_AARCH64_MODES (default "vhe nvhe protected"), each
# MODE[@KERNEL][:CPU]. @7 boots the 7.x kernel (run-in-qemu.sh --kernel 7;
# "nested" implies it), e.g. "protected@7". A CPU model after a colon, e.g.
# "protected:cortex-a57" (no VHE on the CPU, so pKVM runs as "Protected
# nVHE" rather than "Protected hVHE").
# Stops at the first failing mode; exit status is that of run-in-qemu.sh.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TIMEOUT=300 SETUP=1
EXTRA=()
CMDS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --no-setup) SETUP=0; shift ;;
        --timeout) TIMEOUT="${2:?}"; shift 2 ;;
        --bin) EXTRA+=(--bin "${2:?}"); shift 2 ;;
        --fetch) EXTRA+=(--fetch "${2:?}"); shift 2 ;;
        --) shift; CMDS=("$@"); break ;;
        *) hc_die "unknown argument: $1 (see header of $0)" ;;
    esac
done
CI_T0="$(hc_now)"

[ "$SETUP" -eq 0 ] || "$HC_CI_DIR/setup.sh"

hc_stage_begin "build probe"
PROBE="$("$HC_CI_DIR/probe/build.sh")"
hc_stage_end

SUMMARY=()
for spec in ${HYPCLEAR_AARCH64_MODES:-vhe nvhe protected}; do
    mode_kernel="${spec%%:*}"
    mode="${mode_kernel%%@*}"
    cpu_args=()
    [ "$spec" = "$mode_kernel" ] || cpu_args=(--cpu "${spec#*:}")
    [ "$mode_kernel" = "$mode" ] || cpu_args+=(--kernel "${mode_kernel#*@}")
    t0="$(hc_now)"
    rc=0
    "$HC_CI_DIR/run-in-qemu.sh" --mode "$mode" ${cpu_args[@]+"${cpu_args[@]}"} --timeout "$TIMEOUT" \
        --bin "$PROBE" ${EXTRA[@]+"${EXTRA[@]}"} -- \
        "hc-kvm-probe$([ "$spec" = "$mode_kernel" ] && echo ' --require-mops')" ${CMDS[@]+"${CMDS[@]}"} || rc=$?
    SUMMARY+=("$(printf '%-24s %s %5ss' "$spec" "$([ "$rc" -eq 0 ] && echo PASS || echo "FAIL($rc)")" "$(hc_elapsed "$t0")")")
    if [ "$rc" -ne 0 ]; then
        hc_log "summary (stopped at first failure):"
        printf '  %s\n' "${SUMMARY[@]}" >&2
        exit "$rc"
    fi
done
hc_log "summary:"
printf '  %s\n' "${SUMMARY[@]}" >&2
hc_log "aarch64 CI stage passed in $(hc_elapsed "$CI_T0")s"
