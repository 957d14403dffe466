#!/usr/bin/env bash
# Boot Debian's arm64 kernel under QEMU with KVM in a mode and run command
# lines in it: ci/lib/run-in-qemu.sh --arch aarch64 (see its --help).
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/../lib/run-in-qemu.sh" --arch aarch64 "$@"
