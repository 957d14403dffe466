#!/usr/bin/env bash
# Boot the x86_64 kernel under QEMU (TCG, SVM emulated), load kvm_amd and
# run command lines in the guest (ci/lib/run-in-qemu.sh --arch x86_64),
# retrying only when QEMU itself triple-faulted.
#
#   ci/x86_64-svm/ci.sh [--no-setup] [--timeout SECS] [--retries N] [--mode npt|shadow]
#                       [--mem SIZE] [--tcg-threads single|multi] [--append ARGS]
#                       [--bin FILE]... [--fetch GUEST_PATH]... [-- 'cmd line'...]
#
# --no-setup skips setup.sh (installs and downloads): for callers that ran it
# already, e.g. beside another QEMU run (.ci/run's lanes).
#
# Retry policy: run-in-qemu.sh exits 75 only when QEMU logged a triple fault
# outside guest mode (its SVM emulation killed the L1 kernel) and no command
# had failed before it; that run is repeated, at most --retries times
# (default 2). Any other failure, a hypclear one above all, fails at once.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TIMEOUT=600 RETRIES=2 MODE=npt SETUP=1
EXTRA=()
CMDS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --no-setup) SETUP=0; shift ;;
        --timeout) TIMEOUT="${2:?}"; shift 2 ;;
        --retries) RETRIES="${2:?}"; shift 2 ;;
        --mode) MODE="${2:?}"; shift 2 ;;
        --mem|--tcg-threads|--bin|--fetch|--append) EXTRA+=("$1" "${2:?}"); shift 2 ;;
        --) shift; CMDS=("$@"); break ;;
        *) hc_die "unknown argument: $1 (see header of $0)" ;;
    esac
done
[[ "$RETRIES" =~ ^[0-9]+$ ]] || hc_die "bad --retries '$RETRIES'"
CI_T0="$(hc_now)"

[ "$SETUP" -eq 0 ] || "$HC_CI_DIR/setup.sh"

attempt=0
while :; do
    attempt=$((attempt + 1))
    t0="$(hc_now)"
    rc=0
    "$HC_CI_DIR/../lib/run-in-qemu.sh" --arch x86_64 --mode "$MODE" --timeout "$TIMEOUT" \
        ${EXTRA[@]+"${EXTRA[@]}"} -- ${CMDS[@]+"${CMDS[@]}"} || rc=$?
    hc_log "attempt $attempt ($MODE): exit status $rc after $(hc_elapsed "$t0")s"
    if [ "$rc" -ne 75 ]; then break; fi
    if [ "$attempt" -gt "$RETRIES" ]; then
        hc_log "QEMU triple-faulted on every one of $attempt attempts: giving up"
        break
    fi
    hc_log "QEMU's own triple fault (not hypclear's): retrying ($attempt of $RETRIES retries used)"
done
[ "$rc" -eq 0 ] || exit "$rc"
hc_log "x86_64 SVM run passed in $(hc_elapsed "$CI_T0")s ($attempt attempt(s))"
