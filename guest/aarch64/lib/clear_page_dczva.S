/* SPDX-License-Identifier: MIT */
/*
 * Variant:  clear_page dczva
 * Requires: dczva
 * Follows:  arch/arm64/lib/clear_page.S __pi_clear_page, 6.1 and 6.12 (DC ZVA; STNP when DZP = 1)
 *
 * Clear whole 4 KiB pages with "DC ZVA", one zero block at a time, or
 * with non-temporal store pairs where DC ZVA is prohibited.
 *
 * void __pi_clear_pages_dczva(void *addr, unsigned long npages)
 * void __pi_clear_page_dczva(void *addr)
 *
 * Kernel: arch/arm64/lib/clear_page.S, __pi_clear_page (identical in 6.1
 * and 6.12; the only clear_page either has, no alternatives).
 * Differs: the kernel clears exactly one page per call; here x1 pages are
 * cleared by running the kernel's per-page loop x1 times (DCZID_EL0 is
 * read once per call, not once per page), with a "cbz" for npages == 0.
 * For npages = 1 the instructions are the kernel's plus that cbz and the
 * page count decrement. clear_pages is a hypclear extension.
 *
 * Input:
 *	x0	page-aligned start address
 *	x1	number of pages (clear_pages only; clear_page sets it to 1)
 * Output:
 *	none (x0 is left at the end of the cleared range)
 * Clobbers:
 *	x0, x1, x2, x3, NZCV
 * Requires:
 *	nothing: DCZID_EL0 decides the path at run time. With DZP = 0 the
 *	loop is "dc zva" with the block size 4 << DCZID_EL0.BS, whatever that
 *	size (no minimum; every power of two up to 2 KiB divides a page).
 *	With DZP = 1 (EL0 with SCTLR_EL1.DZE clear, HCR_EL2.TDZ, ...) the loop
 *	is four "stnp xzr, xzr" per 64 bytes (a streaming, no-allocate hint).
 *
 * Algorithm: x2 = DCZID_EL0; if bit 4 (DZP) is set take the STNP loop,
 * else x2 = 4 << (x2 & 15). Either loop stores one block (or 64 bytes),
 * advances x0 and repeats while x0 is not page aligned; when it is, one
 * page is done: x1 -= 1 and the loop continues until x1 is 0. Only local
 * PC-relative branches, no stack, no data.
 */
#include "linkage.h"
#include "cpu.h"

SYM_FUNC_START(__pi_clear_page_dczva)
	mov	x1, #1
SYM_INNER_LABEL(__pi_clear_pages_dczva)
	cbz	x1, .Lcpz_ret
	READ_DCZID(x2)
	tbnz	x2, #4, .Lcpz_stnp		/* DZP: DC ZVA prohibited */
	and	w2, w2, #0xf
	mov	x3, #4
	lsl	x2, x3, x2			/* x2 = block size in bytes */
.Lcpz_zva:
	dc	zva, x0
	add	x0, x0, x2
	tst	x0, #0xfff			/* page boundary reached? */
	b.ne	.Lcpz_zva
	subs	x1, x1, #1
	b.ne	.Lcpz_zva
.Lcpz_ret:
	ret

.Lcpz_stnp:
	stnp	xzr, xzr, [x0]
	stnp	xzr, xzr, [x0, #16]
	stnp	xzr, xzr, [x0, #32]
	stnp	xzr, xzr, [x0, #48]
	add	x0, x0, #64
	tst	x0, #0xfff
	b.ne	.Lcpz_stnp
	subs	x1, x1, #1
	b.ne	.Lcpz_stnp
	ret
SYM_FUNC_END(__pi_clear_pages_dczva)
SYM_FUNC_END(__pi_clear_page_dczva)
