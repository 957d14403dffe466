/* SPDX-License-Identifier: MIT */
/*
 * Deliberately broken memset for the checker's selftest: one byte short,
 * but only for a size above 1024 that is 37 mod 64 (a tail bug only a
 * geometry with every residue above 1 KiB can find).
 *
 * void *selftest_tail_37(void *dst, int c, size_t n)
 *
 * Input:  x0 dst, w1 fill byte (low 8 bits), x2 n
 * Output: x0 dst
 * Clobbers: x1, x2, x3, x4, NZCV
 *
 * Algorithm: n - 1 bytes when n > 1024 and n % 64 == 37 (the last byte
 * then left untouched), else n: 8-byte stores of the fill byte replicated
 * (unaligned stores are fine on Normal memory), then a byte loop.
 */
#include "linkage.h"

SYM_FUNC_START_SELFTEST(selftest_tail_37)
	mov	x3, x0
	cmp	x2, #1024
	b.ls	1f
	and	x4, x2, #63
	cmp	x4, #37
	b.ne	1f
	sub	x2, x2, #1
1:	and	x1, x1, #0xff
	orr	x1, x1, x1, lsl #8
	orr	x1, x1, x1, lsl #16
	orr	x1, x1, x1, lsl #32
	b	3f
2:	str	x1, [x3], #8
	sub	x2, x2, #8
3:	cmp	x2, #8
	b.hs	2b
	cbz	x2, 5f
4:	strb	w1, [x3], #1
	subs	x2, x2, #1
	b.ne	4b
5:	ret
SYM_FUNC_END(selftest_tail_37)
