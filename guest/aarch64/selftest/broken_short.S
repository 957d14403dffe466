/* SPDX-License-Identifier: MIT */
/*
 * Deliberately broken memset for the checker's selftest: one byte short.
 *
 * void *selftest_short(void *dst, int c, size_t n)
 *
 * Input:  x0 dst, w1 fill byte (low 8 bits), x2 n
 * Output: x0 dst
 * Clobbers: x2, x3, NZCV
 *
 * Algorithm: like memset, but only bytes [dst, dst + n - 1) are set; the
 * last byte is left untouched. n == 0 writes nothing. A byte loop with
 * x2 = n - 1 stores.
 */
#include "linkage.h"

SYM_FUNC_START_SELFTEST(selftest_short)
	cbz	x2, 2f
	sub	x2, x2, #1
	mov	x3, x0
	cbz	x2, 2f
1:	strb	w1, [x3], #1
	subs	x2, x2, #1
	b.ne	1b
2:	ret
SYM_FUNC_END(selftest_short)
