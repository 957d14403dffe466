# shellcheck shell=bash
# Shared helpers for the aarch64 CI scripts. Sourced, never executed.

HC_CI_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
HC_REPO="$(cd "$HC_CI_DIR/../.." && pwd)"
HC_CACHE="${HYPCLEAR_AARCH64_CACHE:-$HC_REPO/target/aarch64-ci}"
# Written by setup.sh, sourced by run-in-qemu.sh: HC_KERNEL=, HC_BUSYBOX=, HC_QEMU=, ...
# shellcheck disable=SC2034 # used by the scripts that source this file
HC_ENV_FILE="$HC_CACHE/env.sh"
# shellcheck disable=SC2034 # read by common.sh
HC_TAG=aarch64-ci
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$HC_CI_DIR/../lib/common.sh"
