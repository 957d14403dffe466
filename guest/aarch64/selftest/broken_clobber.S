/* SPDX-License-Identifier: MIT */
/*
 * Deliberately broken memset for the checker's selftest: it sets every
 * byte right but uses x18 (the kernel's shadow call stack register, which
 * kernel code must never touch) as its cursor and does not restore it,
 * which only the harness's call-contract check sees.
 *
 * void *selftest_clobber(void *dst, int c, size_t n)
 *
 * Input:  x0 dst, w1 fill byte (low 8 bits), x2 n
 * Output: x0 dst
 * Clobbers: x2, x18 (the bug), NZCV
 *
 * Algorithm: a byte loop from dst with x18 = the cursor, x2 = bytes left;
 * x18 is left at dst + n (at dst for n == 0).
 */
#include "linkage.h"

SYM_FUNC_START_SELFTEST(selftest_clobber)
	mov	x18, x0
	cbz	x2, 2f
1:	strb	w1, [x18], #1
	subs	x2, x2, #1
	b.ne	1b
2:	ret
SYM_FUNC_END(selftest_clobber)
