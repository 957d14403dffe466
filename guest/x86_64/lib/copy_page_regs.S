/* SPDX-License-Identifier: MIT */
/*
 * Variant:  copy_page regs
 * Requires: -
 * Follows:  arch/x86/lib/copy_page_64.S copy_page_regs, 6.1 and 6.12 (no REP_GOOD)
 * Paths:    copy_page_regs
 *
 * Copy one 4 KiB page through eight general-purpose registers, one
 * 64-byte line per iteration, prefetching five lines ahead.
 *
 * void __pi_copy_page_regs(void *dst, const void *src)
 *
 * Input:    rdi destination page, rsi source page (page aligned, disjoint)
 * Output:   none
 * Clobbers: rax, rcx, rdx, rsi, rdi, r8-r11, flags (rbx, r12 saved on the
 *           stack and restored)
 * Why:      the kernel's copy_page on CPUs without REP_GOOD.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_copy_page_regs)
	subq	$16, %rsp
	movq	%rbx, (%rsp)
	movq	%r12, 8(%rsp)

	movl	$(4096 / 64) - 5, %ecx
	.p2align 4
.Lcpr_main:
	dec	%rcx
	movq	0(%rsi), %rax
	movq	8(%rsi), %rbx
	movq	16(%rsi), %rdx
	movq	24(%rsi), %r8
	movq	32(%rsi), %r9
	movq	40(%rsi), %r10
	movq	48(%rsi), %r11
	movq	56(%rsi), %r12

	prefetcht0 5 * 64(%rsi)

	movq	%rax, 0(%rdi)
	movq	%rbx, 8(%rdi)
	movq	%rdx, 16(%rdi)
	movq	%r8, 24(%rdi)
	movq	%r9, 32(%rdi)
	movq	%r10, 40(%rdi)
	movq	%r11, 48(%rdi)
	movq	%r12, 56(%rdi)

	leaq	64(%rsi), %rsi
	leaq	64(%rdi), %rdi
	jnz	.Lcpr_main

	movl	$5, %ecx
	.p2align 4
.Lcpr_last:
	decl	%ecx
	movq	0(%rsi), %rax
	movq	8(%rsi), %rbx
	movq	16(%rsi), %rdx
	movq	24(%rsi), %r8
	movq	32(%rsi), %r9
	movq	40(%rsi), %r10
	movq	48(%rsi), %r11
	movq	56(%rsi), %r12

	movq	%rax, 0(%rdi)
	movq	%rbx, 8(%rdi)
	movq	%rdx, 16(%rdi)
	movq	%r8, 24(%rdi)
	movq	%r9, 32(%rdi)
	movq	%r10, 40(%rdi)
	movq	%r11, 48(%rdi)
	movq	%r12, 56(%rdi)

	leaq	64(%rdi), %rdi
	leaq	64(%rsi), %rsi
	jnz	.Lcpr_last

	movq	(%rsp), %rbx
	movq	8(%rsp), %r12
	addq	$16, %rsp
	ret
SYM_FUNC_END(__pi_copy_page_regs)
