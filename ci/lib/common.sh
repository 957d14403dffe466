# shellcheck shell=bash
# Helpers shared by the QEMU CI stages (ci/aarch64, ci/x86_64-svm): logging,
# stage timing and the EXIT trap. Sourced by each stage's lib.sh, which
# sets HC_TAG (the log prefix) first. Never executed.

hc_log() { printf '[%s] %s\n' "${HC_TAG:-ci}" "$*" >&2; }
hc_die() { printf '[%s] ERROR: %s\n' "${HC_TAG:-ci}" "$*" >&2; exit 1; }

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

# Base URI of the Debian archive as configured on this machine.
hc_debian_uri() {
    local f uri=""
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -e "$f" ] || continue
        uri="$(awk '/^URIs:/ && $2 !~ /security/ && $2 ~ /debian\/?$/ { print $2; exit }' "$f")"
        [ -n "$uri" ] && break
    done
    if [ -z "$uri" ] && [ -e /etc/apt/sources.list ]; then
        uri="$(awk '$1 == "deb" && $0 !~ /security/ { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' /etc/apt/sources.list)"
    fi
    echo "${uri:-http://deb.debian.org/debian}"
}

# On bookworm, add bookworm-backports as an apt source unless it is there
# (QEMU 10 and the 6.12 kernels come from it). Args: sudo command words.
hc_ensure_backports() {
    local codename
    codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
    [ "$codename" = bookworm ] || return 0
    if grep -rqsE '^[^#]*bookworm-backports' \
            /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; then
        return 0
    fi
    hc_log "adding apt source bookworm-backports ($(hc_debian_uri))"
    printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: %s\n' \
        "$(hc_debian_uri)" /usr/share/keyrings/debian-archive-keyring.gpg |
        "$@" tee /etc/apt/sources.list.d/hypclear-bookworm-backports.sources >/dev/null
}
