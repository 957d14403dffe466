/* SPDX-License-Identifier: MIT */
/*
 * Deliberately broken memset for the checker's selftest: it patches its
 * own text (a byte of its final ret, rewritten to the same value), as
 * code that self-modifies or a stray pointer into .text would. The hyp's
 * text is read-only, so is the blob's: the store faults.
 *
 * void *selftest_patch_text(void *dst, int c, size_t n)
 *
 * Input:  rdi dst, esi fill byte (low 8 bits), rdx n
 * Output: rax dst (never reached: the patch faults first)
 * Clobbers: rax, rcx, rdi, r9, flags
 */
#include "linkage.h"

SYM_FUNC_START_SELFTEST(selftest_patch_text)
	movq	%rdi, %r9
	movb	$0xc3, .Lret(%rip)
	movl	%esi, %eax
	movq	%rdx, %rcx
	rep stosb
	movq	%r9, %rax
.Lret:	ret
SYM_FUNC_END(selftest_patch_text)
