/* SPDX-License-Identifier: MIT */
/*
 * Deliberately broken memset for the checker's selftest: 32-bit pointer
 * arithmetic. It keeps only the low 32 bits of dst, as a routine that
 * computes a pointer in a w register would; the arena lives at the hyp VA
 * far above 4 GiB, where nothing is mapped below 4 GiB, so the first
 * store faults there.
 *
 * void *selftest_truncate(void *dst, int c, size_t n)
 *
 * Input:  x0 dst, w1 fill byte (low 8 bits), x2 n
 * Output: x0 dst (never reached for n > 0: the first store faults)
 * Clobbers: x2, x3, NZCV
 */
#include "linkage.h"

SYM_FUNC_START_SELFTEST(selftest_truncate)
	mov	w3, w0
	cbz	x2, 2f
1:	strb	w1, [x3], #1
	subs	x2, x2, #1
	b.ne	1b
2:	ret
SYM_FUNC_END(selftest_truncate)
