/* SPDX-License-Identifier: MIT */
/*
 * Deliberately broken memset for the checker's selftest: it sets every
 * byte right but returns dst + 1 instead of dst, which only the harness's
 * call-contract check sees.
 *
 * void *selftest_bad_return(void *dst, int c, size_t n)
 *
 * Input:  x0 dst, w1 fill byte (low 8 bits), x2 n
 * Output: x0 dst + 1 (the bug; memset returns dst)
 * Clobbers: x2, x3, NZCV
 *
 * Algorithm: a byte loop with x3 = the cursor, x2 = bytes left, then
 * x0 += 1.
 */
#include "linkage.h"

SYM_FUNC_START_SELFTEST(selftest_bad_return)
	mov	x3, x0
	cbz	x2, 2f
1:	strb	w1, [x3], #1
	subs	x2, x2, #1
	b.ne	1b
2:	add	x0, x0, #1
	ret
SYM_FUNC_END(selftest_bad_return)
