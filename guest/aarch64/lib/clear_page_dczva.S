/* SPDX-License-Identifier: MIT */
/*
 * Clear whole 4 KiB pages with "DC ZVA", one zero block at a time.
 *
 * void __pi_clear_pages_dczva(void *addr, unsigned long npages)
 * void __pi_clear_page_dczva(void *addr)
 *
 * Input:
 *	x0	page-aligned start address
 *	x1	number of pages (clear_pages only; clear_page sets it to 1)
 * Output:
 *	none (x0 is left at the end of the cleared range)
 * Clobbers:
 *	x0, x1, x2, x3, NZCV
 * Requires:
 *	"dczva": DCZID_EL0.DZP == 0 where it runs. The routine reads DCZID_EL0
 *	itself and, if DZP is 1 (e.g. at EL0 with SCTLR_EL1.DZE clear, or
 *	HCR_EL2.TDZ) or the block is not a divisor of PAGE_SIZE, falls back to
 *	an STP loop, so it is correct everywhere and fast where DC ZVA works.
 *
 * Algorithm: x1 = end = addr + npages * PAGE_SIZE; x2 = block size in
 * bytes = 4 << DCZID_EL0.BS (4 bytes .. 2 KiB; a power of two, so for
 * BS >= 4 it divides the page size and page-aligned addresses are block
 * aligned). While x0 < end: "dc zva, x0", x0 += block. The fallback stores
 * XZR pairs, 64 bytes per iteration. npages == 0 clears nothing. Only
 * local PC-relative branches, no stack, no data.
 */
#include "linkage.h"
#include "cpu.h"

SYM_FUNC_START(__pi_clear_page_dczva)
	mov	x1, #1
SYM_INNER_LABEL(__pi_clear_pages_dczva)
	add	x1, x0, x1, lsl #12		/* x1 = end */
	cmp	x0, x1
	b.hs	.Lcpz_ret
	READ_DCZID(x3)
	tbnz	x3, #4, .Lcpz_stp		/* DZP: DC ZVA prohibited */
	and	x3, x3, #0xf
	cmp	x3, #4				/* block < 64 bytes: not worth it */
	b.lo	.Lcpz_stp
	mov	x2, #4
	lsl	x2, x2, x3			/* x2 = block size in bytes */
.Lcpz_zva:
	dc	zva, x0
	add	x0, x0, x2
	cmp	x0, x1
	b.lo	.Lcpz_zva
.Lcpz_ret:
	ret

.Lcpz_stp:
	stp	xzr, xzr, [x0]
	stp	xzr, xzr, [x0, #16]
	stp	xzr, xzr, [x0, #32]
	stp	xzr, xzr, [x0, #48]
	add	x0, x0, #64
	cmp	x0, x1
	b.lo	.Lcpz_stp
	ret
SYM_FUNC_END(__pi_clear_pages_dczva)
SYM_FUNC_END(__pi_clear_page_dczva)
