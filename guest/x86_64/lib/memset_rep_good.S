/* SPDX-License-Identifier: MIT */
/*
 * Variant:  memset rep_good
 * Requires: -
 * Follows:  arch/x86/lib/memset_64.S __memset, 6.1 only (REP_GOOD without ERMS)
 *
 * memset as "rep stosq" for the whole quadwords and "rep stosb" for the
 * last 0..7 bytes.
 *
 * void *__pi_memset_rep_good(void *dst, int c, size_t n)
 *
 * Kernel: arch/x86/lib/memset_64.S, 6.1 only: the body of __memset, used
 * when X86_FEATURE_REP_GOOD is set and X86_FEATURE_ERMS is not (with ERMS
 * the ALTERNATIVE_2 jumps to memset_erms instead). 6.12 removed this path
 * (there it is rep stosb with FSRS, else memset_orig).
 * Differs: plain "ret" instead of RET, no patched-out alternative site at
 * the entry. Same instructions otherwise; the destination is not aligned
 * first, exactly as in the kernel.
 *
 * Input:
 *	rdi	destination, any alignment
 *	esi	fill value; only the low byte is used
 *	rdx	byte count, may be 0
 * Output:
 *	rax	dst
 * Clobbers:
 *	rax, rcx, rdx, rsi, rdi, r9, flags (DF is assumed clear and left clear)
 *
 * Algorithm: r9 keeps dst for the return value. rcx = n / 8 quadwords,
 * edx = n % 8 leftover bytes. The fill byte is widened to all eight lanes
 * of rax by multiplying it with 0x0101010101010101. "rep stosq" stores the
 * quadwords (rdi advances past them), then rcx = the leftover count and
 * "rep stosb" stores the low byte of rax that many times. No branches, no
 * stack, no data.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_memset_rep_good)
	movq	%rdi, %r9		/* return value */
	movq	%rdx, %rcx
	andl	$7, %edx		/* leftover bytes */
	shrq	$3, %rcx		/* whole quadwords */
	movzbl	%sil, %esi
	movabsq	$0x0101010101010101, %rax
	imulq	%rsi, %rax		/* byte in every lane */
	rep stosq
	movl	%edx, %ecx
	rep stosb
	movq	%r9, %rax
	ret
SYM_FUNC_END(__pi_memset_rep_good)
