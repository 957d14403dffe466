/* SPDX-License-Identifier: MIT */
/*
 * Clear whole 4 KiB pages with an unrolled loop of 64-bit stores
 * (no string instructions).
 *
 * void __pi_clear_pages_orig(void *addr, unsigned long npages)
 * void __pi_clear_page_orig(void *addr)
 *
 * Input:
 *	rdi	page-aligned start address
 *	rsi	number of pages (clear_pages only; clear_page sets it to 1)
 * Output:
 *	none (rax is left as 0)
 * Clobbers:
 *	rax, rsi, rdi, flags
 *
 * Algorithm: rsi = npages * 64 (number of 64-byte lines); if zero,
 * return.  Otherwise each iteration stores rax = 0 eight times (one
 * full aligned cache line), advances rdi by 64 and counts rsi down.
 * __pi_clear_page_orig is a second entry just before the pages routine
 * that loads rsi = 1 and falls through into it.  Only local PC-relative
 * branches; no stack, no data.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_clear_page_orig)
	movl	$1, %esi
SYM_INNER_LABEL(__pi_clear_pages_orig)
	xorl	%eax, %eax
	shlq	$6, %rsi		/* lines = npages * 64; ZF if none */
	jz	.Lorig_done
	.p2align 4
.Lorig_loop:
	movq	%rax,  0(%rdi)
	movq	%rax,  8(%rdi)
	movq	%rax, 16(%rdi)
	movq	%rax, 24(%rdi)
	movq	%rax, 32(%rdi)
	movq	%rax, 40(%rdi)
	movq	%rax, 48(%rdi)
	movq	%rax, 56(%rdi)
	leaq	64(%rdi), %rdi
	decq	%rsi
	jnz	.Lorig_loop
.Lorig_done:
	ret
SYM_FUNC_END(__pi_clear_pages_orig)
SYM_FUNC_END(__pi_clear_page_orig)
