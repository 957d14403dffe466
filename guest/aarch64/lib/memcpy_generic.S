/* SPDX-License-Identifier: MIT */
/*
 * memcpy with general-purpose load/store pairs ("LDP"/"STP").
 *
 * void *__pi_memcpy_generic(void *dst, const void *src, size_t n)
 *
 * Input:
 *	x0	destination, any alignment
 *	x1	source, any alignment; must not overlap the destination
 *	x2	byte count, any value including 0
 * Output:
 *	x0	dst
 * Clobbers:
 *	x1-x17, NZCV
 * Uses only general-purpose registers (no FP/SIMD, like hyp code).
 *
 * Algorithm: x4 = dstend = dst + n, x5 = srcend = src + n.
 *   n <= 64 is done without a loop: every needed source byte is loaded
 *   before any store, with loads/stores from both ends that may overlap in
 *   the middle (every byte of [dst, dstend) is written, never one outside):
 *	33..64: 32 bytes (2 LDP) from the start and 32 bytes to the end
 *	17..32: 16 bytes (1 LDP) from the start and 16 bytes to the end
 *	 8..16: 8 bytes at the start and 8 bytes ending at the end
 *	 4..7:  4 bytes at the start and 4 bytes ending at the end
 *	 1..3:  the first byte, the byte at n / 2 and the last byte
 *	 0:     nothing
 *   n > 64: copy 16 unaligned bytes at the start, then let x3 = (dst & ~15)
 *   + 16 (in (dst, dst + 16], so no gap), x1 = src + (x3 - dst) and
 *   x2 = dstend - x3 (> 48). While more than 64 bytes remain, copy a
 *   64-byte block: four LDPs, then four STPs to the 16-byte aligned
 *   destination. Finally copy the last 64 bytes [srcend-64, srcend) to
 *   [dstend-64, dstend); that covers the 1..64 remaining bytes and may
 *   rewrite bytes already copied with the same values (fine because the
 *   buffers do not overlap; dstend - 64 >= dst because n > 64).
 * Only local PC-relative branches; no stack, no data.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_memcpy_generic)
	add	x4, x0, x2			/* x4 = dstend */
	add	x5, x1, x2			/* x5 = srcend */
	cmp	x2, #64
	b.hi	.Lmc_large
	cmp	x2, #16
	b.ls	.Lmc_le16
	/* 17..64 */
	ldp	x6, x7, [x1]
	ldp	x8, x9, [x5, #-16]
	cmp	x2, #32
	b.hi	.Lmc_33_64
	stp	x6, x7, [x0]
	stp	x8, x9, [x4, #-16]
	ret
.Lmc_33_64:
	ldp	x10, x11, [x1, #16]
	ldp	x12, x13, [x5, #-32]
	stp	x6, x7, [x0]
	stp	x10, x11, [x0, #16]
	stp	x12, x13, [x4, #-32]
	stp	x8, x9, [x4, #-16]
	ret

.Lmc_le16:
	cmp	x2, #8
	b.lo	.Lmc_lt8
	/* 8..16 */
	ldr	x6, [x1]
	ldr	x7, [x5, #-8]
	str	x6, [x0]
	str	x7, [x4, #-8]
	ret
.Lmc_lt8:
	cmp	x2, #4
	b.lo	.Lmc_lt4
	/* 4..7 */
	ldr	w6, [x1]
	ldr	w7, [x5, #-4]
	str	w6, [x0]
	str	w7, [x4, #-4]
	ret
.Lmc_lt4:
	cbz	x2, .Lmc_ret
	/* 1..3: first, middle and last byte */
	lsr	x3, x2, #1
	ldrb	w6, [x1]
	ldrb	w7, [x1, x3]
	ldrb	w8, [x5, #-1]
	strb	w6, [x0]
	strb	w7, [x0, x3]
	strb	w8, [x4, #-1]
.Lmc_ret:
	ret

.Lmc_large:
	ldp	x6, x7, [x1]			/* unaligned head */
	stp	x6, x7, [x0]
	and	x3, x0, #~15
	add	x3, x3, #16			/* x3 = aligned dst, <= dst + 16 */
	sub	x6, x3, x0
	add	x1, x1, x6			/* x1 = matching src */
	sub	x2, x4, x3			/* x2 = bytes left, > 48 */
	cmp	x2, #64
	b.ls	.Lmc_tail
	.p2align 4
.Lmc_loop:
	ldp	x6, x7, [x1]
	ldp	x8, x9, [x1, #16]
	ldp	x10, x11, [x1, #32]
	ldp	x12, x13, [x1, #48]
	add	x1, x1, #64
	stp	x6, x7, [x3]
	stp	x8, x9, [x3, #16]
	stp	x10, x11, [x3, #32]
	stp	x12, x13, [x3, #48]
	add	x3, x3, #64
	sub	x2, x2, #64
	cmp	x2, #64
	b.hi	.Lmc_loop
.Lmc_tail:					/* 1..64 bytes left */
	ldp	x6, x7, [x5, #-64]
	ldp	x8, x9, [x5, #-48]
	ldp	x10, x11, [x5, #-32]
	ldp	x12, x13, [x5, #-16]
	stp	x6, x7, [x4, #-64]
	stp	x8, x9, [x4, #-48]
	stp	x10, x11, [x4, #-32]
	stp	x12, x13, [x4, #-16]
	ret
SYM_FUNC_END(__pi_memcpy_generic)
