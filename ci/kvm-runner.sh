#!/usr/bin/env bash
# What a bare-metal KVM runner executes (x86_64 or aarch64 host):
#   1. check /dev/kvm,
#   2. run the test suite with HYPCLEAR_REQUIRE_KVM=1 (the README's test command),
#   3. run `hypclear run --json` (and, with HYPCLEAR_KERNEL_TREE set, `hypclear run
#      --kernel-tree` on that tree) and `hypclear selftest --json`, keeping the
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

stage "tests (HYPCLEAR_REQUIRE_KVM=1 cargo test --release)"
export HYPCLEAR_REQUIRE_KVM=1
cargo test --release

stage "hypclear run --json $artifacts/run.json"
cargo run --release --quiet -- run --json "$artifacts/run.json"

if [[ -n "${HYPCLEAR_KERNEL_TREE:-}" ]]; then
    stage "hypclear run --kernel-tree $HYPCLEAR_KERNEL_TREE --json $artifacts/run-kernel.json"
    cargo run --release --quiet -- run --kernel-tree "$HYPCLEAR_KERNEL_TREE" --json "$artifacts/run-kernel.json"
fi

stage "hypclear selftest --json $artifacts/selftest.json"
cargo run --release --quiet -- selftest --json "$artifacts/selftest.json"

stage "done in $((SECONDS - t0)) s; artifacts in $artifacts/"
ls -l "$artifacts"
