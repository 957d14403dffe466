/* SPDX-License-Identifier: MIT */
/*
 * Variant:  copy_page rep
 * Requires: -
 * Follows:  arch/x86/lib/copy_page_64.S copy_page, 6.1 and 6.12 (REP_GOOD)
 * Paths:    copy_page+rep_good
 *
 * Copy one 4 KiB page with one "rep movsq".
 *
 * void __pi_copy_page_rep(void *dst, const void *src)
 *
 * Input:    rdi destination page, rsi source page (page aligned, disjoint)
 * Output:   none
 * Clobbers: rcx, rsi, rdi, flags (DF must be clear)
 * Why:      the kernel's copy_page on REP_GOOD CPUs.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_copy_page_rep)
	movl	$4096/8, %ecx
	rep movsq
	ret
SYM_FUNC_END(__pi_copy_page_rep)
