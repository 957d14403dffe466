/* SPDX-License-Identifier: MIT */
/*
 * Variant:  memset generic
 * Requires: -
 * Follows:  arch/arm64/lib/memset.S __pi_memset, 6.1 and 6.12 (the only path)
 * Paths:    memset
 *
 * memset with general-purpose store pairs, and "dc zva" for zero fills
 * from 128 bytes when DZP = 0 and the block is a multiple of 64 bytes.
 *
 * void *__pi_memset_generic(void *dst, int c, size_t n)
 *
 * Input:    x0 dst (any alignment), w1 fill (low byte), x2 count
 * Output:   x0 dst
 * Clobbers: x2-x9, NZCV
 * Why:      the kernel's only memset (6.1 and 6.12); its zero fills are what
 *           a memset-based clear_page runs.
 */
#include "linkage.h"
#include "cpu.h"

SYM_FUNC_START(__pi_memset_generic)
	mov	x8, x0				/* x8: cursor; x0 stays dst */
	and	w7, w1, #255
	orr	w7, w7, w7, lsl #8
	orr	w7, w7, w7, lsl #16
	orr	x7, x7, x7, lsl #32		/* x7 = byte in every lane */

	cmp	x2, #15
	b.hi	.Lmsg_16up
	/* 0..15 bytes: one store per set bit of n, unaligned. */
	tbz	x2, #3, 1f
	str	x7, [x8], #8
1:	tbz	x2, #2, 2f
	str	w7, [x8], #4
2:	tbz	x2, #1, 3f
	strh	w7, [x8], #2
3:	tbz	x2, #0, 4f
	strb	w7, [x8]
4:	ret

.Lmsg_16up:
	neg	x4, x8
	ands	x4, x4, #15			/* x4 = bytes to 16-byte boundary */
	b.eq	.Lmsg_aligned
	stp	x7, x7, [x8]			/* covers them, unaligned */
	sub	x2, x2, x4
	add	x8, x8, x4

.Lmsg_aligned:
	cbz	x7, .Lmsg_zero

.Lmsg_rest:
	cmp	x2, #64
	b.ge	.Lmsg_loop64
.Lmsg_tail63:
	ands	x3, x2, #0x30			/* 0, 16, 32 or 48 bytes of STPs */
	b.eq	3f
	cmp	w3, #0x20
	b.eq	1f
	b.lt	2f
	stp	x7, x7, [x8], #16
1:	stp	x7, x7, [x8], #16
2:	stp	x7, x7, [x8], #16
3:	ands	x2, x2, #15
	cbz	x2, 4f
	add	x8, x8, x2
	stp	x7, x7, [x8, #-16]		/* last 16, overlapping */
4:	ret

	.p2align 6
.Lmsg_loop64:
	sub	x8, x8, #16			/* bias for the pre-index */
	sub	x2, x2, #64
1:	stp	x7, x7, [x8, #16]
	stp	x7, x7, [x8, #32]
	stp	x7, x7, [x8, #48]
	stp	x7, x7, [x8, #64]!
	subs	x2, x2, #64
	b.ge	1b
	tst	x2, #0x3f			/* 0..63 left? */
	add	x8, x8, #16
	b.ne	.Lmsg_tail63
	ret

.Lmsg_zero:
	cmp	x2, #63
	b.le	.Lmsg_tail63
	cmp	x2, #128
	b.lt	.Lmsg_loop64			/* too short for DC ZVA */

	READ_DCZID(x3)
	tbnz	x3, #4, .Lmsg_loop64		/* DZP: prohibited */
	mov	w9, #4
	and	w5, w3, #15
	lsl	w5, w9, w5			/* x5 = block size */
	ands	w9, w5, #63
	b.ne	.Lmsg_loop64			/* block not a multiple of 64 */

	cmp	x2, x5
	b.lt	.Lmsg_loop64
	sub	x6, x5, #1			/* x6 = block mask */
	neg	x4, x8
	ands	x4, x4, x6			/* x4 = bytes to block boundary */
	b.eq	2f
	sub	x3, x2, x4			/* left after aligning */
	cmp	x3, #64
	ccmp	x3, x5, #8, ge			/* >= 64 and >= block, else N */
	b.lt	.Lmsg_loop64
	mov	x2, x3
1:	stp	x7, x7, [x8]			/* 64-byte chunks to the boundary */
	stp	x7, x7, [x8, #16]
	stp	x7, x7, [x8, #32]
	subs	x4, x4, #64
	stp	x7, x7, [x8, #48]
	add	x8, x8, #64
	b.ge	1b
	add	x8, x8, x4			/* back to the boundary */
2:	sub	x2, x2, x5
3:	dc	zva, x8
	add	x8, x8, x5
	subs	x2, x2, x5
	b.ge	3b
	ands	x2, x2, x6			/* partial block left? */
	b.ne	.Lmsg_rest
	ret
SYM_FUNC_END(__pi_memset_generic)
