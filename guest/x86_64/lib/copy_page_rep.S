/* SPDX-License-Identifier: MIT */
/*
 * Variant:  copy_page rep
 * Requires: -
 * Follows:  arch/x86/lib/copy_page_64.S copy_page, 6.1 and 6.12 (REP_GOOD)
 *
 * Copy one 4 KiB page with "rep movsq".
 *
 * void __pi_copy_page_rep(void *dst, const void *src)
 *
 * Kernel: arch/x86/lib/copy_page_64.S, the body of copy_page, used when
 * X86_FEATURE_REP_GOOD is set (same in 6.1 and 6.12; without REP_GOOD the
 * kernel jumps to copy_page_regs, see copy_page_regs.S).
 * Differs: plain "ret" instead of RET, no patched-out alternative site at
 * the entry. Same instructions otherwise.
 *
 * Input:
 *	rdi	destination page (page aligned)
 *	rsi	source page (page aligned); must not overlap dst
 * Output:
 *	none
 * Clobbers:
 *	rcx, rsi, rdi, flags (DF is assumed clear and left clear)
 *
 * Algorithm: rcx = 512 quadwords, "rep movsq". No stack, no data,
 * no branches.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_copy_page_rep)
	movl	$4096/8, %ecx
	rep movsq
	ret
SYM_FUNC_END(__pi_copy_page_rep)
