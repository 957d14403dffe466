/* SPDX-License-Identifier: MIT */
/*
 * Variant:  copy_page unrolled
 * Requires: -
 * Follows:  none (not kernel code)
 *
 * Copy one 4 KiB page with an unrolled loop of 64-bit loads and stores
 * (no string instructions).
 *
 * void __pi_copy_page_unrolled(void *dst, const void *src)
 *
 * Not kernel code: a hypclear comparison point. The kernel's register
 * copy is copy_page_regs (copy_page_regs.S), which uses eight registers
 * (saving rbx and r12) and prefetches; this one uses only caller-saved
 * registers and no prefetch.
 *
 * Input:
 *	rdi	destination page (page aligned)
 *	rsi	source page (page aligned); must not overlap dst
 * Output:
 *	none
 * Clobbers:
 *	rax, rcx, rdx, rsi, rdi, r8, r9, r10, r11, flags
 *
 * Algorithm: 64 iterations (counted down in ecx), each copying one
 * 64-byte line with eight 8-byte loads and eight 8-byte stores.  Only
 * caller-saved registers are used, which leaves six data registers
 * (rax, rdx, r8-r11): the first six quadwords are loaded and stored,
 * then the last two.  Only a local PC-relative branch; no stack, no data.
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
