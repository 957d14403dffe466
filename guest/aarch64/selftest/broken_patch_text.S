/* SPDX-License-Identifier: MIT */
/*
 * Deliberately broken memset for the checker's selftest: it patches its
 * own text (its final ret, rewritten to the same word), as code that
 * self-modifies or a stray pointer into .text would. The hyp's text is
 * read-only, so is the blob's: the store takes a permission fault.
 *
 * void *selftest_patch_text(void *dst, int c, size_t n)
 *
 * Input:  x0 dst, w1 fill byte (low 8 bits), x2 n
 * Output: x0 dst (never reached: the patch faults first)
 * Clobbers: x3, x4, NZCV
 */
#include "linkage.h"

SYM_FUNC_START_SELFTEST(selftest_patch_text)
	adr	x3, .Lret
	ldr	w4, [x3]
	str	w4, [x3]
	mov	x3, x0
	cbz	x2, .Lret
1:	strb	w1, [x3], #1
	subs	x2, x2, #1
	b.ne	1b
.Lret:	ret
SYM_FUNC_END(selftest_patch_text)
