/* SPDX-License-Identifier: MIT */
/*
 * Deliberately broken memset for the checker's selftest: it runs code
 * from the data it was given (it writes a ret at dst and calls it), as
 * an exploited buffer would. The hyp maps data execute-never, so does
 * the guest: the instruction fetch at dst faults.
 *
 * void *selftest_exec_data(void *dst, int c, size_t n)
 *
 * Input:  rdi dst, esi fill byte (low 8 bits), rdx n
 * Output: rax dst (never reached: the call faults first)
 * Clobbers: rax, rcx, rdi, r9, flags
 */
#include "linkage.h"

SYM_FUNC_START_SELFTEST(selftest_exec_data)
	movq	%rdi, %r9
	movb	$0xc3, (%rdi)
	call	*%rdi
	movl	%esi, %eax
	movq	%rdx, %rcx
	rep stosb
	movq	%r9, %rax
	ret
SYM_FUNC_END(selftest_exec_data)
