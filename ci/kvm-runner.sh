#!/usr/bin/env bash
# What a bare-metal KVM runner executes (x86_64 or aarch64 host):
#   1. check /dev/kvm,
#   2. on x86_64, clippy the aarch64 code (cross), then run the test suite
#      with HYPCLEAR_REQUIRE_KVM=1 (the README's test command),
#   3. run `hypclear run --json` (quick and --geometry full), `hypclear run --kernel-tree` on the kernel
#      tree (HYPCLEAR_KERNEL_TREE, 6.12) and on a 7.x tree (HYPCLEAR_KERNEL_TREE_7,
#      7.3; x86: with a short bench of its clear_pages paths) and `hypclear selftest --json`, keeping the
#      JSON under $HYPCLEAR_ARTIFACTS (default: artifacts/).
# .ci/run uses this same script.
set -euo pipefail
cd "$(dirname "$0")/.."
artifacts=${HYPCLEAR_ARTIFACTS:-artifacts}
mkdir -p "$artifacts"

stage() { printf '\n=== %s\n' "$*"; }
t0=$SECONDS

stage "checking /dev/kvm"
if [[ ! -e /dev/kvm ]]; then
    echo "FAIL: /dev/kvm does not exist on this runner: load kvm_intel/kvm_amd (or kvm_pvm), or use a runner with virtualization" >&2
    exit 1
fi
if [[ ! -r /dev/kvm || ! -w /dev/kvm ]]; then
    echo "FAIL: /dev/kvm is not readable and writable by $(id -un): add the runner user to the kvm group" >&2
    exit 1
fi
ls -l /dev/kvm

# Cover the hugetlb backing where we may reserve pages (root only; harmless otherwise).
if [[ -w /proc/sys/vm/nr_hugepages ]] && (( $(cat /proc/sys/vm/nr_hugepages) < 64 )); then
    echo 64 > /proc/sys/vm/nr_hugepages || true
fi

stage "kernel sources (Debian linux-source, cached): kunit.py for the KTAP tests, trees for --kernel-tree"
if [[ -z "${HYPCLEAR_KERNEL_TREE:-}" ]]; then
    HYPCLEAR_KERNEL_TREE=$(bash ci/kernel-source.sh 6.12 | tail -n1)
fi
export HYPCLEAR_KERNEL_TREE
echo "HYPCLEAR_KERNEL_TREE=$HYPCLEAR_KERNEL_TREE"
# Today's kernel beside it: x86 7.x has clear_pages() inline in asm/page_64.h
# (trixie-backports' linux-source-7.3 through a private apt state).
if [[ -z "${HYPCLEAR_KERNEL_TREE_7:-}" ]]; then
    t_k7=$SECONDS
    HYPCLEAR_KERNEL_TREE_7=$(bash ci/kernel-source.sh 7.3 | tail -n1)
    echo "linux-source-7.3 ready in $((SECONDS - t_k7)) s"
fi
export HYPCLEAR_KERNEL_TREE_7
echo "HYPCLEAR_KERNEL_TREE_7=$HYPCLEAR_KERNEL_TREE_7"

if [[ $(uname -m) == x86_64 ]]; then
    # The aarch64 code under clippy (~20 s on a warm cache, 55 s on a loaded
    # 2-core machine). `--target` must come before `--`: after it, clippy-driver
    # receives it and compiles build.rs for aarch64 too (E0461 on cc, object,
    # thiserror). The cross gcc for build.rs comes from ci/kernel-source.sh.
    stage "aarch64 cross clippy (cargo clippy --target aarch64-unknown-linux-gnu --all-targets -- -D warnings)"
    rustup target add aarch64-unknown-linux-gnu >/dev/null 2>&1 || true
    cargo clippy --target aarch64-unknown-linux-gnu --all-targets -- -D warnings
fi

stage "tests (HYPCLEAR_REQUIRE_KVM=1 cargo test --release)"
export HYPCLEAR_REQUIRE_KVM=1
cargo test --release

stage "hypclear run --json $artifacts/run.json"
cargo run --release --quiet -- run --json "$artifacts/run.json"

stage "hypclear run --geometry full --json $artifacts/run-full.json (kunit parity: every size 0..1024 x every offset, 0/0xff/seeded fills)"
t1=$SECONDS
cargo run --release --quiet -- run --geometry full --json "$artifacts/run-full.json"
echo "run --geometry full took $((SECONDS - t1)) s"

stage "hypclear run --kernel-tree $HYPCLEAR_KERNEL_TREE --json $artifacts/run-kernel.json"
cargo run --release --quiet -- run --kernel-tree "$HYPCLEAR_KERNEL_TREE" --json "$artifacts/run-kernel.json"

if [[ $(uname -m) == x86_64 ]]; then
    stage "hypclear run --kernel-tree $HYPCLEAR_KERNEL_TREE_7 (7.x: the inline clear_pages() on every path), then a short bench of its paths"
    t_k7=$SECONDS
    cargo run --release --quiet -- run --kernel-tree "$HYPCLEAR_KERNEL_TREE_7" --json "$artifacts/run-kernel-7.json"
    cargo run --release --quiet -- bench clear_pages --kernel-tree "$HYPCLEAR_KERNEL_TREE_7" --every-path \
        -k 4KB,2MB -s 16MB --sessions 2 --repeats 2 --json "$artifacts/bench-kernel-7.json"
    echo "7.x run and bench took $((SECONDS - t_k7)) s"
fi

stage "hypclear selftest --json $artifacts/selftest.json"
cargo run --release --quiet -- selftest --json "$artifacts/selftest.json"

stage "KTAP: hypclear run --format ktap | kunit.py parse"
# kunit.py changes directory: give it an absolute path.
art=$(cd "$artifacts" && pwd)
cargo run --release --quiet -- run --format ktap >"$art/run.ktap"
python3 "$HYPCLEAR_KERNEL_TREE/tools/testing/kunit/kunit.py" parse "$art/run.ktap" | tail -n 3
grep '^# Totals:' "$art/run.ktap"

stage "cargo install --locked --path . (the installed binary carries its blobs; run from another directory)"
root=$(mktemp -d)
cargo install --locked --quiet --path . --root "$root" --target-dir target
(cd / && "$root/bin/hypclear" --format ktap selftest --config vanilla >"$art/selftest.ktap")
tail -n 2 "$artifacts/selftest.ktap"
rm -rf "$root"

stage "done in $((SECONDS - t0)) s; artifacts in $artifacts/"
ls -l "$artifacts"
