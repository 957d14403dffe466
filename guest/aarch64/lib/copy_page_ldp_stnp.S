/* SPDX-License-Identifier: MIT */
/*
 * Copy one 4 KiB page with load pairs and non-temporal store pairs.
 *
 * void __pi_copy_page_ldp_stnp(void *to, const void *from)
 *
 * Input:
 *	x0	page-aligned destination
 *	x1	page-aligned source (the loop ends when x1 reaches the next
 *		page boundary); a different page
 * Output:
 *	none (x0 and x1 are left one page further on)
 * Clobbers:
 *	x0-x17, NZCV (x18, the platform register, is not touched)
 * Uses only general-purpose registers (no FP/SIMD, like hyp code).
 *
 * Algorithm: software pipelined, 128 bytes per step in 16 registers
 * (x2-x17). The first 128 bytes are loaded before the loop, and x1 is
 * kept 128 bytes ahead of x0. Each iteration hints the line 256 bytes
 * ahead ("prfm pldl1strm", which never faults, even past the page),
 * stores the 128 bytes loaded last time with eight "stnp" (a streaming
 * hint: the destination need not be allocated in the caches), loads the
 * next 128 bytes with eight "ldp" and advances both pointers. It stops
 * once x1 is page aligned again, i.e. the whole source page has been
 * loaded (31 iterations), and stores the last 128 bytes. Nothing outside
 * the two pages is accessed. Only local PC-relative branches; no stack,
 * no data.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_copy_page_ldp_stnp)
	ldp	x2, x3, [x1]
	ldp	x4, x5, [x1, #16]
	ldp	x6, x7, [x1, #32]
	ldp	x8, x9, [x1, #48]
	ldp	x10, x11, [x1, #64]
	ldp	x12, x13, [x1, #80]
	ldp	x14, x15, [x1, #96]
	ldp	x16, x17, [x1, #112]
	add	x1, x1, #128
	.p2align 4
1:	prfm	pldl1strm, [x1, #256]
	stnp	x2, x3, [x0]
	stnp	x4, x5, [x0, #16]
	stnp	x6, x7, [x0, #32]
	stnp	x8, x9, [x0, #48]
	stnp	x10, x11, [x0, #64]
	stnp	x12, x13, [x0, #80]
	stnp	x14, x15, [x0, #96]
	stnp	x16, x17, [x0, #112]
	ldp	x2, x3, [x1]
	ldp	x4, x5, [x1, #16]
	ldp	x6, x7, [x1, #32]
	ldp	x8, x9, [x1, #48]
	ldp	x10, x11, [x1, #64]
	ldp	x12, x13, [x1, #80]
	ldp	x14, x15, [x1, #96]
	ldp	x16, x17, [x1, #112]
	add	x0, x0, #128
	add	x1, x1, #128
	tst	x1, #0xfff
	b.ne	1b
	stnp	x2, x3, [x0]
	stnp	x4, x5, [x0, #16]
	stnp	x6, x7, [x0, #32]
	stnp	x8, x9, [x0, #48]
	stnp	x10, x11, [x0, #64]
	stnp	x12, x13, [x0, #80]
	stnp	x14, x15, [x0, #96]
	stnp	x16, x17, [x0, #112]
	add	x0, x0, #128
	ret
SYM_FUNC_END(__pi_copy_page_ldp_stnp)
