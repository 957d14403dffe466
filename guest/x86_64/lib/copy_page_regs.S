/* SPDX-License-Identifier: MIT */
/*
 * Variant:  copy_page regs
 * Requires: -
 * Follows:  arch/x86/lib/copy_page_64.S copy_page_regs, 6.1 and 6.12 (no REP_GOOD)
 *
 * Copy one 4 KiB page through eight general-purpose registers, 64 bytes
 * per iteration, prefetching five lines ahead.
 *
 * void __pi_copy_page_regs(void *dst, const void *src)
 *
 * Kernel: arch/x86/lib/copy_page_64.S, copy_page_regs, identical in 6.1
 * and 6.12: what copy_page jumps to when X86_FEATURE_REP_GOOD is not set.
 * Differs: plain "ret" instead of RET. Same instructions, register use,
 * prefetch distance and loop split otherwise.
 *
 * Input:
 *	rdi	destination page (page aligned)
 *	rsi	source page (page aligned); must not overlap dst
 * Output:
 *	none
 * Clobbers:
 *	rax, rcx, rdx, rsi, rdi, r8, r9, r10, r11, flags
 *	(rbx and r12 are used too, but saved on the stack and restored)
 *
 * Algorithm: save rbx and r12 in 16 bytes of stack. Main loop, 59
 * iterations (64 lines minus 5): load the eight quadwords of one source
 * line into rax, rbx, rdx, r8-r12, issue "prefetcht0" for the source line
 * 5 * 64 bytes ahead, store the eight quadwords, advance both pointers by
 * 64. Second loop, 5 iterations: the same copy without the prefetch (the
 * lines it would touch lie past the source page). Restore rbx and r12.
 * The loop counters are decremented first; the loops end on ZF. Only
 * local PC-relative branches; no data.
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
