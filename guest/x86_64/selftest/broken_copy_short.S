/* SPDX-License-Identifier: MIT */
/*
 * Deliberately broken memcpy for the checker's selftest: one byte short.
 *
 * void *selftest_copy_short(void *dst, const void *src, size_t n)
 *
 * Input:  rdi dst, rsi src, rdx n
 * Output: rax dst
 * Clobbers: rax, rcx, rdi, rsi, r9, flags (DF assumed clear, left clear)
 *
 * Algorithm: like memcpy, but only bytes [0, n - 1) are copied; the last
 * target byte keeps whatever it held. n == 0 touches nothing. "rep movsb"
 * with rcx = n - 1.
 */
#include "linkage.h"

SYM_FUNC_START_SELFTEST(selftest_copy_short)
	movq	%rdi, %r9
	movq	%rdx, %rcx
	testq	%rcx, %rcx
	jz	1f
	decq	%rcx
	rep movsb
1:	movq	%r9, %rax
	ret
SYM_FUNC_END(selftest_copy_short)
