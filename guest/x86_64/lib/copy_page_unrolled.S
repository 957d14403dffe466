/* SPDX-License-Identifier: MIT */
/*
 * Variant:  copy_page unrolled
 * Requires: -
 * Follows:  none (not kernel code)
 *
 * Copy one 4 KiB page with an unrolled loop of 64-bit loads and stores,
 * caller-saved registers only, no prefetch.
 *
 * void __pi_copy_page_unrolled(void *dst, const void *src)
 *
 * Input:    rdi destination page, rsi source page (page aligned, disjoint)
 * Output:   none
 * Clobbers: rax, rcx, rdx, rsi, rdi, r8-r11, flags
 * Why:      not kernel code; copy_page_regs without its prefetch and saved
 *           registers, to see what those are worth.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_copy_page_unrolled)
	movl	$4096/64, %ecx
	.p2align 4
.Lcp_loop:
	movq	 0(%rsi), %rax
	movq	 8(%rsi), %rdx
	movq	16(%rsi), %r8
	movq	24(%rsi), %r9
	movq	32(%rsi), %r10
	movq	40(%rsi), %r11
	movq	%rax,  0(%rdi)
	movq	%rdx,  8(%rdi)
	movq	%r8,  16(%rdi)
	movq	%r9,  24(%rdi)
	movq	%r10, 32(%rdi)
	movq	%r11, 40(%rdi)
	movq	48(%rsi), %rax
	movq	56(%rsi), %rdx
	movq	%rax, 48(%rdi)
	movq	%rdx, 56(%rdi)
	leaq	64(%rsi), %rsi
	leaq	64(%rdi), %rdi
	decl	%ecx
	jnz	.Lcp_loop
	ret
SYM_FUNC_END(__pi_copy_page_unrolled)
