/* SPDX-License-Identifier: MIT */
/*
 * memset with "rep stosb" (needs ERMS to be fast).
 *
 * void *__pi_memset_erms(void *dst, int c, size_t n)
 *
 * Input:
 *	rdi	destination, any alignment
 *	esi	fill value; only the low byte is used
 *	rdx	byte count, may be 0
 * Output:
 *	rax	dst
 * Clobbers:
 *	rax, rcx, rdi, r9, flags (DF is assumed clear and left clear)
 *
 * Algorithm: keep dst in r9, al = c, rcx = n, "rep stosb", return r9.
 * No stack, no data, no branches.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_memset_erms)
	movq	%rdi, %r9
	movl	%esi, %eax
	movq	%rdx, %rcx
	rep stosb
	movq	%r9, %rax
	ret
SYM_FUNC_END(__pi_memset_erms)
