/* SPDX-License-Identifier: MIT */
/*
 * Variant:  clear_page stnp
 * Requires: -
 * Follows:  arch/arm64/lib/clear_page.S __pi_clear_page, 6.1 and 6.12, its DZP = 1 path
 *
 * Clear whole 4 KiB pages with non-temporal store pairs ("STNP").
 *
 * void __pi_clear_pages_stnp(void *addr, unsigned long npages)
 * void __pi_clear_page_stnp(void *addr)
 *
 * Kernel: arch/arm64/lib/clear_page.S (6.1 and 6.12), the path
 * __pi_clear_page takes when DCZID_EL0.DZP = 1, forced here whatever
 * DCZID_EL0 says (clear_page_dczva.S takes it only when DZP is set), so
 * the "DC ZVA prohibited" case can be measured on any CPU.
 * Differs: no DCZID_EL0 test; npages > 1 repeats the per-page loop (a
 * hypclear extension, see clear_page_dczva.S).
 *
 * Input:
 *	x0	page-aligned start address
 *	x1	number of pages (clear_pages only; clear_page sets it to 1)
 * Output:
 *	none (x0 is left at the end of the cleared range)
 * Clobbers:
 *	x0, x1, NZCV
 *
 * Algorithm: four "stnp xzr, xzr" store 64 bytes, x0 advances by 64, and
 * that repeats until x0 is page aligned; then x1 -= 1 and the next page
 * follows until x1 is 0. npages == 0 clears nothing. Only local
 * PC-relative branches, no stack, no data.
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
