/* SPDX-License-Identifier: MIT */
/*
 * Deliberately broken memset for the checker's selftest: one wrong byte.
 *
 * void *selftest_wrong_value(void *dst, int c, size_t n)
 *
 * Input:  rdi dst, esi fill byte (low 8 bits), rdx n
 * Output: rax dst
 * Clobbers: rax, rcx, rdi, r9, flags (DF assumed clear, left clear)
 *
 * Algorithm: sets all n bytes to c with "rep stosb", then overwrites
 * the byte at offset n / 2 with c ^ 0xff.  n == 0 writes nothing.
 */
#include "linkage.h"

SYM_FUNC_START_SELFTEST(selftest_wrong_value)
	movq	%rdi, %r9
	movl	%esi, %eax
	movq	%rdx, %rcx
	rep stosb
	testq	%rdx, %rdx
	jz	1f
	shrq	$1, %rdx
	notb	%al
	movb	%al, (%r9,%rdx)
1:	movq	%r9, %rax
	ret
SYM_FUNC_END(selftest_wrong_value)
