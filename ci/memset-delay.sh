#!/usr/bin/env bash
# Make a slow-memset mutant of an x86 kernel tree in a cheap copy (hard
# links; the edited file becomes a real copy), for measuring bench's power
# (issue 37): a delay loop of N iterations at __memset's entry (dec/jnz,
# about one cycle an iteration: N=250 is about 95 ns at 2.6 GHz), before
# the FSRS alternative, so every memset pays it. N=0 makes an identical
# copy (a second side for the null rate). No kernel text is stored here:
# the edit is a sed expression.
#
#   ci/memset-delay.sh TREE N [COPY]     COPY default: TREE-memset-delay-N
# The last line on stdout is the copy's path.
set -euo pipefail
tree=${1:?usage: $0 TREE N [COPY]}
n=${2:?usage: $0 TREE N [COPY]}
copy=${3:-${tree%/}-memset-delay-$n}
file=arch/x86/lib/memset_64.S
log() { echo "memset-delay: $*" >&2; }

[[ $n =~ ^[0-9]+$ ]] || { log "N must be a number of iterations, not $n"; exit 2; }
[ -f "$tree/$file" ] || { log "$tree has no $file"; exit 2; }
if [ -f "$copy/.memset-delay-$n" ]; then
    log "$copy already made"
    echo "$copy"
    exit 0
fi
rm -rf "$copy"
cp -al "$tree" "$copy" 2>/dev/null || cp -a "$tree" "$copy"
cp --remove-destination "$tree/$file" "$copy/$file"
if [ "$n" -gt 0 ]; then
    # %ecx is free at entry: both paths load it before they use it.
    sed -i "/^SYM_FUNC_START(__memset)\$/a\\
	movl \$$n, %ecx\\
9997:	decl %ecx\\
	jnz 9997b" "$copy/$file"
    added=$(diff "$tree/$file" "$copy/$file" | grep -c '^>' || true)
    [ "$added" -eq 3 ] || { log "$file: the edit added $added lines, not 3 (the file changed shape)"; exit 1; }
fi
touch "$copy/.memset-delay-$n"
log "made $copy"
echo "$copy"
