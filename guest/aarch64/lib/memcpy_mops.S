/* SPDX-License-Identifier: MIT */
/*
 * Variant:  memcpy mops
 * Requires: mops
 * Follows:  none (not kernel code)
 *
 * memcpy with the FEAT_MOPS forward-only memory-copy instructions.
 *
 * void *__pi_memcpy_mops(void *dst, const void *src, size_t n)
 *
 * Not kernel code as far as 6.1 and 6.12 go: their arch/arm64/lib/memcpy.S
 * has no MOPS alternative. Unlike the kernel's memcpy (which is also
 * memmove) this forward-only CPYF sequence requires non-overlapping
 * buffers. Not checked against a kernel tree here.
 *
 * Input:
 *	x0	destination, any alignment
 *	x1	source, any alignment; must not overlap the destination
 *	x2	byte count, any value including 0
 * Output:
 *	x0	dst
 * Clobbers:
 *	x1, x2, x3, NZCV
 * Requires:
 *	FEAT_MOPS (ID_AA64ISAR2_EL1.MOPS != 0), and at EL0 SCTLR_EL1.MSCEn = 1;
 *	otherwise CPYFP is UNDEFINED (EC 0x00).
 *
 * Algorithm: x3 = dst (x0 must survive as the return value), then the
 * architected prologue/main/epilogue sequence CPYFP, CPYFM, CPYFE on
 * (x3, x1, x2). "F" is the forward-only copy, which is what memcpy (no
 * overlap) allows; the three instructions must stay consecutive and in
 * this order (an interrupted sequence resumes from the register state; a
 * MOPS exception, EC 0x27, asks the handler to restart it). Afterwards x3
 * and x1 point past the ends and x2 is 0. No stack, no data, no branches.
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
