/* SPDX-License-Identifier: MIT */
/*
 * Variant:  memset mops
 * Requires: mops
 * Follows:  none (not kernel code)
 *
 * memset with the FEAT_MOPS memory-set instructions.
 *
 * void *__pi_memset_mops(void *dst, int c, size_t n)
 *
 * Not kernel code as far as 6.1 and 6.12 go: their arch/arm64/lib/memset.S
 * has no MOPS alternative. Models a FEAT_MOPS memset; not checked against
 * a kernel tree here.
 *
 * Input:
 *	x0	destination, any alignment
 *	w1	fill value; only the low byte is used (SET* take bits [7:0])
 *	x2	byte count, any value including 0
 * Output:
 *	x0	dst
 * Clobbers:
 *	x2, x3, NZCV
 * Requires:
 *	FEAT_MOPS (ID_AA64ISAR2_EL1.MOPS != 0), and at EL0 SCTLR_EL1.MSCEn = 1;
 *	otherwise SETP is UNDEFINED (EC 0x00).
 *
 * Algorithm: x3 = dst (x0 must survive as the return value), then the
 * architected prologue/main/epilogue sequence SETP, SETM, SETE on
 * (x3, x2, x1). The three instructions must stay consecutive and in this
 * order; an interrupted sequence is resumed from the register state (a
 * MOPS exception, EC 0x27, asks the handler to restart it). Afterwards x3
 * points past the end and x2 is 0. No stack, no data, no branches.
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
