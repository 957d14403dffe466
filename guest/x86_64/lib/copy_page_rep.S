/* SPDX-License-Identifier: MIT */
/*
 * Copy one 4 KiB page with "rep movsq".
 *
 * void __pi_copy_page_rep(void *dst, const void *src)
 *
 * Input:
 *	rdi	destination page (page aligned)
 *	rsi	source page (page aligned); must not overlap dst
 * Output:
 *	none
 * Clobbers:
 *	rcx, rsi, rdi, flags (DF is assumed clear and left clear)
 *
 * Algorithm: rcx = 512 quadwords, "rep movsq".  No stack, no data,
 * no branches.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_copy_page_rep)
	movl	$4096/8, %ecx
	rep movsq
	ret
SYM_FUNC_END(__pi_copy_page_rep)
