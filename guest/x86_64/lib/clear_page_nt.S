/* SPDX-License-Identifier: MIT */
/*
 * Variant:  clear_page nt
 * Requires: -
 * Follows:  none (not kernel code)
 *
 * Clear whole 4 KiB pages with non-temporal stores (SSE2 movnti),
 * bypassing the caches.
 *
 * void __pi_clear_pages_nt(void *addr, unsigned long npages)
 * void __pi_clear_page_nt(void *addr)
 *
 * Not kernel code: neither 6.1 nor 6.12 clears pages with non-temporal
 * movnti stores; this variant is a hypclear comparison point only.
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
 * return.  Otherwise each iteration does eight 8-byte "movnti" stores
 * of rax = 0 (one full line, so the write-combining buffer is flushed
 * as a whole line), advances rdi by 64 and counts rsi down.  A final
 * "sfence" orders the weakly-ordered NT stores before any later store
 * (and is executed even for npages == 0, which is harmless).
 * __pi_clear_page_nt is a second entry just before the pages routine
 * that loads rsi = 1 and falls through into it.  Only local PC-relative
 * branches; no stack, no data.
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
