/* SPDX-License-Identifier: MIT */
/*
 * Variant:  copy_page mops
 * Requires: mops
 * Follows:  arch/arm64/lib/copy_page.S __pi_copy_page, 7.x with ARM64_HAS_MOPS (6.x has no MOPS path)
 * Paths:    copy_page+has_mops
 *
 * Copy one 4 KiB page with the FEAT_MOPS sequence CPYPWN/CPYMWN/CPYEWN
 * (non-temporal writes; consecutive, in that order; EC 0x27 restarts it).
 *
 * void __pi_copy_page_mops(void *to, const void *from)
 *
 * Input:    x0 destination page, x1 source page (page aligned, disjoint)
 * Output:   none
 * Clobbers: x0, x1, x2, NZCV
 * Why:      7.x's copy_page on MOPS CPUs; before 7.x, what it would cost. UNDEFINED
 *           without FEAT_MOPS (and at EL0 without SCTLR_EL1.MSCEn).
 */
#include "linkage.h"

	.arch_extension mops

SYM_FUNC_START(__pi_copy_page_mops)
	mov	x2, #4096
	cpypwn	[x0]!, [x1]!, x2!
	cpymwn	[x0]!, [x1]!, x2!
	cpyewn	[x0]!, [x1]!, x2!
	ret
SYM_FUNC_END(__pi_copy_page_mops)
