/* SPDX-License-Identifier: MIT */
/*
 * Variant:  memset mops
 * Requires: mops
 * Follows:  arch/arm64/lib/memset.S __pi_memset, 7.x with ARM64_HAS_MOPS (6.x has no MOPS path)
 * Paths:    memset+has_mops
 *
 * memset with the FEAT_MOPS sequence SETP/SETM/SETE (consecutive, in
 * that order; EC 0x27 restarts it).
 *
 * void *__pi_memset_mops(void *dst, int c, size_t n)
 *
 * Input:    x0 dst (any alignment), w1 fill (low byte), x2 count
 * Output:   x0 dst
 * Clobbers: x2, x3, NZCV
 * Why:      7.x's memset on MOPS CPUs; before 7.x, what it would cost. UNDEFINED
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
