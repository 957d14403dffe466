/* SPDX-License-Identifier: MIT */
/*
 * Variant:  clear_page erms
 * Requires: -
 * Follows:  arch/x86/lib/clear_page_64.S clear_page_erms, 6.1 and 6.12 (ERMS)
 *
 * Clear whole 4 KiB pages with "rep stosb" (needs ERMS to be fast).
 *
 * void __pi_clear_pages_erms(void *addr, unsigned long npages)
 * void __pi_clear_page_erms(void *addr)
 *
 * Kernel: arch/x86/lib/clear_page_64.S, clear_page_erms (6.1 and 6.12),
 * which clear_page() in arch/x86/include/asm/page_64.h calls through
 * alternative_call_2 when X86_FEATURE_ERMS is set (ERMS wins over
 * REP_GOOD).
 * Differs: clear_page is the kernel's instruction sequence (ecx = 4096,
 * eax = 0, rep stosb) with a plain "ret". clear_pages is a hypclear
 * extension, not in 6.1/6.12: one rep stosb over npages * 4096 bytes.
 *
 * Input:
 *	rdi	page-aligned start address
 *	rsi	number of pages (clear_pages only; clear_page sets it to 1)
 * Output:
 *	none (rax is left as 0)
 * Clobbers:
 *	rax, rcx, rsi, rdi, flags (DF is assumed clear and left clear)
 *
 * Algorithm: rcx = npages * 4096, al = 0, "rep stosb".  npages == 0
 * clears nothing.  __pi_clear_page_erms is a second entry just before
 * the pages routine that loads rsi = 1 and falls through into it, so no
 * branch (and no relocation) joins the two.  No stack, no data.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_clear_page_erms)
	movl	$1, %esi
SYM_INNER_LABEL(__pi_clear_pages_erms)
	movq	%rsi, %rcx
	shlq	$12, %rcx
	xorl	%eax, %eax
	rep stosb
	ret
SYM_FUNC_END(__pi_clear_pages_erms)
SYM_FUNC_END(__pi_clear_page_erms)
