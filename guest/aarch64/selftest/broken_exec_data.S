/* SPDX-License-Identifier: MIT */
/*
 * Deliberately broken memset for the checker's selftest: it runs code
 * from the data it was given (it writes a ret at the first 4-byte aligned
 * address in its target and branches there), as an exploited buffer
 * would. The hyp maps data execute-never, so does the guest: the fetch
 * takes an instruction abort inside the target.
 *
 * void *selftest_exec_data(void *dst, int c, size_t n)
 *
 * Input:  x0 dst, w1 fill byte (low 8 bits), x2 n (at least 8)
 * Output: x0 dst (never reached: the branch faults first)
 * Clobbers: x3, x4, x5, NZCV
 */
#include "linkage.h"

SYM_FUNC_START_SELFTEST(selftest_exec_data)
	mov	x5, x30
	add	x3, x0, #3
	and	x3, x3, #~3
	ldr	w4, =0xd65f03c0		/* ret */
	str	w4, [x3]
	dsb	ish
	isb
	blr	x3
	mov	x30, x5
	mov	x3, x0
	cbz	x2, 2f
1:	strb	w1, [x3], #1
	subs	x2, x2, #1
	b.ne	1b
2:	ret
	.ltorg
SYM_FUNC_END(selftest_exec_data)
