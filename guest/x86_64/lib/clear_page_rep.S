/* SPDX-License-Identifier: MIT */
/*
 * Variant:  clear_page rep
 * Requires: -
 * Follows:  arch/x86/lib/clear_page_64.S clear_page_rep, 6.1 and 6.12 (REP_GOOD without ERMS)
 *
 * Clear whole 4 KiB pages with "rep stosq".
 *
 * void __pi_clear_pages_rep(void *addr, unsigned long npages)
 * void __pi_clear_page_rep(void *addr)
 *
 * Kernel: arch/x86/lib/clear_page_64.S, clear_page_rep (6.1 and 6.12),
 * which clear_page() in arch/x86/include/asm/page_64.h calls through
 * alternative_call_2 when X86_FEATURE_REP_GOOD is set and ERMS is not.
 * Differs: clear_page is the kernel's sequence (ecx = 512, eax = 0,
 * rep stosq) with a plain "ret". clear_pages is a hypclear extension, not
 * in 6.1/6.12: one rep stosq over npages * 512 quadwords.
 *
 * Input:
 *	rdi	page-aligned start address
 *	rsi	number of pages (clear_pages only; clear_page sets it to 1)
 * Output:
 *	none (rax is left as 0)
 * Clobbers:
 *	rax, rcx, rsi, rdi, flags (DF is assumed clear and left clear)
 *
 * Algorithm: rcx = npages * 512 quadwords, rax = 0, "rep stosq".
 * npages == 0 clears nothing.  __pi_clear_page_rep is a second entry
 * just before the pages routine that loads rsi = 1 and falls through
 * into it.  No stack, no data, no branches.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_clear_page_rep)
	movl	$1, %esi
SYM_INNER_LABEL(__pi_clear_pages_rep)
	movq	%rsi, %rcx
	shlq	$9, %rcx
	xorl	%eax, %eax
	rep stosq
	ret
SYM_FUNC_END(__pi_clear_pages_rep)
SYM_FUNC_END(__pi_clear_page_rep)
