/* SPDX-License-Identifier: MIT */
/*
 * Variant:  copy_page ldp-stnp-prfm
 * Requires: -
 * Follows:  arch/arm64/lib/copy_page.S __pi_copy_page, 6.1 with NO_HW_PREFETCH
 * Paths:    copy_page+has_no_hw_prefetch
 *
 * Copy one 4 KiB page as copy_page_ldp_stnp does, plus "prfm pldl1strm"
 * hints 384 bytes ahead of the loads.
 *
 * void __pi_copy_page_ldp_stnp_prfm(void *to, const void *from)
 *
 * Input:    x0 destination page, x1 source page (page aligned, disjoint)
 * Output:   none
 * Clobbers: x0-x17, NZCV (x18 untouched)
 * Why:      6.1's copy_page with ARM64_HAS_NO_HW_PREFETCH patched in (Cavium
 *           ThunderX); 6.12 dropped the hints.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_copy_page_ldp_stnp_prfm)
	prfm	pldl1strm, [x1, #128]		/* three lines ahead */
	prfm	pldl1strm, [x1, #256]
	prfm	pldl1strm, [x1, #384]
	ldp	x2, x3, [x1]
	ldp	x4, x5, [x1, #16]
	ldp	x6, x7, [x1, #32]
	ldp	x8, x9, [x1, #48]
	ldp	x10, x11, [x1, #64]
	ldp	x12, x13, [x1, #80]
	ldp	x14, x15, [x1, #96]
	ldp	x16, x17, [x1, #112]

	add	x0, x0, #256
	add	x1, x1, #128
1:
	tst	x0, #0xfff			/* last chunk loaded? */
	prfm	pldl1strm, [x1, #384]

	stnp	x2, x3, [x0, #-256]
	ldp	x2, x3, [x1]
	stnp	x4, x5, [x0, #16 - 256]
	ldp	x4, x5, [x1, #16]
	stnp	x6, x7, [x0, #32 - 256]
	ldp	x6, x7, [x1, #32]
	stnp	x8, x9, [x0, #48 - 256]
	ldp	x8, x9, [x1, #48]
	stnp	x10, x11, [x0, #64 - 256]
	ldp	x10, x11, [x1, #64]
	stnp	x12, x13, [x0, #80 - 256]
	ldp	x12, x13, [x1, #80]
	stnp	x14, x15, [x0, #96 - 256]
	ldp	x14, x15, [x1, #96]
	stnp	x16, x17, [x0, #112 - 256]
	ldp	x16, x17, [x1, #112]

	add	x0, x0, #128
	add	x1, x1, #128

	b.ne	1b

	stnp	x2, x3, [x0, #-256]
	stnp	x4, x5, [x0, #16 - 256]
	stnp	x6, x7, [x0, #32 - 256]
	stnp	x8, x9, [x0, #48 - 256]
	stnp	x10, x11, [x0, #64 - 256]
	stnp	x12, x13, [x0, #80 - 256]
	stnp	x14, x15, [x0, #96 - 256]
	stnp	x16, x17, [x0, #112 - 256]
	ret
SYM_FUNC_END(__pi_copy_page_ldp_stnp_prfm)
