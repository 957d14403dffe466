/* SPDX-License-Identifier: MIT */
/*
 * Hostile guest for `hypclear selftest --hostile`:
 * zeroes a harness area (page tables, vectors) and then uses it.
 *
 * void *hostile_scribble(void *dst, int c, size_t n)   (memset arguments; the
 * host may pass other addresses, see crates/check/src/hostile.rs)
 *
 * Algorithm: the host passes the area in x0/x2 and a far, untouched
 * address in x1. Zeroes [x0, x0 + x2) byte by byte, reads x1 (a fresh
 * table walk), then executes udf (delivery through VBAR_EL1). Never
 * returns normally.
 * x9 = mailbox (TPIDRRO_EL0), x16 = doorbell, x17 = hypercall number.
 */
#include "linkage.h"
#include "hypclear_abi.h"

SYM_FUNC_START_SELFTEST(hostile_scribble)
	cbz	x2, 2f
	mov	x3, x0
1:	strb	wzr, [x3], #1
	subs	x2, x2, #1
	b.ne	1b
2:	ldr	x4, [x1]
	udf	#0
	.ltorg
SYM_FUNC_END(hostile_scribble)
