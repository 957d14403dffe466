#!/usr/bin/env bash
# Regenerate docs/samples/*.txt: every output quoted in README.md and docs/,
# from ONE run on one machine, so that the samples agree with each other.
# Each file starts with the command line ("$ hypclear ...") followed by the
# command's output verbatim (stdout and stderr as they interleave, unless
# the command line shows a redirection), and "[exit status N]" when the
# status is not 0.
#
#   [HYPCLEAR_KERNEL_TREE=TREE [HYPCLEAR_KERNEL_TREE_B=TREE2]]
#   [HYPCLEAR_KERNEL_TREE_7=TREE7] ci/samples.sh
#
# TREE is e.g. $(bash ci/kernel-source.sh 6.12 | tail -n1); without it the
# kernel-tree samples are left as they are. With TREE_B (e.g. 6.1) the
# two-tree bench and compare samples are written too. With TREE7 (x86, e.g.
# $(bash ci/kernel-source.sh 7.3 | tail -n1)) its verify and seed 002's
# clear_pages table (every path at 4KB, 2MB and 1GB chunks beside the
# built-ins; about two minutes more). The kernel trees are
# built first, untimed (kbuild takes a minute or two the first time), so
# the samples show a warm build cache. About a minute after that here.
# Not part of .ci/run: run it by hand after a change to the output, and
# commit docs/samples/ whole.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$root/docs/samples
mkdir -p "$out"

cargo build --release --quiet
bin=$root/target/release/hypclear
export HYPCLEAR_PROGRESS=0 NO_COLOR=1
unset CLICOLOR_FORCE

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

# sample NAME [--status N] [--stdout] -- ARGS...: run `hypclear ARGS` in
# $work and write docs/samples/NAME.txt. --status: the expected exit status
# (default 0; anything else fails the script). --stdout: keep only stdout
# (the command line then shows `2>/dev/null`).
sample() {
    local name=$1 want=0 only_stdout=0
    shift
    while [ "$1" != -- ]; do
        case $1 in
        --status) want=$2; shift 2 ;;
        --stdout) only_stdout=1; shift ;;
        *) echo "samples.sh: bad option $1" >&2; exit 2 ;;
        esac
    done
    shift
    local t0=$SECONDS rc=0 file=$out/$name.txt
    {
        if [ $only_stdout = 1 ]; then
            echo "\$ hypclear $* 2>/dev/null"
            "$bin" "$@" 2>/dev/null || rc=$?
        else
            echo "\$ hypclear $*"
            "$bin" "$@" 2>&1 || rc=$?
        fi
        if [ $rc != 0 ]; then echo "[exit status $rc]"; fi
    } >"$file"
    echo "samples.sh: $name.txt ($((SECONDS - t0)) s, exit $rc)" >&2
    if [ "$rc" != "$want" ]; then
        echo "samples.sh: $name: exit status $rc, expected $want; see $file" >&2
        exit 1
    fi
}

t_all=$SECONDS
# The --cpl auto decision of a new build, outside the samples.
"$bin" info >/dev/null 2>&1

sample info -- info
sample run -- run --seed 2026
sample run-ktap --stdout -- run --seed 2026 --format ktap
sample verify-ktap --stdout -- verify --format ktap -r memset -s 64,4KB --config vanilla --seed 2026
sample selftest -- selftest --config vanilla --seed 2026

# A null benchmark: the same memset object in both link configurations.
sample bench-null -- bench memset -f erms -s 1MB -k 4KB,1MB -l 3 --sessions 4 --json null.json
sample compare-null -- compare null.json
# A real difference: the same memset at CPL3 and at CPL0, two invocations.
sample bench-cpl3 -- bench memset -f erms -s 64KB -k 64KB --sessions 4 --repeats 3 --config vanilla --cpl 3 --json cpl3.json
sample bench-cpl0 -- bench memset -f erms -s 64KB -k 64KB --sessions 4 --repeats 3 --config vanilla --cpl 0 --json cpl0.json
sample compare-cpl -- compare cpl3.json cpl0.json
# The default precision rule: sessions until +-1% (guest and guest/host),
# at most --max-seconds of them; one cell.
sample bench-precision -- bench memset -f erms -s 256MB --config vanilla --seed 2026
sample bench-ab -- bench memset -f erms -s 64KB --config both --detect 1% --seed 2026

if [ -n "${HYPCLEAR_KERNEL_TREE:-}" ]; then
    a=$HYPCLEAR_KERNEL_TREE
    "$bin" info --kernel-tree "$a" >/dev/null 2>&1
    if [ -n "${HYPCLEAR_KERNEL_TREE_B:-}" ]; then
        "$bin" info --kernel-tree "$HYPCLEAR_KERNEL_TREE_B" >/dev/null 2>&1
    fi
    t_trees=$SECONDS
    sample run-kernel-tree -- run --kernel-tree "$a" --seed 2026
    if [ -n "${HYPCLEAR_KERNEL_TREE_B:-}" ]; then
        b=$HYPCLEAR_KERNEL_TREE_B
        sample bench-trees -- bench memset -s 4MB -k 4KB --sessions 4 --repeats 3 \
            --kernel-tree "$b" --kernel-tree "$a" --json trees.json
        sample compare-trees -- compare trees.json
        sample bench-trees-detect -- bench memset -s 4MB -k 4KB --kernel-tree "$b" --kernel-tree "$a" \
            --detect 1% --seed 2026
    fi
    echo "samples.sh: kernel-tree samples took $((SECONDS - t_trees)) s" >&2
fi
if [ -n "${HYPCLEAR_KERNEL_TREE_7:-}" ]; then
    t7=$HYPCLEAR_KERNEL_TREE_7
    "$bin" info --kernel-tree "$t7" >/dev/null 2>&1
    t_trees=$SECONDS
    sample run-kernel-tree-7 -- run --kernel-tree "$t7" --seed 2026
    # Seed 002's table from the tree's own clear_pages(): each path the CPU
    # runs, 4 KB / 2 MB / 1 GB chunks, beside the built-in clear_pages.
    sample bench-clear-pages-7 -- bench clear_pages --kernel-tree "$t7" --every-path --builtin \
        -f all -k 4KB,2MB,1GB -s 1GB --sessions 2 --repeats 2
    echo "samples.sh: 7.x samples took $((SECONDS - t_trees)) s" >&2
fi
echo "samples.sh: wrote $out in $((SECONDS - t_all)) s" >&2
