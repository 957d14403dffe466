/* SPDX-License-Identifier: MIT */
/*
 * Variant:  memcpy rep_good
 * Requires: -
 * Follows:  arch/x86/lib/memcpy_64.S __memcpy, 6.1 only (REP_GOOD without ERMS)
 * Paths:    memcpy+rep_good
 *
 * memcpy as "rep movsq" for the quadwords, then "rep movsb" for the last
 * 0..7 bytes.
 *
 * void *__pi_memcpy_rep_good(void *dst, const void *src, size_t n)
 *
 * Input:    rdi dst, rsi src (any alignment, must not overlap), rdx count
 * Output:   rax dst
 * Clobbers: rax, rcx, rdx, rsi, rdi, flags (DF must be clear)
 * Why:      6.1's memcpy on REP_GOOD CPUs without ERMS (gone in 6.12).
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
