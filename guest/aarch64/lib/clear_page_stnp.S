/* SPDX-License-Identifier: MIT */
/*
 * Variant:  clear_page stnp
 * Requires: -
 * Follows:  arch/arm64/lib/clear_page.S __pi_clear_page, 6.1 and 6.12, its DZP = 1 path
 *
 * Clear whole 4 KiB pages with four "stnp xzr, xzr" per 64 bytes,
 * whatever DCZID_EL0 says.
 *
 * void __pi_clear_page_stnp(void *addr)
 * void __pi_clear_pages_stnp(void *addr, unsigned long npages)
 *
 * Input:    x0 page-aligned address, x1 page count (clear_pages only)
 * Output:   none
 * Clobbers: x0, x1, NZCV
 * Why:      the kernel's clear_page path when DC ZVA is prohibited, forced
 *           so that it can be measured on any CPU.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_clear_page_stnp)
	mov	x1, #1
SYM_INNER_LABEL(__pi_clear_pages_stnp)
	cbz	x1, 2f
1:	stnp	xzr, xzr, [x0]
	stnp	xzr, xzr, [x0, #16]
	stnp	xzr, xzr, [x0, #32]
	stnp	xzr, xzr, [x0, #48]
	add	x0, x0, #64
	tst	x0, #0xfff
	b.ne	1b
	subs	x1, x1, #1
	b.ne	1b
2:	ret
SYM_FUNC_END(__pi_clear_pages_stnp)
SYM_FUNC_END(__pi_clear_page_stnp)
