/* SPDX-License-Identifier: MIT */
/*
 * Variant:  clear_page rep
 * Requires: -
 * Follows:  6.x arch/x86/lib/clear_page_64.S clear_page_rep, 7.x asm/page_64.h clear_pages() (REP_GOOD without ERMS)
 * Paths:    clear_page_rep clear_page+rep_good clear_pages+rep_good
 *
 * Clear whole 4 KiB pages with one "rep stosq".
 *
 * void __pi_clear_page_rep(void *addr)
 * void __pi_clear_pages_rep(void *addr, unsigned long npages)
 *
 * Input:    rdi page-aligned address, rsi page count (clear_pages only)
 * Output:   none
 * Clobbers: rax, rcx, rsi, rdi, flags (DF must be clear)
 * Why:      the kernel's clear_page on REP_GOOD CPUs without ERMS.
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
