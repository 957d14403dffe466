#!/usr/bin/env bash
# Run command lines side by side in "lanes", each with its own log. .ci/run
# runs its QEMU boots in two lanes: each boot keeps about one core busy, and
# the CI machine has two.
#
#   ci/lib/lanes.sh LOG_DIR NAME 'command line' [NAME 'command line']...
#
# Each command line runs under `bash -c` (stdin /dev/null) with its output
# in LOG_DIR/lane<N>-<NAME>.log. The first lane to fail gets the others
# killed; so does any exit of this script (traps). Killing takes a lane's
# whole process tree: `timeout`, and so QEMU, sits in a process group of its
# own. Once all lanes are done, their logs are printed in full in argument
# order, then one line with the wall time and each lane's own.
# Exit status: 0 if every lane passed, else that of the first to fail.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
if [ $# -lt 3 ] || [ $(($# % 2)) -ne 1 ]; then usage; fi
LOG_DIR="$1"
shift
NAMES=() CMDS=() LOGS=() PIDS=() RCS=() SECS=() STARTS=()
while [ $# -gt 0 ]; do
    NAMES+=("$1") CMDS+=("$2")
    shift 2
done
mkdir -p "$LOG_DIR"
say() { printf '=== lanes: %s\n' "$*"; }

# Stop a process before listing its children, so that it cannot start one
# unseen, then terminate children first. Every pid goes to KILLED for the
# SIGKILL of stragglers.
KILLED=()
kill_tree() {
    local p="$1" c
    kill -STOP "$p" 2>/dev/null || return 0
    KILLED+=("$p")
    for c in $(pgrep -P "$p" || true); do kill_tree "$c"; done
    kill -TERM "$p" 2>/dev/null || true
    kill -CONT "$p" 2>/dev/null || true
}
kill_lanes() {
    local i p
    for i in "${!PIDS[@]}"; do
        [ -z "${RCS[$i]:-}" ] || continue
        kill_tree "${PIDS[$i]}"
        RCS[i]=killed SECS[i]=$((SECONDS - STARTS[i]))
    done
    [ "${#KILLED[@]}" -gt 0 ] || return 0
    # QEMU exits on SIGTERM at once; give everything 10 s, then SIGKILL.
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        alive ${KILLED[@]+"${KILLED[@]}"} || break
        sleep 1
    done
    for p in "${KILLED[@]}"; do
        if alive "$p"; then kill -KILL "$p" 2>/dev/null || true; fi
    done
    KILLED=()
    wait 2>/dev/null || true
}
# True if any of the pids is alive (a zombie is not).
alive() {
    local p s
    for p in "$@"; do
        s="$(cat "/proc/$p/stat" 2>/dev/null || true)"
        s="${s##*) }"
        [ -z "$s" ] || [ "${s%% *}" = Z ] || return 0
    done
    return 1
}
trap kill_lanes EXIT
interrupted() { say "interrupted: killing the lanes (logs in $LOG_DIR)"; exit "$1"; }
trap 'interrupted 130' INT
trap 'interrupted 143' TERM
trap 'interrupted 129' HUP

T0=$SECONDS
for i in "${!NAMES[@]}"; do
    LOGS+=("$LOG_DIR/lane$((i + 1))-${NAMES[$i]}.log")
    STARTS+=("$SECONDS")
    bash -c "${CMDS[$i]}" </dev/null >"${LOGS[$i]}" 2>&1 &
    PIDS+=("$!")
    say "lane $((i + 1)) (${NAMES[$i]}) started: ${CMDS[$i]} (log: ${LOGS[$i]})"
done

FIRST_FAIL=""
left=${#PIDS[@]}
while [ "$left" -gt 0 ]; do
    running=()
    for i in "${!PIDS[@]}"; do [ -n "${RCS[$i]:-}" ] || running+=("${PIDS[$i]}"); done
    rc=0
    wait -n -p done_pid "${running[@]}" || rc=$?
    for i in "${!PIDS[@]}"; do
        [ "${PIDS[$i]}" = "$done_pid" ] || continue
        RCS[i]=$rc SECS[i]=$((SECONDS - STARTS[i]))
        left=$((left - 1))
        say "lane $((i + 1)) (${NAMES[$i]}) finished: exit status $rc after ${SECS[$i]} s"
        if [ "$rc" -ne 0 ] && [ -z "$FIRST_FAIL" ]; then
            FIRST_FAIL=$i
            say "lane $((i + 1)) failed: killing the others"
            kill_lanes
            left=0
        fi
    done
done
WALL=$((SECONDS - T0))

for i in "${!NAMES[@]}"; do
    echo "===== lane $((i + 1)) (${NAMES[$i]}): exit status ${RCS[$i]} after ${SECS[$i]} s; log ${LOGS[$i]}"
    cat "${LOGS[$i]}"
    echo "===== end of lane $((i + 1)) (${NAMES[$i]})"
done
times=""
for i in "${!NAMES[@]}"; do
    times+="${times:+, }lane $((i + 1)) ${NAMES[$i]} ${SECS[$i]} s"
    [ "${RCS[$i]}" = 0 ] || times+=" (${RCS[$i]})"
done
echo "=== lanes took $WALL s wall ($times)"
if [ -n "$FIRST_FAIL" ]; then
    i=$FIRST_FAIL
    echo "=== FAILED: lane $((i + 1)) (${NAMES[$i]}), exit status ${RCS[$i]}; its log: ${LOGS[$i]}"
    exit "${RCS[$i]}"
fi
