/* SPDX-License-Identifier: MIT */
/*
 * Variant:  clear_page mops
 * Requires: mops
 * Follows:  arch/arm64/lib/clear_page.S __pi_clear_page, 7.x with ARM64_HAS_MOPS (6.x has no MOPS path)
 * Paths:    clear_page+has_mops
 *
 * Clear whole 4 KiB pages with the FEAT_MOPS non-temporal set sequence
 * SETPN/SETMN/SETEN (consecutive, in that order; EC 0x27 restarts it).
 *
 * void __pi_clear_page_mops(void *addr)
 * void __pi_clear_pages_mops(void *addr, unsigned long npages)
 *
 * Input:    x0 page-aligned address, x1 page count (clear_pages only)
 * Output:   none
 * Clobbers: x0, x1, NZCV
 * Why:      7.x's clear_page on MOPS CPUs; before 7.x, what it would cost. UNDEFINED
 *           without FEAT_MOPS (and at EL0 without SCTLR_EL1.MSCEn).
 */
#include "linkage.h"

	.arch_extension mops

SYM_FUNC_START(__pi_clear_page_mops)
	mov	x1, #1
SYM_INNER_LABEL(__pi_clear_pages_mops)
	lsl	x1, x1, #12			/* bytes = npages * PAGE_SIZE */
	setpn	[x0]!, x1!, xzr
	setmn	[x0]!, x1!, xzr
	seten	[x0]!, x1!, xzr
	ret
SYM_FUNC_END(__pi_clear_pages_mops)
SYM_FUNC_END(__pi_clear_page_mops)
