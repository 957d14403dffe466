/* SPDX-License-Identifier: MIT */
/*
 * Variant:  memset mops
 * Requires: mops
 * Follows:  none (not kernel code)
 *
 * memset with the FEAT_MOPS sequence SETP/SETM/SETE (consecutive, in
 * that order; EC 0x27 restarts it).
 *
 * void *__pi_memset_mops(void *dst, int c, size_t n)
 *
 * Input:    x0 dst (any alignment), w1 fill (low byte), x2 count
 * Output:   x0 dst
 * Clobbers: x2, x3, NZCV
 * Why:      not kernel code; what a MOPS memset would cost. UNDEFINED
 *           without FEAT_MOPS (and at EL0 without SCTLR_EL1.MSCEn).
 */
#include "linkage.h"

	.arch_extension mops

SYM_FUNC_START(__pi_memset_mops)
	mov	x3, x0
	setp	[x3]!, x2!, x1
	setm	[x3]!, x2!, x1
	sete	[x3]!, x2!, x1
	ret
SYM_FUNC_END(__pi_memset_mops)
