/* SPDX-License-Identifier: MIT */
/*
 * Hostile guest for `hypclear selftest --hostile`:
 * a correct memset plus one byte written 8 MiB past the end.
 *
 * void *hostile_stray_write(void *dst, int c, size_t n)   (memset arguments; the
 * host may pass other addresses, see crates/check/src/hostile.rs)
 *
 * Algorithm: the memset, then stores the inverted fill byte at
 * dst + n + 8 MiB (far outside the guards); returns dst.
 * x9 = mailbox (TPIDRRO_EL0), x16 = doorbell, x17 = hypercall number.
 */
#include "linkage.h"
#include "hypclear_abi.h"

SYM_FUNC_START_SELFTEST(hostile_stray_write)
	add	x5, x0, x2
	add	x5, x5, #0x800000
	cbz	x2, 8f
	mov	x3, x0
	mov	x4, x2
7:	strb	w1, [x3], #1
	subs	x4, x4, #1
	b.ne	7b
8:
	mvn	w6, w1
	strb	w6, [x5]
	ret
	.ltorg
SYM_FUNC_END(hostile_stray_write)
