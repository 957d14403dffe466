/* SPDX-License-Identifier: MIT */
/*
 * Variant:  memcpy rep_good
 * Requires: -
 * Follows:  arch/x86/lib/memcpy_64.S __memcpy, 6.1 only (REP_GOOD without ERMS)
 *
 * memcpy as "rep movsq" for the whole quadwords and "rep movsb" for the
 * last 0..7 bytes.
 *
 * void *__pi_memcpy_rep_good(void *dst, const void *src, size_t n)
 *
 * Kernel: arch/x86/lib/memcpy_64.S, 6.1 only: the body of __memcpy, used
 * when X86_FEATURE_REP_GOOD is set and X86_FEATURE_ERMS is not (with ERMS
 * the ALTERNATIVE_2 jumps to memcpy_erms). 6.12 removed this path (there
 * it is rep movsb with FSRM, else memcpy_orig).
 * Differs: plain "ret" instead of RET, no patched-out alternative site at
 * the entry. Same instructions otherwise (nothing is aligned first).
 *
 * Input:
 *	rdi	destination, any alignment
 *	rsi	source, any alignment; must not overlap the destination
 *	rdx	byte count, may be 0
 * Output:
 *	rax	dst
 * Clobbers:
 *	rax, rcx, rdx, rsi, rdi, flags (DF is assumed clear and left clear)
 *
 * Algorithm: rax = dst; rcx = n / 8 and edx = n % 8; "rep movsq" copies
 * the quadwords, then rcx = the leftover count and "rep movsb" copies the
 * remaining bytes from where the first one stopped. No branches, no stack,
 * no data.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_memcpy_rep_good)
	movq	%rdi, %rax		/* return value */
	movq	%rdx, %rcx
	shrq	$3, %rcx		/* whole quadwords */
	andl	$7, %edx		/* leftover bytes */
	rep movsq
	movl	%edx, %ecx
	rep movsb
	ret
SYM_FUNC_END(__pi_memcpy_rep_good)
