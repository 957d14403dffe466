/* SPDX-License-Identifier: MIT */
/*
 * memset with general-purpose stores, using DC ZVA for large zero fills.
 *
 * void *__pi_memset_generic(void *dst, int c, size_t n)
 *
 * Input:
 *	x0	destination, any alignment
 *	w1	fill value; only the low byte is used
 *	x2	byte count, any value including 0
 * Output:
 *	x0	dst
 * Clobbers:
 *	x1-x9, NZCV
 * Uses only general-purpose registers (no FP/SIMD, like hyp code), and
 * only "dc zva" beyond plain stores, and only when DCZID_EL0 allows it.
 *
 * Algorithm: x7 = (c & 0xff) * 0x0101010101010101, the byte in all 8
 * lanes; x4 = end = dst + n.
 *   n <= 64 is done without a loop, with stores from both ends that may
 *   overlap in the middle (every byte of [dst, end) is written, never a
 *   byte outside it):
 *	33..64: 32 bytes (2 STP) from the start and 32 bytes to the end
 *	17..32: 16 bytes (1 STP) from the start and 16 bytes to the end
 *	 8..16: 8 bytes at the start and 8 bytes ending at the end
 *	 4..7:  4 bytes at the start and 4 bytes ending at the end
 *	 2..3:  1 byte at the start and 2 bytes ending at the end
 *	 1:     1 byte;   0: nothing
 *   n > 64, zero fill, n >= 256 and DCZID_EL0.DZP == 0 with a block of
 *   16..2048 bytes (bs = 4 << DCZID_EL0.BS): x3 = dst rounded up to bs,
 *   x6 = end rounded down to bs. If x6 <= x3 (no whole block inside) use
 *   the STP path. Otherwise: head [dst, x3) with one unaligned 16-byte
 *   STP at dst and aligned 16-byte STPs up to x3 (bs >= 16 keeps x3
 *   16-aligned); blocks [x3, x6) with "dc zva", one block per iteration;
 *   tail [x6, end) with aligned 16-byte STPs while more than 16 bytes
 *   remain, then one STP of the last 16 bytes [end-16, end) (end-16 >= dst
 *   since n > 64; rewriting zeroes is harmless).
 *   n > 64 otherwise (STP path): one unaligned 16-byte STP at dst, then
 *   x3 = (dst & ~15) + 16 (in (dst, dst+16], so no gap) and x2 = end - x3
 *   (> 48). While more than 64 bytes remain, store a 64-byte block with
 *   four aligned STPs. Finally store the last 64 bytes [end-64, end) with
 *   four STPs; that covers the 1..64 remaining bytes and may rewrite
 *   bytes already set (end - 64 >= dst because n > 64).
 * Only local PC-relative branches; no stack, no data.
 */
#include "linkage.h"
#include "cpu.h"

SYM_FUNC_START(__pi_memset_generic)
	and	w1, w1, #0xff
	mov	x7, #0x0101010101010101
	mul	x7, x1, x7			/* x7 = byte broadcast */
	add	x4, x0, x2			/* x4 = end */

	cmp	x2, #64
	b.hi	.Lms_large
	cmp	x2, #16
	b.ls	.Lms_le16
	/* 17..64 */
	stp	x7, x7, [x0]
	stp	x7, x7, [x4, #-16]
	cmp	x2, #32
	b.ls	.Lms_ret
	/* 33..64 */
	stp	x7, x7, [x0, #16]
	stp	x7, x7, [x4, #-32]
.Lms_ret:
	ret

.Lms_le16:
	cmp	x2, #8
	b.lo	.Lms_lt8
	/* 8..16 */
	str	x7, [x0]
	str	x7, [x4, #-8]
	ret
.Lms_lt8:
	cmp	x2, #4
	b.lo	.Lms_lt4
	/* 4..7 */
	str	w7, [x0]
	str	w7, [x4, #-4]
	ret
.Lms_lt4:
	cbz	x2, .Lms_ret
	/* 1..3 */
	strb	w7, [x0]
	cmp	x2, #2
	b.lo	.Lms_ret
	/* 2..3 */
	strh	w7, [x4, #-2]
	ret

.Lms_large:
	cbnz	w1, .Lms_stp
	cmp	x2, #256
	b.lo	.Lms_stp
	READ_DCZID(x5)
	tbnz	x5, #4, .Lms_stp		/* DZP: DC ZVA prohibited */
	and	x5, x5, #0xf
	cmp	x5, #2				/* block < 16 bytes: not usable */
	b.lo	.Lms_stp
	mov	x6, #4
	lsl	x5, x6, x5			/* x5 = block size */
	sub	x8, x5, #1			/* x8 = block mask */
	add	x3, x0, x8
	bic	x3, x3, x8			/* x3 = first block */
	bic	x6, x4, x8			/* x6 = end of the last block */
	cmp	x6, x3
	b.ls	.Lms_stp			/* no whole block inside */

	/* Head [dst, x3): unaligned 16 bytes, then aligned 16-byte stores. */
	stp	xzr, xzr, [x0]
	and	x9, x0, #~15
	add	x9, x9, #16
	b	2f
1:	stp	xzr, xzr, [x9], #16
2:	cmp	x9, x3
	b.lo	1b
	/* Whole blocks [x3, x6). */
3:	dc	zva, x3
	add	x3, x3, x5
	cmp	x3, x6
	b.lo	3b
	/* Tail [x6, end). */
	b	5f
4:	stp	xzr, xzr, [x6], #16
5:	sub	x9, x4, x6
	cmp	x9, #16
	b.hi	4b
	stp	xzr, xzr, [x4, #-16]
	ret

.Lms_stp:
	stp	x7, x7, [x0]			/* unaligned head */
	and	x3, x0, #~15
	add	x3, x3, #16			/* x3 = aligned, <= dst + 16 */
	sub	x2, x4, x3			/* x2 = bytes left, > 48 */
	cmp	x2, #64
	b.ls	.Lms_tail
	.p2align 4
.Lms_loop:
	stp	x7, x7, [x3]
	stp	x7, x7, [x3, #16]
	stp	x7, x7, [x3, #32]
	stp	x7, x7, [x3, #48]
	add	x3, x3, #64
	sub	x2, x2, #64
	cmp	x2, #64
	b.hi	.Lms_loop
.Lms_tail:					/* 1..64 bytes left */
	stp	x7, x7, [x4, #-64]
	stp	x7, x7, [x4, #-48]
	stp	x7, x7, [x4, #-32]
	stp	x7, x7, [x4, #-16]
	ret
SYM_FUNC_END(__pi_memset_generic)
