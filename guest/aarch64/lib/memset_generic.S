/* SPDX-License-Identifier: MIT */
/*
 * Variant:  memset generic
 * Requires: -
 * Follows:  arch/arm64/lib/memset.S __pi_memset, 6.1 and 6.12 (the only path)
 *
 * memset with general-purpose stores, and DC ZVA for zero fills of 128
 * bytes or more.
 *
 * void *__pi_memset_generic(void *dst, int c, size_t n)
 *
 * Kernel: arch/arm64/lib/memset.S, __pi_memset (identical in 6.1 and
 * 6.12; the only memset either has, no alternatives).
 * Differs: nothing in the instruction sequence, thresholds or alignment
 * (the 64-byte store loop starts on a 64-byte boundary, L1_CACHE_SHIFT
 * = 6); DCZID_EL0 is read through READ_DCZID so the unit tests can force
 * DZP = 1. Labels and register comments are hypclear's.
 *
 * Input:
 *	x0	destination, any alignment
 *	w1	fill value; only the low byte is used
 *	x2	byte count, any value including 0
 * Output:
 *	x0	dst (untouched)
 * Clobbers:
 *	x2-x9, NZCV
 * Uses only general-purpose registers (no FP/SIMD, like hyp code).
 *
 * Algorithm: x8 walks the destination; x7 = the byte in all 8 lanes
 * (built with three shifted ORs).
 *  n <= 15: store 8, 4, 2 and 1 bytes for the bits 3, 2, 1, 0 of n.
 *  n >= 16: if dst is not 16-byte aligned, store 16 unaligned bytes at dst
 *   and advance x8 to the next 16-byte boundary (n shrinks by as much).
 *   Non-zero fill, or zero fill of fewer than 128 bytes (or where DC ZVA
 *   is unusable), then:
 *   - n >= 64: the 64-byte loop: four STPs (the last pre-indexed by 64)
 *     and a subs/b.ge, six instructions, on a 64-byte boundary; then the
 *     0..63 left go to the tail.
 *   - tail (0..63): one, two or three 16-byte STPs for bits 5:4 of n, then
 *     if n % 16 != 0 one STP of the 16 bytes ending at the end (rewriting
 *     some already stored bytes).
 *  Zero fill with n >= 64 after alignment: below 128 bytes, the STP loop.
 *   Otherwise read DCZID_EL0; DC ZVA is used only if DZP = 0 and the block
 *   (4 << BS) is a multiple of 64 bytes and n >= block. STP 64-byte chunks
 *   up to the next block boundary (they may run past it; x8 is pulled
 *   back to the boundary), provided at least 64 bytes and a block remain
 *   after it; then "dc zva" one block at a time while a whole block
 *   remains, and the rest (if any) goes back through the n >= 64 / tail
 *   logic above. Any condition not met falls back to the STP loop.
 * Only local PC-relative branches; no stack, no data.
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
