/* SPDX-License-Identifier: MIT */
/*
 * Variant:  clear_page clzero
 * Requires: clzero
 * Follows:  none (not kernel code)
 *
 * Clear whole 4 KiB pages with AMD "clzero", one 64-byte line per
 * instruction, then "sfence" (clzero stores are weakly ordered).
 *
 * void __pi_clear_page_clzero(void *addr)
 * void __pi_clear_pages_clzero(void *addr, unsigned long npages)
 *
 * Input:    rdi page-aligned address, rsi page count (clear_pages only)
 * Output:   none
 * Clobbers: rax, rsi, flags
 * Why:      not kernel code; a comparison point for the cache-line zeroing
 *           instruction AMD offers (#UD without CPUID CLZERO).
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
