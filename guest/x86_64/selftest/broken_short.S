/* SPDX-License-Identifier: MIT */
/*
 * Deliberately broken memset for the checker's selftest: one byte short.
 *
 * void *selftest_short(void *dst, int c, size_t n)
 *
 * Input:  rdi dst, esi fill byte (low 8 bits), rdx n
 * Output: rax dst
 * Clobbers: rax, rcx, rdi, r9, flags (DF assumed clear, left clear)
 *
 * Algorithm: like memset, but only bytes [dst, dst + n - 1) are set; the
 * last byte is left untouched.  n == 0 writes nothing.  "rep stosb"
 * with rcx = n - 1.
 */
#include "linkage.h"

SYM_FUNC_START_SELFTEST(selftest_short)
	movq	%rdi, %r9
	movl	%esi, %eax
	movq	%rdx, %rcx
	testq	%rcx, %rcx
	jz	1f
	decq	%rcx
	rep stosb
1:	movq	%r9, %rax
	ret
SYM_FUNC_END(selftest_short)
