/* SPDX-License-Identifier: MIT */
/*
 * Variant:  clear_page stp
 * Requires: -
 * Follows:  none (not kernel code)
 *
 * Clear whole 4 KiB pages with plain "stp xzr, xzr", 128 bytes per
 * iteration.
 *
 * void __pi_clear_page_stp(void *addr)
 * void __pi_clear_pages_stp(void *addr, unsigned long npages)
 *
 * Input:    x0 page-aligned address, x1 page count (clear_pages only)
 * Output:   none
 * Clobbers: x0, x1, NZCV
 * Why:      not kernel code; cached stores without DC ZVA, roughly what a
 *           memset-based clear_page does where DC ZVA is unusable.
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
