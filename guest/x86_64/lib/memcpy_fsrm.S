/* SPDX-License-Identifier: MIT */
/*
 * Variant:  memcpy fsrm
 * Requires: -
 * Follows:  arch/x86/lib/memcpy_64.S: 6.12 __memcpy (FSRM), 6.1 memcpy_erms (ERMS)
 *
 * memcpy as one "rep movsb".
 *
 * void *__pi_memcpy_fsrm(void *dst, const void *src, size_t n)
 *
 * Kernel: arch/x86/lib/memcpy_64.S.
 *   6.12: the body of __memcpy, used when X86_FEATURE_FSRM is set
 *         (otherwise 6.12 jumps to memcpy_orig, see memcpy_orig.S).
 *   6.1:  memcpy_erms, the ALTERNATIVE_2 target taken with X86_FEATURE_ERMS
 *         (ERMS wins over REP_GOOD when a CPU has both); same instructions.
 * Differs: plain "ret" instead of RET, and no patched-out alternative site
 * at the entry. Same instructions otherwise. (Formerly named `erms` here;
 * that name is still accepted.)
 *
 * Input:
 *	rdi	destination, any alignment
 *	rsi	source, any alignment; must not overlap the destination
 *	rdx	byte count, may be 0
 * Output:
 *	rax	dst
 * Clobbers:
 *	rax, rcx, rsi, rdi, flags (DF is assumed clear and left clear)
 *
 * Algorithm: rax = dst (the return value), rcx = n, "rep movsb". No
 * branches, no stack, no data.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_memcpy_fsrm)
	movq	%rdi, %rax
	movq	%rdx, %rcx
	rep movsb
	ret
SYM_FUNC_END(__pi_memcpy_fsrm)
