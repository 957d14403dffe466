/* SPDX-License-Identifier: MIT */
/*
 * Deliberately broken memset for the checker's selftest: one wrong byte.
 *
 * void *selftest_wrong_value(void *dst, int c, size_t n)
 *
 * Input:  x0 dst, w1 fill byte (low 8 bits), x2 n
 * Output: x0 dst
 * Clobbers: x2, x3, x4, NZCV
 *
 * Algorithm: sets all n bytes to c with a byte loop, then overwrites the
 * byte at offset n / 2 with c ^ 0xff. n == 0 writes nothing.
 */
#include "linkage.h"

SYM_FUNC_START_SELFTEST(selftest_wrong_value)
	cbz	x2, 2f
	mov	x3, x0
	mov	x4, x2
1:	strb	w1, [x3], #1
	subs	x4, x4, #1
	b.ne	1b
	lsr	x2, x2, #1
	eor	w4, w1, #0xff
	strb	w4, [x0, x2]
2:	ret
SYM_FUNC_END(selftest_wrong_value)
