/* SPDX-License-Identifier: MIT */
/*
 * Variant:  clear_page erms
 * Requires: -
 * Follows:  6.x arch/x86/lib/clear_page_64.S clear_page_erms, 7.x asm/page_64.h clear_pages() (ERMS)
 * Paths:    clear_page_erms clear_page+erms clear_pages+erms
 *
 * Clear whole 4 KiB pages with one "rep stosb".
 *
 * void __pi_clear_page_erms(void *addr)
 * void __pi_clear_pages_erms(void *addr, unsigned long npages)
 *
 * Input:    rdi page-aligned address, rsi page count (clear_pages only)
 * Output:   none
 * Clobbers: rax, rcx, rsi, rdi, flags (DF must be clear)
 * Why:      the clear_page both kernels pick on ERMS CPUs; clear_pages is
 *           the same instruction over npages * 4096 bytes.
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
