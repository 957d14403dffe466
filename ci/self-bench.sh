#!/usr/bin/env bash
# hypclear's own speed, so regressions are visible (no thresholds: it only
# reports). Runs `hypclear run` N times (default 3) and prints, per run and as
# the median: the command's wall time (process start to exit, JSON written),
# the run's own elapsed time, the first hypercall's latency after main(),
# the checker's throughput (from the run's JSON summary) and the process's
# user+sys CPU time (both cores used means CPU > wall).
#
# Then HS runs (default 20) of a short `verify` (one memset check, so that
# the runs are tens of milliseconds and many fit in the same minutes), each
# followed by the floor at the same memslot size: the first hypercall's
# median and the floor's, taken interleaved. (This pair decided against a
# head start on the first VM: made on the other CPU it was slower here.)
#
# Beside them, in the same minutes (this machine's speed drifts by the hour,
# so only figures taken together compare):
# - after each run, the machine's floor for the first hypercall:
#   ci/kvm-floor.c, the least a KVM program does before its guest's first
#   exit (VM, a memslot of the run's guest RAM size, one vCPU, KVM_RUN),
#   timed from its main();
# - after the runs, the machine's memcmp bandwidth (ci/memcmp-bw.c) at the sizes the checker
#   compares, weighted by the bytes the run checked at each: what the checker
#   could reach here; once alone and once with a second memcmp on the other
#   core, as `run` has its other configuration's guest there.
#
#   [HS=20] ci/self-bench.sh [N] [extra hypclear args...]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-3}
shift || true
cargo build --release --quiet
bin=target/release/hypclear
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
floor=""
if command -v cc >/dev/null && cc -O2 -o "$tmp/kvm-floor" ci/kvm-floor.c 2>/dev/null; then
    floor="$tmp/kvm-floor"
fi
# The first `--cpl auto` run after a new build or boot calibrates (one
# extra VM, tens of ms) and caches the decision; every later run reads the
# cache. Measure those: the calibration happens here, untimed.
"$bin" info >/dev/null
for i in $(seq 1 "$n"); do
    /usr/bin/time -f '%e %U %S' -o "$tmp/time.$i" "$bin" run --json "$tmp/run.$i.json" "$@" >/dev/null
    if [ -n "$floor" ]; then
        mem=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["guest"]["mem"])' "$tmp/run.$i.json")
        "$floor" "$mem" > "$tmp/floor.$i"
    fi
done
hs=${HS:-20}
short=(verify --routine memset --size 4096 --config vanilla)
for i in $(seq 1 "$hs"); do
    "$bin" "${short[@]}" --json "$tmp/hs.$i.json" "$@" >/dev/null
    if [ -n "$floor" ]; then
        mem=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["guest"]["mem"])' "$tmp/hs.$i.json")
        "$floor" "$mem" > "$tmp/hs-floor.$i"
    fi
done
bw=""
if command -v cc >/dev/null && cc -O2 -fno-builtin-memcmp -o "$tmp/memcmp-bw" ci/memcmp-bw.c 2>/dev/null; then
    sizes="$((2 << 20)) $((8 << 20)) $((32 << 20))"
    # shellcheck disable=SC2086 # three size arguments
    "$tmp/memcmp-bw" $sizes > "$tmp/bw"
    # shellcheck disable=SC2086
    { "$tmp/memcmp-bw" $sizes > "$tmp/bw2" & "$tmp/memcmp-bw" $sizes > /dev/null; wait; }
    bw="$tmp/bw"
fi
python3 - "$tmp" "$n" "$bw" "$floor" "$hs" <<'PY'
import json, os, statistics, sys
tmp, n, bw, floor, hs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
rows = []
for i in range(1, n + 1):
    d = json.load(open(f"{tmp}/run.{i}.json"))
    s = d["summary"]
    wall, u, sy = map(float, open(f"{tmp}/time.{i}").read().split())
    fl = float(open(f"{tmp}/floor.{i}").read().split()[0]) if floor else float("nan")
    rows.append((wall, s["elapsed_s"], s["first_hypercall_ms"], fl, s["checker_gb_per_s"], u + sy, s["passed"]))
print(f"{'run':>4} {'wall s':>7} {'run s':>7} {'first hc ms':>12} {'floor ms':>9} {'checker GB/s':>13} {'cpu s':>7} {'checks':>7}")
for i, r in enumerate(rows, 1):
    print(f"{i:>4} {r[0]:>7.2f} {r[1]:>7.2f} {r[2]:>12.2f} {r[3]:>9.2f} {r[4]:>13.1f} {r[5]:>7.2f} {r[6]:>7}")
med = [statistics.median(c) for c in zip(*rows)]
print(f"{'med':>4} {med[0]:>7.2f} {med[1]:>7.2f} {med[2]:>12.2f} {med[3]:>9.2f} {med[4]:>13.1f} {med[5]:>7.2f}")
if floor:
    mem = json.load(open(f"{tmp}/run.{n}.json"))["guest"]["mem"]
    print(f"first hypercall: {med[2]:.2f} ms, {med[2] - med[3]:.2f} ms above the machine's floor "
          f"({med[3]:.2f} ms: ci/kvm-floor.c, {mem >> 20} MB memslot)")
if hs:
    first = [json.load(open(f"{tmp}/hs.{i}.json"))["summary"]["first_hypercall_ms"] for i in range(1, hs + 1)]
    q = lambda x: statistics.quantiles(x, n=4) if len(x) > 1 else [x[0]] * 3
    line = (f"short verify ({hs} runs): first hypercall median {statistics.median(first):.2f} ms "
            f"(quartiles {q(first)[0]:.2f}-{q(first)[2]:.2f})")
    if floor:
        fl = [float(open(f"{tmp}/hs-floor.{i}").read().split()[0]) for i in range(1, hs + 1)]
        line += f", floor interleaved {statistics.median(fl):.2f} ms ({q(fl)[0]:.2f}-{q(fl)[2]:.2f})"
    print(line)

def mix(path, checks):
    """memcmp GB/s for a run's size mix (its JSON checks), from memcmp-bw's output."""
    rate = {int(a): float(b) for a, b in (l.split() for l in open(path))}
    # Bytes the run checked per target size, each at the memcmp rate
    # of the nearest measured size at or above it (2 MB for smaller ones).
    sizes = sorted(rate)
    t = total = 0
    for c in checks:
        if c["verdict"] == "skipped":
            continue
        b = c["size"] * c["count"]
        k = next((x for x in sizes if b <= x), sizes[-1])
        t += b / (rate[k] * 1e9)
        total += b
    return rate, (total / t / 1e9 if t > 0 else None)


if bw:
    # The size mix of the last run (every run checks the same sizes).
    checks = json.load(open(f"{tmp}/run.{n}.json"))["checks"]
    rate, alone = mix(bw, checks)
    rate2, busy = mix(os.path.join(tmp, "bw2"), checks)
    print("machine memcmp GB/s: " + ", ".join(f"{k >> 20} MB {v:.1f}" for k, v in sorted(rate.items()))
          + "; with the other core comparing too: " + ", ".join(f"{k >> 20} MB {v:.1f}" for k, v in sorted(rate2.items())))
    if alone is not None:
        print(f"memcmp bandwidth for this run's size mix: {alone:.1f} GB/s alone, {busy:.1f} GB/s "
              f"with the other core busy (checker: {med[4]:.1f})")
PY
