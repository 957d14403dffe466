#!/usr/bin/env bash
# perf bench mem against hypclear bench for one throughput figure (issue
# 37): the seed's protocol, 16 runs of `perf bench mem memset` in host user
# space, `hypclear bench memset --precision 2.5` (a figure as precise as
# perf's, in no more time?) and `hypclear bench memset` as it comes (its
# default: +-1% on guest throughput and guest/host, at most 25 s of
# sessions), taken by turns in the same minutes. For each invocation
# it prints the wall time, the sample count, the mean in GB/sec (2^30
# bytes/s, perf's unit) and the 95% t interval's half width of that mean
# (perf: over its 16 runs; hypclear: over the guest's per-session means,
# and its guest/host interval).
#
#   ci/perf-side-by-side.sh [PAIRS] [SIZE] [PERF_FUNCTION] [HYPCLEAR_VARIANT]
#     defaults: 3 256MB x86-64-stosb erms   Env: HYPCLEAR (the binary)
set -euo pipefail
pairs=${1:-3} size=${2:-256MB} pf=${3:-x86-64-stosb} hv=${4:-erms}
hc=${HYPCLEAR:-hypclear}
command -v perf >/dev/null || { echo "perf-side-by-side: no perf (apt-get install linux-perf)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
now() { date +%s.%N; }
ci() { # values on stdin, one a line -> "n mean halfwidth%"
    python3 -c '
import statistics as st, sys
v = [float(x) for x in sys.stdin.read().split()]
# t quantiles (0.975) for 1..40 degrees of freedom; 1.96 beyond.
q = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
     2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
     2.060, 2.056, 2.052, 2.048, 2.045, 2.042, 2.040, 2.037, 2.035, 2.032, 2.030, 2.028,
     2.026, 2.024, 2.023, 2.021]
n, m = len(v), st.mean(v)
h = (q[n - 2] if n - 2 < len(q) else 1.96) * st.stdev(v) / n ** 0.5 if n > 1 else float("nan")
print(f"{n} {m:.2f} {100 * h / m:.2f}")'
}
printf '%-9s %4s %7s %4s %12s %10s %s\n' tool pair wall_s n "mean GB/sec" "CI +-%" note
for i in $(seq 1 "$pairs"); do
    t0=$(now)
    for _ in $(seq 1 16); do
        perf bench mem memset -s "$size" -f "$pf" 2>/dev/null | awk '/GB\/sec/ {print $1}'
    done > "$tmp/perf"
    t1=$(now)
    read -r n m h < <(ci < "$tmp/perf")
    printf '%-9s %4s %7.1f %4s %12s %10s %s\n' perf "$i" "$(echo "$t1 - $t0" | bc)" "$n" "$m" "$h" \
        "perf bench mem memset -s $size -f $pf, 16 runs"
    for precision in 2.5 default; do
        opt=()
        [ "$precision" = default ] || opt=(--precision "$precision")
        t0=$(now)
        "$hc" bench memset -f "$hv" -s "$size" --config vanilla "${opt[@]}" --json "$tmp/h.json" \
            >/dev/null 2>&1
        t1=$(now)
        python3 - "$tmp/h.json" > "$tmp/hc" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["cells"][0]
for s in c["guest_host"]["sessions"]:
    print(s["guest"] / 2**30)
PY
        read -r n m h < <(ci < "$tmp/hc")
        gh=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
g, p = d["cells"][0]["guest_host"], d["precision"]
(lo, hi), e = g["interval"], g["estimate"]
print(f"guest/host {e:.3f} +-{100 * (hi - lo) / 2 / e:.2f}%;",
      "reached" if p["reached"] else "NOT reached", "+-%g%%" % p["target_pct"])' "$tmp/h.json")
        printf '%-9s %4s %7.1f %4s %12s %10s %s\n' hypclear "$i" "$(echo "$t1 - $t0" | bc)" "$n" \
            "$m" "$h" "bench memset -f $hv -s $size --config vanilla --precision $precision \
(sessions; guest means); $gh"
    done
done
