#!/usr/bin/env bash
# hypclear's own speed, so regressions are visible (no thresholds: it only
# reports). Runs `hypclear run` N times (default 3) and prints, per run and as
# the median: the command's wall time (process start to exit, JSON written),
# the run's own elapsed time, first-hypercall latency after process start
# and the checker's throughput (from the run's JSON summary), plus the
# process's user+sys CPU time (both cores used means CPU > wall). Then the
# machine's memcmp bandwidth (ci/memcmp-bw.c) at the sizes the checker
# compares, weighted by the bytes the run checked at each: what the checker
# could reach on this machine.
#
#   ci/self-bench.sh [N] [extra hypclear args...]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-3}
shift || true
cargo build --release --quiet
bin=target/release/hypclear
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for i in $(seq 1 "$n"); do
    /usr/bin/time -f '%e %U %S' -o "$tmp/time.$i" "$bin" run --json "$tmp/run.$i.json" "$@" >/dev/null
done
bw=""
if command -v cc >/dev/null && cc -O2 -fno-builtin-memcmp -o "$tmp/memcmp-bw" ci/memcmp-bw.c 2>/dev/null; then
    "$tmp/memcmp-bw" $((2 << 20)) $((8 << 20)) $((32 << 20)) > "$tmp/bw"
    bw="$tmp/bw"
fi
python3 - "$tmp" "$n" "$bw" <<'PY'
import json, statistics, sys
tmp, n, bw = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = []
for i in range(1, n + 1):
    d = json.load(open(f"{tmp}/run.{i}.json"))
    s = d["summary"]
    wall, u, sy = map(float, open(f"{tmp}/time.{i}").read().split())
    rows.append((wall, s["elapsed_s"], s["first_hypercall_ms"], s["checker_gb_per_s"], u + sy, s["passed"]))
print(f"{'run':>4} {'wall s':>7} {'run s':>7} {'first hc ms':>12} {'checker GB/s':>13} {'cpu s':>7} {'checks':>7}")
for i, r in enumerate(rows, 1):
    print(f"{i:>4} {r[0]:>7.2f} {r[1]:>7.2f} {r[2]:>12.1f} {r[3]:>13.1f} {r[4]:>7.2f} {r[5]:>7}")
med = [statistics.median(c) for c in zip(*rows)]
print(f"{'med':>4} {med[0]:>7.2f} {med[1]:>7.2f} {med[2]:>12.1f} {med[3]:>13.1f} {med[4]:>7.2f}")
if bw:
    rate = {int(a): float(b) for a, b in (l.split() for l in open(bw))}
    print("machine memcmp GB/s: " + ", ".join(f"{k >> 20} MB {v:.1f}" for k, v in sorted(rate.items())))
    # Bytes the last run checked per target size, each at the memcmp rate
    # of the nearest measured size at or above it (2 MB for smaller ones).
    sizes = sorted(rate)
    t = total = 0
    for c in d["checks"]:
        if c["verdict"] == "skipped":
            continue
        b = c["size"] * c["count"]
        k = next((x for x in sizes if b <= x), sizes[-1])
        t += b / (rate[k] * 1e9)
        total += b
    if t > 0:
        print(f"memcmp bandwidth for this run's size mix: {total / t / 1e9:.1f} GB/s (checker: {med[3]:.1f})")
PY
