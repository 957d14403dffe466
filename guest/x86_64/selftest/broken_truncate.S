/* SPDX-License-Identifier: MIT */
/*
 * Deliberately broken memset for the checker's selftest: 32-bit pointer
 * arithmetic. It keeps only the low 32 bits of dst, as a routine built
 * around a `movl`/`leal` on a pointer would; the arena lives at the
 * direct map far above 4 GiB, so the first store faults there.
 *
 * void *selftest_truncate(void *dst, int c, size_t n)
 *
 * Input:  rdi dst, esi fill byte (low 8 bits), rdx n
 * Output: rax dst
 * Clobbers: rax, rcx, rdi, r9, flags (DF assumed clear, left clear)
 */
#include "linkage.h"

SYM_FUNC_START_SELFTEST(selftest_truncate)
	movq	%rdi, %r9
	movl	%edi, %edi
	movl	%esi, %eax
	movq	%rdx, %rcx
	rep stosb
	movq	%r9, %rax
	ret
SYM_FUNC_END(selftest_truncate)
