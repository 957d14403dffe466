/* SPDX-License-Identifier: MIT */
/*
 * Deliberately broken memset for the checker's selftest: one byte over.
 *
 * void *selftest_overrun(void *dst, int c, size_t n)
 *
 * Input:  rdi dst, esi fill byte (low 8 bits), rdx n
 * Output: rax dst
 * Clobbers: rax, rcx, rdi, r9, flags (DF assumed clear, left clear)
 *
 * Algorithm: sets n + 1 bytes, [dst, dst + n], i.e. the byte just past
 * the end is written too (also for n == 0).  "rep stosb" with
 * rcx = n + 1.
 */
#include "linkage.h"

SYM_FUNC_START_SELFTEST(selftest_overrun)
	movq	%rdi, %r9
	movl	%esi, %eax
	leaq	1(%rdx), %rcx
	rep stosb
	movq	%r9, %rax
	ret
SYM_FUNC_END(selftest_overrun)
