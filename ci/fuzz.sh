#!/usr/bin/env bash
# Coverage-guided fuzzing on the stable toolchain (docs/fuzzing.md): AFL++
# through cargo-afl, every target for HYPCLEAR_FUZZ_SECONDS (default 60), side
# by side.
#
#   ci/fuzz.sh                                   # every target, 60 s, side by side (CI)
#   HYPCLEAR_FUZZ_SECONDS=3600 ci/fuzz.sh compare  # one target, an hour
#
# Installs cargo-afl (pinned) if missing and builds AFL++ from the source it
# ships (no LLVM plugins: rustc's own SanitizerCoverage instruments). Fails
# when any target found a crash or a hang, naming the input and how to
# reproduce it. Findings and queues stay in fuzz/out/<target>/.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

# The same version as the afl crate in fuzz/Cargo.toml.
AFL_RS=0.18.2
seconds=${HYPCLEAR_FUZZ_SECONDS:-60}
# An input slower than this is a hang (far above any honest input's time,
# so a loaded machine does not make one).
timeout_ms=${HYPCLEAR_FUZZ_TIMEOUT_MS:-1000}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(compare protocol writers)
for t in "${targets[@]}"; do
    [ -f "src/bin/$t.rs" ] || { echo "fuzz: no target $t (have: compare protocol writers)" >&2; exit 2; }
done

cargo fmt --check
since=$SECONDS
if ! cargo afl --version 2>/dev/null | grep -q "^cargo-afl $AFL_RS "; then
    echo "=== fuzz: cargo install --locked cargo-afl@$AFL_RS"
    cargo install --locked --quiet "cargo-afl@$AFL_RS"
fi
# AFL++ for this rustc, once; cargo-afl refuses to rebuild an existing one.
if ! log=$(cargo afl config --build 2>&1) && ! grep -q "already built" <<<"$log"; then
    echo "$log" >&2
    exit 1
fi
echo "=== fuzz: $(cargo afl --version) ready in $((SECONDS - since)) s"
since=$SECONDS
cargo afl build --release --locked --quiet
echo "=== fuzz: cargo afl build --release took $((SECONDS - since)) s"

# One line from AFL's fuzzer_stats, then every crash and hang with how to
# reproduce it; non-zero when there is one.
report() {
    local t=$1 out=$2 f found=0
    local crate=hypclear-bench
    [ "$t" = protocol ] && crate=hypclear-vmm
    st() { sed -n "s/^$1 *: //p" "$out/default/fuzzer_stats"; }
    echo "fuzz $t: $(st execs_done) executions in $(st run_time) s ($(st execs_per_sec)/s);" \
        "corpus $(find "$out/in" -type f | wc -l) -> $(st corpus_count) inputs ($(st corpus_found) new paths);" \
        "edges $(st edges_found) of $(st total_edges); crashes $(st saved_crashes), hangs $(st saved_hangs)"
    for f in "$out"/default/crashes/id:* "$out"/default/hangs/id:*; do
        [ -e "$f" ] || continue
        # A hang must hang again alone: one starved by a loaded machine
        # (another build, a QEMU run) finishes in milliseconds.
        if [[ $f == */hangs/* ]] && timeout 10 "target/release/$t" <"$f" >/dev/null 2>&1; then
            echo "fuzz $t: $f took over ${timeout_ms} ms once but not alone: ignored"
            continue
        fi
        found=1
        echo "fuzz $t: FOUND $PWD/$f"
        echo "  reproduce: $PWD/target/release/$t < '$PWD/$f'"
        echo "  keep it:   cp '$PWD/$f' $PWD/regressions/$t/NAME; cargo test -p $crate fuzz"
    done
    return $found
}

export AFL_NO_UI=1 AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1
# Another fuzzer or build may hold the cores; do not insist on one.
export AFL_NO_AFFINITY=1
# The targets run side by side (on this 2-core machine three AFL processes
# share the cores: fewer executions each, a third of the wall time), then
# each is reported in turn.
failed=0
pids=()
for t in "${targets[@]}"; do
    out=out/$t
    rm -rf "$out" && mkdir -p "$out/in"
    # Seeds: the corpus and every kept regression input.
    cp corpus/"$t"/* "$out/in/"
    [ -d "regressions/$t" ] && cp regressions/"$t"/* "$out/in/"
    dict=()
    [ -f "dict/$t.dict" ] && dict=(-x "dict/$t.dict")
    echo "=== fuzz $t: ${seconds} s"
    cargo afl fuzz -i "$out/in" -o "$out" -V "$seconds" -t "$timeout_ms" "${dict[@]}" \
        "target/release/$t" >"$out/afl.log" 2>&1 &
    pids+=("$!")
done
for i in "${!targets[@]}"; do
    t=${targets[$i]} out=out/${targets[$i]}
    if ! wait "${pids[$i]}"; then
        tail -n 30 "$out/afl.log" >&2
        failed=1
        continue
    fi
    report "$t" "$out" || failed=1
done
exit $failed
