/* SPDX-License-Identifier: MIT */
/*
 * Hostile guest for `hypclear selftest --hostile`:
 * zeroes a harness area (page tables, IDT) and then uses it.
 *
 * void *hostile_scribble(void *dst, int c, size_t n)   (memset arguments; the
 * host may pass other addresses, see crates/check/src/hostile.rs)
 *
 * Algorithm: the host passes the area in rdi/rdx and a far, untouched
 * address in rsi. Zeroes [rdi, rdi + rdx) with rep stosb, reads rsi
 * (a fresh TLB walk through the zeroed tables), then executes ud2
 * (delivery through the zeroed IDT). Never returns normally.
 */
#include "linkage.h"
#include "hypclear_abi.h"

SYM_FUNC_START_SELFTEST(hostile_scribble)
	xor	%eax, %eax
	mov	%rdx, %rcx
	rep stosb
	mov	(%rsi), %rax
	ud2
SYM_FUNC_END(hostile_scribble)
