/* SPDX-License-Identifier: MIT */
/*
 * Deliberately broken memset for the checker's selftest: one byte over.
 *
 * void *selftest_overrun(void *dst, int c, size_t n)
 *
 * Input:  x0 dst, w1 fill byte (low 8 bits), x2 n
 * Output: x0 dst
 * Clobbers: x2, x3, NZCV
 *
 * Algorithm: sets n + 1 bytes, [dst, dst + n], i.e. the byte just past
 * the end is written too (also for n == 0). A byte loop with x2 = n + 1
 * stores.
 */
#include "linkage.h"

SYM_FUNC_START_SELFTEST(selftest_overrun)
	add	x2, x2, #1
	mov	x3, x0
1:	strb	w1, [x3], #1
	subs	x2, x2, #1
	b.ne	1b
	ret
SYM_FUNC_END(selftest_overrun)
