# shellcheck shell=bash
# Shared helpers for the aarch64 CI scripts. Sourced, never executed.

HC_CI_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
HC_REPO="$(cd "$HC_CI_DIR/../.." && pwd)"
HC_CACHE="${HYPCLEAR_AARCH64_CACHE:-$HC_REPO/target/aarch64-ci}"
# Written by setup.sh, sourced by run-in-qemu.sh: HC_KERNEL=, HC_BUSYBOX=, HC_QEMU=, ...
# shellcheck disable=SC2034 # used by the scripts that source this file
HC_ENV_FILE="$HC_CACHE/env.sh"

hc_log() { printf '[aarch64-ci] %s\n' "$*" >&2; }
hc_die() { printf '[aarch64-ci] ERROR: %s\n' "$*" >&2; exit 1; }

hc_now() { date +%s.%N; }
hc_elapsed() { awk -v a="$1" -v b="$(hc_now)" 'BEGIN { printf "%.1f", b - a }'; }

# Stage timing. Deliberately not a wrapper function: `set -e` is disabled
# inside anything run from an `||`/`if` context, so a wrapper would hide errors.
HC_STAGE=""
HC_STAGE_T0=""
hc_stage_begin() {
    HC_STAGE="$1"
    HC_STAGE_T0="$(hc_now)"
    hc_log "stage '$HC_STAGE' ..."
}
# shellcheck disable=SC2120 # optional note argument
hc_stage_end() {
    hc_log "stage '$HC_STAGE' took $(hc_elapsed "$HC_STAGE_T0")s${1:+ ($1)}"
    HC_STAGE=""
}
# EXIT trap: report the stage that was running when the script died, then run
# the script's own cleanup hook (hc_cleanup) if it defines one.
hc__on_exit() {
    local rc=$?
    if [ -n "$HC_STAGE" ]; then
        hc_log "stage '$HC_STAGE' FAILED (rc=$rc) after $(hc_elapsed "$HC_STAGE_T0")s"
    fi
    if declare -F hc_cleanup >/dev/null; then hc_cleanup || true; fi
    exit "$rc"
}
trap hc__on_exit EXIT
