/* SPDX-License-Identifier: MIT */
/*
 * Deliberately broken memset for the checker's selftest: it sets every
 * byte right but returns with sp 16 bytes too high (an unbalanced pop:
 * still 16-byte aligned, so only the harness's call-contract check sees
 * it, not an SP alignment fault).
 *
 * void *selftest_stack(void *dst, int c, size_t n)
 *
 * Input:  x0 dst, w1 fill byte (low 8 bits), x2 n
 * Output: x0 dst
 * Clobbers: x2, x3, sp (the bug), NZCV
 *
 * Algorithm: a byte loop with x3 = the cursor, x2 = bytes left, then
 * sp += 16.
 */
#include "linkage.h"

SYM_FUNC_START_SELFTEST(selftest_stack)
	mov	x3, x0
	cbz	x2, 2f
1:	strb	w1, [x3], #1
	subs	x2, x2, #1
	b.ne	1b
2:	add	sp, sp, #16
	ret
SYM_FUNC_END(selftest_stack)
