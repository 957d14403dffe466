#!/usr/bin/env bash
# Make the seed-001 shape ("arm64: clear_page[s] using memset") of a kernel
# tree in a cheap copy (hard links; every edited file becomes a real copy),
# for `hypclear blob --arch aarch64`, which must detect it as the `memset`
# link configuration:
#   - arch/arm64/lib/clear_page.S removed, with its lib/ and nVHE Makefile
#     entries and its image-vars.h hyp alias;
#   - asm/page.h: clear_page()/clear_pages() are inline memset().
# No kernel text is stored here: the edits are sed expressions.
#
#   ci/seed001-shape.sh TREE [COPY]     COPY default: TREE-seed001-shape
# The last line on stdout is the copy's path.
set -euo pipefail
tree=${1:?usage: $0 TREE [COPY]}
copy=${2:-${tree%/}-seed001-shape}
log() { echo "seed001-shape: $*" >&2; }

[ -f "$tree/arch/arm64/lib/clear_page.S" ] || { log "$tree has no arch/arm64/lib/clear_page.S"; exit 2; }
if [ -f "$copy/.seed001-shape" ]; then
    log "$copy already made"
    echo "$copy"
    exit 0
fi
rm -rf "$copy"
cp -al "$tree" "$copy" 2>/dev/null || cp -a "$tree" "$copy"

# Replace a hard link by a real copy before editing it.
own() { cp --remove-destination "$tree/$1" "$copy/$1"; }
edit() { local f=$1; shift; own "$f"; sed -i "$@" "$copy/$f"; }
# Each edit rewrites or removes exactly one line of the original: none means
# the tree changed shape, more that the expression caught something else.
one_line_changed() {
    local n
    n=$(diff "$tree/$1" "$copy/$1" | grep -c '^<' || true)
    [ "$n" -eq 1 ] || { log "$1: the edit changed $n lines of the original, not 1 (the file changed shape)"; exit 1; }
}

rm "$copy/arch/arm64/lib/clear_page.S"
edit arch/arm64/lib/Makefile -e 's/\bclear_page\.o //'
edit arch/arm64/kvm/hyp/nvhe/Makefile -e 's/^\(lib-objs := \)clear_page\.o /\1/'
edit arch/arm64/kernel/image-vars.h -e '/^KVM_NVHE_ALIAS_HYP(clear_page, __pi_clear_page);$/d'
edit arch/arm64/include/asm/page.h -e '/^extern void clear_page(void \*to);$/c\
#include <linux/string.h>\
static inline void clear_pages(void *addr, unsigned int npages)\
{\
	memset(addr, 0, npages * PAGE_SIZE);\
}\
#define clear_pages clear_pages\
static inline void clear_page(void *addr)\
{\
	clear_pages(addr, 1);\
}'
for f in arch/arm64/lib/Makefile arch/arm64/kvm/hyp/nvhe/Makefile arch/arm64/kernel/image-vars.h arch/arm64/include/asm/page.h; do
    one_line_changed "$f"
done
touch "$copy/.seed001-shape"
log "made $copy"
echo "$copy"
