/* SPDX-License-Identifier: MIT */
/*
 * Deliberately broken memcpy for the checker's selftest: it copies
 * correctly, then changes one byte of its source.
 *
 * void *selftest_source(void *dst, const void *src, size_t n)
 *
 * Input:  x0 dst, x1 src, x2 n
 * Output: x0 dst
 * Clobbers: x3, x4, x5, NZCV
 *
 * Algorithm: copies n bytes with a byte loop, then inverts the source
 * byte at offset n / 2. n == 0 touches nothing.
 */
#include "linkage.h"

SYM_FUNC_START_SELFTEST(selftest_source)
	cbz	x2, 2f
	mov	x3, #0
1:	ldrb	w4, [x1, x3]
	strb	w4, [x0, x3]
	add	x3, x3, #1
	cmp	x3, x2
	b.ne	1b
	lsr	x5, x2, #1
	ldrb	w4, [x1, x5]
	mvn	w4, w4
	strb	w4, [x1, x5]
2:	ret
SYM_FUNC_END(selftest_source)
