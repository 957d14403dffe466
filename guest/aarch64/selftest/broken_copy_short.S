/* SPDX-License-Identifier: MIT */
/*
 * Deliberately broken memcpy for the checker's selftest: one byte short.
 *
 * void *selftest_copy_short(void *dst, const void *src, size_t n)
 *
 * Input:  x0 dst, x1 src, x2 n
 * Output: x0 dst
 * Clobbers: x2, x3, x4, NZCV
 *
 * Algorithm: like memcpy, but only bytes [0, n - 1) are copied; the last
 * target byte keeps whatever it held. n <= 1 writes nothing. A byte loop.
 */
#include "linkage.h"

SYM_FUNC_START_SELFTEST(selftest_copy_short)
	subs	x4, x2, #1
	b.ls	2f
	mov	x3, #0
1:	ldrb	w2, [x1, x3]
	strb	w2, [x0, x3]
	add	x3, x3, #1
	cmp	x3, x4
	b.ne	1b
2:	ret
SYM_FUNC_END(selftest_copy_short)
