/* SPDX-License-Identifier: MIT */
/*
 * Variant:  memset erms
 * Requires: -
 * Follows:  arch/x86/lib/memset_64.S: 6.12 __memset (FSRS), 6.1 memset_erms (ERMS)
 * Paths:    memset+fsrs memset_erms
 *
 * memset as one "rep stosb".
 *
 * void *__pi_memset_erms(void *dst, int c, size_t n)
 *
 * Input:    rdi dst (any alignment), esi fill (low byte), rdx count
 * Output:   rax dst
 * Clobbers: rax, rcx, rdi, r9, flags (DF must be clear)
 * Why:      6.12's memset on FSRS CPUs and 6.1's on ERMS CPUs.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_memset_erms)
	movq	%rdi, %r9		/* return value */
	movb	%sil, %al		/* byte to store */
	movq	%rdx, %rcx		/* byte count */
	rep stosb
	movq	%r9, %rax
	ret
SYM_FUNC_END(__pi_memset_erms)
