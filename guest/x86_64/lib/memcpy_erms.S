/* SPDX-License-Identifier: MIT */
/*
 * memcpy with "rep movsb" (needs ERMS to be fast).
 *
 * void *__pi_memcpy_erms(void *dst, const void *src, size_t n)
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
 * Algorithm: rax = dst, rcx = n, "rep movsb".  No stack, no data,
 * no branches.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_memcpy_erms)
	movq	%rdi, %rax
	movq	%rdx, %rcx
	rep movsb
	ret
SYM_FUNC_END(__pi_memcpy_erms)
