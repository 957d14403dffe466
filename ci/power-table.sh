#!/usr/bin/env bash
# The power table of docs/method.md (issue 37): a slow-memset mutant
# (ci/memset-delay.sh) against its pristine tree, and the tree against an
# identical copy (the null), measured the old way (sessions, one VM per
# side; `compare FILE`) and the new way (`--detect`: both sides in one
# guest, call by call). One line per invocation on stdout:
#   mode size i verdict change mde wall_s
#
#   ci/power-table.sh MODE A B SIZE N [bench options...]
#     MODE: sessions | detect   A, B: kernel trees
set -euo pipefail
mode=${1:?usage: $0 sessions|detect A B SIZE N [bench options...]}
a=${2:?} b=${3:?} size=${4:?} n=${5:?}
shift 5
hc=${HYPCLEAR:-hypclear}
json=$(mktemp --suffix .json)
trap 'rm -f "$json"' EXIT
for i in $(seq 1 "$n"); do
    t0=$(date +%s.%N)
    case $mode in
        sessions)
            "$hc" bench memset -s "$size" --kernel-tree "$a" --kernel-tree "$b" --json "$json" "$@" >/dev/null 2>&1
            t1=$(date +%s.%N)
            # The guest row of compare: its mark and MDE.
            row=$("$hc" compare "$json" | grep 'guest bytes/sec' | head -1)
            verdict=$(grep -o '(R)\|(I)\|(=)' <<<"$row" || echo '-')
            change=$(grep -o '[-+][0-9.]*% \[' <<<"$row" | head -1 | tr -d ' [')
            mde=$(awk -F'┆' '{print $NF}' <<<"$row" | tr -d ' │')
            ;;
        detect)
            "$hc" bench memset -s "$size" --kernel-tree "$a" --kernel-tree "$b" --json "$json" "$@" >/dev/null 2>&1
            t1=$(date +%s.%N)
            read -r verdict change mde < <(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["ab"][0]
print(r["verdict"], "%+.2f%%" % r["change_pct"], "%.2f%%" % r["mde_pct"])' "$json")
            ;;
        *) echo "unknown mode $mode" >&2; exit 2 ;;
    esac
    echo "$mode $size $i $verdict $change $mde $(echo "$t1 - $t0" | bc)"
done
