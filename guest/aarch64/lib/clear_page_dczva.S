/* SPDX-License-Identifier: MIT */
/*
 * Variant:  clear_page dczva
 * Requires: dczva
 * Follows:  arch/arm64/lib/clear_page.S __pi_clear_page, 6.1 and 6.12 (DC ZVA; STNP when DZP = 1)
 * Paths:    clear_page
 *
 * Clear whole 4 KiB pages with "dc zva", one block of 4 << DCZID_EL0.BS
 * bytes at a time, or with "stnp xzr, xzr" pairs when DCZID_EL0.DZP = 1.
 *
 * void __pi_clear_page_dczva(void *addr)
 * void __pi_clear_pages_dczva(void *addr, unsigned long npages)
 *
 * Input:    x0 page-aligned address, x1 page count (clear_pages only)
 * Output:   none
 * Clobbers: x0-x3, NZCV
 * Why:      the kernel's only clear_page (6.1 and 6.12); clear_pages repeats
 *           its per-page loop.
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
