/* SPDX-License-Identifier: MIT */
/*
 * Variant:  copy_page mops
 * Requires: mops
 * Follows:  none (not kernel code)
 *
 * Copy one 4 KiB page with the FEAT_MOPS memory-copy instructions.
 *
 * void __pi_copy_page_mops(void *to, const void *from)
 *
 * Not kernel code as far as 6.1 and 6.12 go: their arch/arm64/lib/
 * copy_page.S has no MOPS path. Not checked against a kernel tree here.
 *
 * Input:
 *	x0	page-aligned destination
 *	x1	page-aligned source; a different page
 * Output:
 *	none (x0 and x1 are left one page further on)
 * Clobbers:
 *	x0, x1, x2, NZCV
 * Requires:
 *	FEAT_MOPS (ID_AA64ISAR2_EL1.MOPS != 0), and at EL0 SCTLR_EL1.MSCEn = 1;
 *	otherwise CPYPWN is UNDEFINED (EC 0x00).
 *
 * Algorithm: x2 = PAGE_SIZE, then the architected prologue/main/epilogue
 * sequence CPYPWN, CPYMWN, CPYEWN on (x0, x1, x2): the "WN" forms are the
 * copy with non-temporal (no-allocate hint) writes; the plain CPY (not
 * CPYF) forms would also handle overlap by choosing the direction, which
 * two distinct pages never need. The three instructions must stay
 * consecutive and in this order (a MOPS exception, EC 0x27, asks the
 * handler to restart an interrupted sequence). No stack, no data, no
 * branches.
 */
#include "linkage.h"

	.arch_extension mops

SYM_FUNC_START(__pi_copy_page_mops)
	mov	x2, #4096
	cpypwn	[x0]!, [x1]!, x2!
	cpymwn	[x0]!, [x1]!, x2!
	cpyewn	[x0]!, [x1]!, x2!
	ret
SYM_FUNC_END(__pi_copy_page_mops)
