/* SPDX-License-Identifier: MIT */
/*
 * Deliberately broken memcpy for the checker's selftest: it copies
 * correctly, then changes one byte of its source.
 *
 * void *selftest_source(void *dst, const void *src, size_t n)
 *
 * Input:  rdi dst, rsi src, rdx n
 * Output: rax dst
 * Clobbers: rax, rcx, rdi, rsi, r9, flags (DF assumed clear, left clear)
 *
 * Algorithm: copies n bytes with "rep movsb", then inverts the source
 * byte at offset n / 2.  n == 0 touches nothing.
 */
#include "linkage.h"

SYM_FUNC_START_SELFTEST(selftest_source)
	movq	%rdi, %r9
	movq	%rdx, %rcx
	rep movsb
	testq	%rdx, %rdx
	jz	1f
	subq	%rdx, %rsi
	shrq	$1, %rdx
	notb	(%rsi,%rdx)
1:	movq	%r9, %rax
	ret
SYM_FUNC_END(selftest_source)
