#!/usr/bin/env bash
# Run cargo for aarch64-unknown-linux-gnu with a fully static result, using the
# Debian cross toolchain (no .cargo/config.toml needed).
#   ci/aarch64/cargo-aarch64.sh build --release [--bin hypclear]
#   -> target/aarch64-unknown-linux-gnu/release/hypclear
set -euo pipefail
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER="${CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER:-aarch64-linux-gnu-gcc}"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS="${CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS:--C target-feature=+crt-static}"
# For build scripts using the cc crate.
export CC_aarch64_unknown_linux_gnu="${CC_aarch64_unknown_linux_gnu:-aarch64-linux-gnu-gcc}"
export AR_aarch64_unknown_linux_gnu="${AR_aarch64_unknown_linux_gnu:-aarch64-linux-gnu-ar}"
# `--target` goes before a `--` (e.g. `clippy ... -- -D warnings`): after it,
# clippy-driver would get it and build build.rs for aarch64 as well (E0461).
args=()
target_added=0
for a in "$@"; do
    if [ "$a" = "--" ] && [ "$target_added" = 0 ]; then
        args+=(--target aarch64-unknown-linux-gnu)
        target_added=1
    fi
    args+=("$a")
done
[ "$target_added" = 1 ] || args+=(--target aarch64-unknown-linux-gnu)
exec cargo "${args[@]}"
