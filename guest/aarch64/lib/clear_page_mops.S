/* SPDX-License-Identifier: MIT */
/*
 * Variant:  clear_page mops
 * Requires: mops
 * Follows:  none (not kernel code)
 *
 * Clear whole 4 KiB pages with the FEAT_MOPS memory-set instructions.
 *
 * void __pi_clear_pages_mops(void *addr, unsigned long npages)
 * void __pi_clear_page_mops(void *addr)
 *
 * Not kernel code as far as 6.1 and 6.12 go: neither has a MOPS path in
 * arch/arm64/lib (clear_page.S is DC ZVA / STNP only). It models what a
 * FEAT_MOPS clear_page would do; not checked against a kernel tree here.
 *
 * Input:
 *	x0	page-aligned start address
 *	x1	number of pages (clear_pages only; clear_page sets it to 1)
 * Output:
 *	none (x0 is left at addr + npages * PAGE_SIZE)
 * Clobbers:
 *	x0, x1, NZCV
 * Requires:
 *	FEAT_MOPS (ID_AA64ISAR2_EL1.MOPS != 0), and at EL0 SCTLR_EL1.MSCEn = 1;
 *	otherwise SETPN is UNDEFINED (EC 0x00).
 *
 * Algorithm: x1 = npages * PAGE_SIZE bytes, then the architected
 * prologue/main/epilogue sequence SETPN, SETMN, SETEN with XZR as the
 * source: the "N" forms are the non-temporal (no-allocate hint) memory
 * set. The three instructions must stay consecutive and in this order: an
 * interrupted sequence is resumed by the CPU (or restarted by whoever
 * handles a MOPS exception, EC 0x27) from the register state. npages == 0
 * makes x1 = 0, which the sequence handles by storing nothing. No stack,
 * no data, no branches.
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
