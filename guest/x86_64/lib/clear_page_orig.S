/* SPDX-License-Identifier: MIT */
/*
 * Variant:  clear_page orig
 * Requires: -
 * Follows:  arch/x86/lib/clear_page_64.S clear_page_orig, 6.1 and 6.12 (neither ERMS nor REP_GOOD)
 *
 * Clear whole 4 KiB pages with an unrolled loop of 64-bit stores
 * (no string instructions).
 *
 * void __pi_clear_pages_orig(void *addr, unsigned long npages)
 * void __pi_clear_page_orig(void *addr)
 *
 * Kernel: arch/x86/lib/clear_page_64.S, clear_page_orig (6.1 and 6.12),
 * which clear_page() in arch/x86/include/asm/page_64.h calls through
 * alternative_call_2 when the CPU has neither X86_FEATURE_REP_GOOD nor
 * X86_FEATURE_ERMS.
 * Differs: the loop count is npages * 64 lines in rcx (the kernel has the
 * constant 64 in ecx, i.e. npages = 1) and the count is decremented as a
 * quadword; plain "ret" instead of RET. Same stores, loop shape (count
 * first, eight stores, lea, jnz; 16-byte aligned) and the nop before the
 * return. clear_pages is a hypclear extension, not in 6.1/6.12.
 *
 * Input:
 *	rdi	page-aligned start address
 *	rsi	number of pages (clear_pages only; clear_page sets it to 1)
 * Output:
 *	none (rax is left as 0)
 * Clobbers:
 *	rax, rcx, rsi, rdi, flags
 *
 * Algorithm: eax = 0, rcx = npages * 64 (64-byte lines); if zero, return.
 * Each iteration decrements rcx, stores rax eight times (one 64-byte
 * line), advances rdi by 64 and repeats until rcx reaches zero.
 * __pi_clear_page_orig is a second entry just before the pages routine
 * that loads rsi = 1 and falls through into it. Only local PC-relative
 * branches; no stack, no data.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_clear_page_orig)
	movl	$1, %esi
SYM_INNER_LABEL(__pi_clear_pages_orig)
	xorl	%eax, %eax
	movq	%rsi, %rcx
	shlq	$6, %rcx		/* lines = npages * 64; ZF if none */
	jz	.Lcpo_done
	.p2align 4
.Lcpo_line:
	decq	%rcx
	movq	%rax, (%rdi)
	movq	%rax, 8(%rdi)
	movq	%rax, 16(%rdi)
	movq	%rax, 24(%rdi)
	movq	%rax, 32(%rdi)
	movq	%rax, 40(%rdi)
	movq	%rax, 48(%rdi)
	movq	%rax, 56(%rdi)
	leaq	64(%rdi), %rdi
	jnz	.Lcpo_line
	nop
.Lcpo_done:
	ret
SYM_FUNC_END(__pi_clear_pages_orig)
SYM_FUNC_END(__pi_clear_page_orig)
