/* SPDX-License-Identifier: MIT */
/*
 * Variant:  clear_page stp
 * Requires: -
 * Follows:  none (not kernel code)
 *
 * Clear whole 4 KiB pages with plain store pairs ("STP").
 *
 * void __pi_clear_pages_stp(void *addr, unsigned long npages)
 * void __pi_clear_page_stp(void *addr)
 *
 * Not kernel code: neither 6.1 nor 6.12 clears pages with plain STP (their
 * clear_page uses DC ZVA, or STNP when DC ZVA is prohibited); a hypclear
 * comparison point, e.g. for what a memset-based clear_page does without
 * DC ZVA.
 *
 * Input:
 *	x0	page-aligned start address
 *	x1	number of pages (clear_pages only; clear_page sets it to 1)
 * Output:
 *	none (x0 is left at the end of the cleared range)
 * Clobbers:
 *	x0, x1, NZCV
 *
 * Algorithm: x1 = end = addr + npages * PAGE_SIZE. While x0 < end, store
 * 128 bytes as eight "stp xzr, xzr" (the last one post-incrementing x0
 * by 128). PAGE_SIZE is a multiple of 128, so the loop ends exactly at
 * end. npages == 0 clears nothing. Only local PC-relative branches, no
 * stack, no data.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_clear_page_stp)
	mov	x1, #1
SYM_INNER_LABEL(__pi_clear_pages_stp)
	add	x1, x0, x1, lsl #12		/* x1 = end */
	cmp	x0, x1
	b.hs	2f
1:	stp	xzr, xzr, [x0]
	stp	xzr, xzr, [x0, #16]
	stp	xzr, xzr, [x0, #32]
	stp	xzr, xzr, [x0, #48]
	stp	xzr, xzr, [x0, #64]
	stp	xzr, xzr, [x0, #80]
	stp	xzr, xzr, [x0, #96]
	stp	xzr, xzr, [x0, #112]
	add	x0, x0, #128
	cmp	x0, x1
	b.lo	1b
2:	ret
SYM_FUNC_END(__pi_clear_pages_stp)
SYM_FUNC_END(__pi_clear_page_stp)
