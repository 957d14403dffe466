#!/usr/bin/env bash
# hypclear's own speed, so regressions are visible (no thresholds: it only
# reports). Runs `hypclear run` N times (default 3) and prints, per run and as
# the median: wall time, first-hypercall latency after process start and the
# checker's throughput, all from the run's own JSON summary, plus the
# process's user+sys CPU time (both cores used means CPU > wall).
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
    /usr/bin/time -f '%U %S' -o "$tmp/time.$i" "$bin" run --json "$tmp/run.$i.json" "$@" >/dev/null
done
python3 - "$tmp" "$n" <<'PY'
import json, statistics, sys
tmp, n = sys.argv[1], int(sys.argv[2])
rows = []
for i in range(1, n + 1):
    s = json.load(open(f"{tmp}/run.{i}.json"))["summary"]
    u, sy = map(float, open(f"{tmp}/time.{i}").read().split())
    rows.append((s["elapsed_s"], s["first_hypercall_ms"], s["checker_gb_per_s"], u + sy, s["passed"]))
print(f"{'run':>4} {'wall s':>8} {'first hc ms':>12} {'checker GB/s':>13} {'cpu s':>7} {'checks':>7}")
for i, r in enumerate(rows, 1):
    print(f"{i:>4} {r[0]:>8.2f} {r[1]:>12.1f} {r[2]:>13.1f} {r[3]:>7.2f} {r[4]:>7}")
med = [statistics.median(c) for c in zip(*rows)]
print(f"{'med':>4} {med[0]:>8.2f} {med[1]:>12.1f} {med[2]:>13.1f} {med[3]:>7.2f}")
PY
