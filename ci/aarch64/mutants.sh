#!/usr/bin/env bash
# A mutant of an arm64 kernel tree in a cheap copy (hard links; each
# edited file becomes a real copy), for `hypclear blob --arch aarch64`: the
# proof, in the aarch64 stage, that the suite catches what it claims to.
# No kernel text is stored here: the edits are sed expressions, each checked
# to change exactly one line of the file.
#
# Default: three independent bugs, each seen by one kind of check only:
#   arch/arm64/lib/memset.S returns after its DC ZVA loop without the tail
#     (a zeroing memset of n >= 128 bytes that is not a multiple of the
#     block leaves the tail unwritten): only fill-0 checks can see it;
#   arch/arm64/lib/memcpy.S copies forward when the buffers overlap with
#     dst above src (over 128 bytes): only overlapping copies can see it;
#   arch/arm64/lib/memcpy.S's 4-7 byte path loads its last word 8 bytes
#     wide (the store stays 4 bytes, so every copy is right): it reads 4
#     bytes past its source, which only an edge check (the source's end
#     against the unmapped page) sees, as a fault.
# --zva-last-block: one bug, for a tree in the seed-001 shape, whose
#   clear_page is memset(p, 0, 4096), a multiple of the DC ZVA block that
#   the default mutant's memset still clears: the DC ZVA loop's condition
#   b.ge -> b.gt, so when the remaining count reaches exactly 0 the last
#   block is never zeroed (and the tail after it is 0 bytes, so nothing
#   else writes it). Every zeroing memset whose DC ZVA part ends on the
#   end of the buffer misses its last block: clear_page always.
# --contract: two bugs that leave every byte right, so only the call
#   contract sees them, both in the original instructions (a 7.x tree's
#   HAS_MOPS paths do not use the edited registers):
#   arch/arm64/lib/memcpy.S's tmp1 in x19 instead of x14 (a scratch
#     register that is callee-saved): its 1-3 byte and long copies change
#     the caller's x19;
#   arch/arm64/lib/memset.S's tmp2 in x0 instead of x4 (the alignment
#     scratch in the return value's register): memset of over 15 bytes
#     returns the alignment arithmetic's result, not dst.
#
#   ci/aarch64/mutants.sh [--zva-last-block | --contract] TREE [COPY]
#     COPY default: TREE-mutant (--zva-last-block: TREE-mutant-zva,
#     --contract: TREE-mutant-contract); the last line on stdout is the
#     copy's path
set -euo pipefail
mode=default
case "${1:-}" in
    --zva-last-block | --contract) mode=${1#--}; shift ;;
esac
tree=${1:?usage: $0 [--zva-last-block | --contract] TREE [COPY]}
case $mode in
    default) copy=${2:-${tree%/}-mutant} ;;
    zva-last-block) copy=${2:-${tree%/}-mutant-zva} ;;
    *) copy=${2:-${tree%/}-mutant-contract} ;;
esac
log() { echo "mutants: $*" >&2; }
# A copy made by another version of these edits is made again.
stamp="$mode $(sha256sum <"${BASH_SOURCE[0]}" | cut -c1-16)"
if [ -f "$copy/.mutant" ] && [ "$(cat "$copy/.mutant")" = "$stamp" ]; then
    log "$copy already made ($mode)"
    echo "$copy"
    exit 0
fi
rm -rf "$copy"
cp -al "$tree" "$copy" 2>/dev/null || cp -a "$tree" "$copy"
# Apply sed command CMD to the one line of FILE matching ADDR (a sed
# regex), in a real copy of the file: ADDR must match exactly one line and
# the edit must change exactly that line, or remove it (CMD d). A second
# edit of a file applies to the copy the first one made.
declare -A edits_of=()
edit_line() {
    local file=$1 addr=$2 cmd=$3 matches changed edits
    if [ "$tree/$file" -ef "$copy/$file" ]; then
        cp --remove-destination "$tree/$file" "$copy/$file"
    fi
    matches=$(sed -n "/$addr/p" "$copy/$file" | wc -l)
    [ "$matches" -eq 1 ] || { log "$file: /$addr/ matches $matches lines, not 1 (the file changed shape)"; exit 1; }
    sed -i "/$addr/$cmd" "$copy/$file"
    # Lines of the original that are gone from the copy (changed or
    # removed): one per edit of the file so far.
    edits=$((${edits_of[$file]:-0} + 1))
    edits_of[$file]=$edits
    changed=$(diff "$tree/$file" "$copy/$file" | grep -c '^<' || true)
    [ "$changed" -eq "$edits" ] || { log "$file: the edits changed $changed lines, not $edits"; exit 1; }
}
case $mode in
    default)
        edit_line arch/arm64/lib/memset.S '^\tb\.ne\t\.Ltail_maybe_long$' d
        edit_line arch/arm64/lib/memcpy.S '^\tb\.lo\tL(copy_long_backwards)$' d
        edit_line arch/arm64/lib/memcpy.S '^\tldr\tB_lw, \[srcend, -4\]$' 's/B_lw/B_l/'
        ;;
    zva-last-block)
        edit_line arch/arm64/lib/memset.S '^\tb\.ge\t3b$' 's/b\.ge/b.gt/'
        ;;
    contract)
        edit_line arch/arm64/lib/memcpy.S '^#define tmp1\tx14$' 's/x14$/x19/'
        edit_line arch/arm64/lib/memset.S '^tmp2\t\t\.req\tx4$' 's/x4$/x0/'
        ;;
esac
echo "$stamp" >"$copy/.mutant"
log "made $copy ($mode)"
echo "$copy"
