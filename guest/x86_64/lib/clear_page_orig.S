/* SPDX-License-Identifier: MIT */
/*
 * Variant:  clear_page orig
 * Requires: -
 * Follows:  arch/x86/lib/clear_page_64.S: 6.x clear_page_orig, 7.x __clear_pages_unrolled (neither ERMS nor REP_GOOD)
 * Paths:    clear_page_orig clear_pages_unrolled
 *
 * Clear whole 4 KiB pages with an unrolled loop of eight 64-bit stores
 * per line (no string instructions).
 *
 * void __pi_clear_page_orig(void *addr)
 * void __pi_clear_pages_orig(void *addr, unsigned long npages)
 *
 * Input:    rdi page-aligned address, rsi page count (clear_pages only)
 * Output:   none
 * Clobbers: rax, rcx, rsi, rdi, flags
 * Why:      the kernel's clear_page for CPUs with neither ERMS nor REP_GOOD.
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
