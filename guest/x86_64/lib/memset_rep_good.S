/* SPDX-License-Identifier: MIT */
/*
 * Variant:  memset rep_good
 * Requires: -
 * Follows:  arch/x86/lib/memset_64.S __memset, 6.1 only (REP_GOOD without ERMS)
 * Paths:    memset+rep_good
 *
 * memset as "rep stosq" for the quadwords, then "rep stosb" for the last
 * 0..7 bytes (dst is not aligned first).
 *
 * void *__pi_memset_rep_good(void *dst, int c, size_t n)
 *
 * Input:    rdi dst (any alignment), esi fill (low byte), rdx count
 * Output:   rax dst
 * Clobbers: rax, rcx, rdx, rsi, rdi, r9, flags (DF must be clear)
 * Why:      6.1's memset on REP_GOOD CPUs without ERMS (gone in 6.12).
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
