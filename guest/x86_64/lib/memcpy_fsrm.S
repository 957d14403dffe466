/* SPDX-License-Identifier: MIT */
/*
 * Variant:  memcpy fsrm
 * Requires: -
 * Follows:  arch/x86/lib/memcpy_64.S: 6.12 __memcpy (FSRM), 6.1 memcpy_erms (ERMS)
 * Paths:    memcpy+fsrm memcpy_erms
 *
 * memcpy as one "rep movsb".
 *
 * void *__pi_memcpy_fsrm(void *dst, const void *src, size_t n)
 *
 * Input:    rdi dst, rsi src (any alignment, must not overlap), rdx count
 * Output:   rax dst
 * Clobbers: rax, rcx, rsi, rdi, flags (DF must be clear)
 * Why:      6.12's memcpy on FSRM CPUs and 6.1's on ERMS CPUs.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_memcpy_fsrm)
	movq	%rdi, %rax
	movq	%rdx, %rcx
	rep movsb
	ret
SYM_FUNC_END(__pi_memcpy_fsrm)
