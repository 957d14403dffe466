#!/usr/bin/env bash
# A mutant of an arm64 kernel tree in a cheap copy (hard links; each
# edited file becomes a real copy), for `hypclear blob --arch aarch64`: the
# proof, in the aarch64 stage, that the suite catches what it claims to.
# Two independent bugs, each seen by one kind of check only:
#   arch/arm64/lib/memset.S returns after its DC ZVA loop without the tail
#     (a zeroing memset of n >= 128 bytes that is not a multiple of the
#     block leaves the tail unwritten): only fill-0 checks can see it;
#   arch/arm64/lib/memcpy.S copies forward when the buffers overlap with
#     dst above src (over 128 bytes): only overlapping copies can see it.
# No kernel text is stored here: the edits are sed expressions.
#
#   ci/aarch64/mutants.sh TREE [COPY]   COPY default: TREE-mutant; the last
#                                       line on stdout is the copy's path
set -euo pipefail
tree=${1:?usage: $0 TREE [COPY]}
copy=${2:-${tree%/}-mutant}
log() { echo "mutants: $*" >&2; }
if [ -f "$copy/.mutant" ]; then
    log "$copy already made"
    echo "$copy"
    exit 0
fi
rm -rf "$copy"
cp -al "$tree" "$copy" 2>/dev/null || cp -a "$tree" "$copy"
# Delete one line of FILE matching EXPR, in a real copy of the file.
drop() {
    local file=$1 expr=$2 removed
    cp --remove-destination "$tree/$file" "$copy/$file"
    sed -i "/$expr/d" "$copy/$file"
    removed=$(( $(wc -l <"$tree/$file") - $(wc -l <"$copy/$file") ))
    [ "$removed" -eq 1 ] || { log "$file: the edit removed $removed lines, not 1 (the file changed shape)"; exit 1; }
}
drop arch/arm64/lib/memset.S '^\tb\.ne\t\.Ltail_maybe_long$'
drop arch/arm64/lib/memcpy.S '^\tb\.lo\tL(copy_long_backwards)$'
touch "$copy/.mutant"
log "made $copy"
echo "$copy"
