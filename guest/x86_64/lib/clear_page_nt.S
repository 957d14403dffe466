/* SPDX-License-Identifier: MIT */
/*
 * Variant:  clear_page nt
 * Requires: -
 * Follows:  none (not kernel code)
 *
 * Clear whole 4 KiB pages with non-temporal "movnti" stores, a full
 * 64-byte line per iteration, then "sfence".
 *
 * void __pi_clear_page_nt(void *addr)
 * void __pi_clear_pages_nt(void *addr, unsigned long npages)
 *
 * Input:    rdi page-aligned address, rsi page count (clear_pages only)
 * Output:   none
 * Clobbers: rax, rsi, rdi, flags
 * Why:      not kernel code; a comparison point that bypasses the caches.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_clear_page_nt)
	movl	$1, %esi
SYM_INNER_LABEL(__pi_clear_pages_nt)
	xorl	%eax, %eax
	shlq	$6, %rsi		/* lines = npages * 64; ZF if none */
	jz	.Lnt_done
	.p2align 4
.Lnt_loop:
	movnti	%rax,  0(%rdi)
	movnti	%rax,  8(%rdi)
	movnti	%rax, 16(%rdi)
	movnti	%rax, 24(%rdi)
	movnti	%rax, 32(%rdi)
	movnti	%rax, 40(%rdi)
	movnti	%rax, 48(%rdi)
	movnti	%rax, 56(%rdi)
	leaq	64(%rdi), %rdi
	decq	%rsi
	jnz	.Lnt_loop
.Lnt_done:
	sfence
	ret
SYM_FUNC_END(__pi_clear_pages_nt)
SYM_FUNC_END(__pi_clear_page_nt)
