/* SPDX-License-Identifier: MIT */
/*
 * Clear whole 4 KiB pages with non-temporal store pairs ("STNP").
 *
 * void __pi_clear_pages_stnp(void *addr, unsigned long npages)
 * void __pi_clear_page_stnp(void *addr)
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
 * one 64-byte line as four "stnp xzr, xzr" (16 bytes each, a streaming
 * hint: the data need not be allocated in the caches) and advance by 64.
 * PAGE_SIZE is a multiple of 64, so the loop ends exactly at end.
 * npages == 0 clears nothing. Only local PC-relative branches, no stack,
 * no data.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_clear_page_stnp)
	mov	x1, #1
SYM_INNER_LABEL(__pi_clear_pages_stnp)
	add	x1, x0, x1, lsl #12		/* x1 = end */
	cmp	x0, x1
	b.hs	2f
1:	stnp	xzr, xzr, [x0]
	stnp	xzr, xzr, [x0, #16]
	stnp	xzr, xzr, [x0, #32]
	stnp	xzr, xzr, [x0, #48]
	add	x0, x0, #64
	cmp	x0, x1
	b.lo	1b
2:	ret
SYM_FUNC_END(__pi_clear_pages_stnp)
SYM_FUNC_END(__pi_clear_page_stnp)
