/* SPDX-License-Identifier: MIT */
/*
 * Variant:  memcpy mops
 * Requires: mops
 * Follows:  none (not kernel code)
 *
 * memcpy with the FEAT_MOPS forward-only sequence CPYFP/CPYFM/CPYFE
 * (consecutive, in that order; EC 0x27 restarts it).
 *
 * void *__pi_memcpy_mops(void *dst, const void *src, size_t n)
 *
 * Input:    x0 dst, x1 src (any alignment, must not overlap), x2 count
 * Output:   x0 dst
 * Clobbers: x1, x2, x3, NZCV
 * Why:      not kernel code; what a MOPS memcpy would cost. UNDEFINED
 *           without FEAT_MOPS (and at EL0 without SCTLR_EL1.MSCEn).
 */
#include "linkage.h"

	.arch_extension mops

SYM_FUNC_START(__pi_memcpy_mops)
	mov	x3, x0
	cpyfp	[x3]!, [x1]!, x2!
	cpyfm	[x3]!, [x1]!, x2!
	cpyfe	[x3]!, [x1]!, x2!
	ret
SYM_FUNC_END(__pi_memcpy_mops)
