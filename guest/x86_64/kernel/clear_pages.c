// SPDX-License-Identifier: MIT
/*
 * A kernel tree's own clear_page() and clear_pages(), out of line.
 *
 * From Linux 7.x on, x86 clear_pages(addr, npages) is inline asm in
 * asm/page_64.h (ALTERNATIVE_2 of "call __clear_pages_unrolled", REP_GOOD's
 * "rep stosq" and ERMS's "rep stosb") and clear_page(addr) is
 * clear_pages(addr, 1): there is no routine to link. kbuild compiles this
 * file with the tree's headers and flags (as an external module object,
 * see Kbuild beside it), so the code and alternative sites are exactly what
 * the kernel inlines; hypclear patches those sites like any other and
 * checks each path.
 *
 * void clear_page_inline(void *addr)                          rdi
 * void clear_pages_inline(void *addr, unsigned int npages)    rdi, esi
 */
#include <linux/mm.h>

void clear_page_inline(void *addr);
void clear_pages_inline(void *addr, unsigned int npages);

void clear_page_inline(void *addr)
{
	clear_page(addr);
}

void clear_pages_inline(void *addr, unsigned int npages)
{
	clear_pages(addr, npages);
}
