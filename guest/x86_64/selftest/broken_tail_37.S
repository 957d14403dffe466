/* SPDX-License-Identifier: MIT */
/*
 * Deliberately broken memset for the checker's selftest: one byte short,
 * but only for a size above 1024 that is 37 mod 64 (a tail bug only a
 * geometry with every residue above 1 KiB can find).
 *
 * void *selftest_tail_37(void *dst, int c, size_t n)
 *
 * Input:  rdi dst, esi fill byte (low 8 bits), rdx n
 * Output: rax dst
 * Clobbers: rax, rcx, rdi, r8, r9, flags (DF assumed clear, left clear)
 *
 * Algorithm: "rep stosb" with rcx = n, or n - 1 when n > 1024 and
 * n % 64 == 37 (the last byte then left untouched).
 */
#include "linkage.h"

SYM_FUNC_START_SELFTEST(selftest_tail_37)
	movq	%rdi, %r9
	movl	%esi, %eax
	movq	%rdx, %rcx
	cmpq	$1024, %rdx
	jbe	1f
	movl	%edx, %r8d
	andl	$63, %r8d
	cmpl	$37, %r8d
	jne	1f
	decq	%rcx
1:	rep stosb
	movq	%r9, %rax
	ret
SYM_FUNC_END(selftest_tail_37)
