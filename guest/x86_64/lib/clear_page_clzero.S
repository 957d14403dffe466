/* SPDX-License-Identifier: MIT */
/*
 * Variant:  clear_page clzero
 * Requires: clzero
 * Follows:  none (not kernel code)
 *
 * Clear whole 4 KiB pages with the AMD "clzero" instruction.
 *
 * void __pi_clear_pages_clzero(void *addr, unsigned long npages)
 * void __pi_clear_page_clzero(void *addr)
 *
 * Not kernel code: neither 6.1 nor 6.12 clears pages with AMD clzero; this
 * variant is a hypclear comparison point only.
 *
 * Requires CPUID Fn8000_0008_EBX[0] (CLZERO); the caller must check it,
 * on other CPUs the instruction raises #UD.
 *
 * Input:
 *	rdi	page-aligned start address
 *	rsi	number of pages (clear_pages only; clear_page sets it to 1)
 * Output:
 *	none (rax is left pointing at the end of the cleared range)
 * Clobbers:
 *	rax, rsi, flags
 *
 * Algorithm: clzero zeroes the whole 64-byte cache line containing the
 * address in rax.  rax = addr, rsi = npages * 16 (groups of four lines,
 * 256 bytes; a page is 16 groups); if zero, skip.  Each iteration issues
 * four clzero at rax, rax+64, rax+128, rax+192 (advancing rax by 64
 * each time) and counts rsi down.  clzero stores are weakly ordered like
 * non-temporal stores, so a final "sfence" orders them before any later
 * store.  __pi_clear_page_clzero is a second entry just before the pages
 * routine that loads rsi = 1 and falls through into it.  Only local
 * PC-relative branches; no stack, no data.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_clear_page_clzero)
	movl	$1, %esi
SYM_INNER_LABEL(__pi_clear_pages_clzero)
	movq	%rdi, %rax
	shlq	$4, %rsi		/* groups of 4 lines; ZF if none */
	jz	.Lclz_done
	.p2align 4
.Lclz_loop:
	clzero
	addq	$64, %rax
	clzero
	addq	$64, %rax
	clzero
	addq	$64, %rax
	clzero
	addq	$64, %rax
	decq	%rsi
	jnz	.Lclz_loop
.Lclz_done:
	sfence
	ret
SYM_FUNC_END(__pi_clear_pages_clzero)
SYM_FUNC_END(__pi_clear_page_clzero)
