/* SPDX-License-Identifier: MIT */
/*
 * Deliberately broken memset for the checker's selftest: it sets every
 * byte right but returns dst + 1 instead of dst, which only the harness's call-contract check sees.
 *
 * void *selftest_bad_return(void *dst, int c, size_t n)
 *
 * Input:  rdi dst, esi fill byte (low 8 bits), rdx n
 * Output: rax dst
 * Clobbers: rax, rcx, rdi, r9, flags
 */
#include "linkage.h"

SYM_FUNC_START_SELFTEST(selftest_bad_return)
	movq	%rdi, %r9
	movl	%esi, %eax
	movq	%rdx, %rcx
	rep stosb
	movq	%r9, %rax
	incq	%rax
	ret
SYM_FUNC_END(selftest_bad_return)
