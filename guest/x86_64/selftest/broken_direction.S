/* SPDX-License-Identifier: MIT */
/*
 * Deliberately broken memset for the checker's selftest: it sets every
 * byte right but returns with DF set (std before ret), which only the harness's call-contract check sees.
 *
 * void *selftest_direction(void *dst, int c, size_t n)
 *
 * Input:  rdi dst, esi fill byte (low 8 bits), rdx n
 * Output: rax dst
 * Clobbers: rax, rcx, rdi, r9, flags
 */
#include "linkage.h"

SYM_FUNC_START_SELFTEST(selftest_direction)
	movq	%rdi, %r9
	movl	%esi, %eax
	movq	%rdx, %rcx
	rep stosb
	movq	%r9, %rax
	std
	ret
SYM_FUNC_END(selftest_direction)
