/* SPDX-License-Identifier: MIT */
/*
 * Variant:  memcpy orig
 * Requires: -
 * Follows:  arch/x86/lib/memcpy_64.S memcpy_orig, 6.1 and 6.12 (6.12 no FSRM; 6.1 no ERMS/REP_GOOD)
 * Paths:    memcpy_orig
 *
 * memcpy with plain 64-bit loads and stores, 32 bytes per iteration,
 * copying backwards when the low address bytes suggest a false
 * store-to-load dependence, and head/tail overlapping stores below 32.
 *
 * void *__pi_memcpy_orig(void *dst, const void *src, size_t n)
 *
 * Input:    rdi dst, rsi src (any alignment, must not overlap), rdx count
 * Output:   rax dst
 * Clobbers: rax, rcx, rdx, rsi, rdi, r8-r11, flags
 * Why:      the fallback memcpy: 6.12 without FSRM, 6.1 without ERMS and
 *           REP_GOOD.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_memcpy_orig)
	movq	%rdi, %rax		/* return value */
	cmpq	$32, %rdx
	jb	.Lmco_tail

	cmpb	%dil, %sil		/* signed compare of the low bytes */
	jl	.Lmco_backward
	subq	$32, %rdx		/* bias: the loop stops on borrow */
.Lmco_fwd:
	subq	$32, %rdx
	movq	0(%rsi), %r8
	movq	8(%rsi), %r9
	movq	16(%rsi), %r10
	movq	24(%rsi), %r11
	leaq	32(%rsi), %rsi
	movq	%r8, 0(%rdi)
	movq	%r9, 8(%rdi)
	movq	%r10, 16(%rdi)
	movq	%r11, 24(%rdi)
	leaq	32(%rdi), %rdi
	jae	.Lmco_fwd
	addl	$32, %edx		/* 0..31 left */
	jmp	.Lmco_tail

.Lmco_backward:
	addq	%rdx, %rsi		/* both pointers at the ends */
	addq	%rdx, %rdi
	subq	$32, %rdx		/* bias, as above */
	.p2align 4
.Lmco_bwd:
	subq	$32, %rdx
	movq	-8(%rsi), %r8
	movq	-16(%rsi), %r9
	movq	-24(%rsi), %r10
	movq	-32(%rsi), %r11
	leaq	-32(%rsi), %rsi
	movq	%r8, -8(%rdi)
	movq	%r9, -16(%rdi)
	movq	%r10, -24(%rdi)
	movq	%r11, -32(%rdi)
	leaq	-32(%rdi), %rdi
	jae	.Lmco_bwd
	addl	$32, %edx		/* 0..31 left, at the start */
	subq	%rdx, %rsi
	subq	%rdx, %rdi

.Lmco_tail:
	cmpl	$16, %edx
	jb	.Lmco_lt16
	movq	0(%rsi), %r8
	movq	8(%rsi), %r9
	movq	-16(%rsi,%rdx), %r10
	movq	-8(%rsi,%rdx), %r11
	movq	%r8, 0(%rdi)
	movq	%r9, 8(%rdi)
	movq	%r10, -16(%rdi,%rdx)
	movq	%r11, -8(%rdi,%rdx)
	ret
	.p2align 4
.Lmco_lt16:
	cmpl	$8, %edx
	jb	.Lmco_lt8
	movq	0(%rsi), %r8
	movq	-8(%rsi,%rdx), %r9
	movq	%r8, 0(%rdi)
	movq	%r9, -8(%rdi,%rdx)
	ret
	.p2align 4
.Lmco_lt8:
	cmpl	$4, %edx
	jb	.Lmco_lt4
	movl	(%rsi), %ecx
	movl	-4(%rsi,%rdx), %r8d
	movl	%ecx, (%rdi)
	movl	%r8d, -4(%rdi,%rdx)
	ret
	.p2align 4
.Lmco_lt4:
	subl	$1, %edx		/* CF: n was 0; ZF: n was 1 */
	jb	.Lmco_done
	movzbl	(%rsi), %ecx
	jz	.Lmco_first
	movzbq	1(%rsi), %r8
	movzbq	(%rsi,%rdx), %r9	/* rdx = n - 1: the last byte */
	movb	%r8b, 1(%rdi)
	movb	%r9b, (%rdi,%rdx)
.Lmco_first:
	movb	%cl, (%rdi)
.Lmco_done:
	ret
SYM_FUNC_END(__pi_memcpy_orig)
