/* SPDX-License-Identifier: MIT */
/*
 * Variant:  memcpy generic
 * Requires: -
 * Follows:  arch/arm64/lib/memcpy.S __pi_memcpy, 6.1 and 6.12 (the only path)
 * Paths:    memcpy
 * Overlap:  memmove (the kernel's memcpy is also its memmove)
 *
 * memcpy and memmove with general-purpose load/store pairs: size classes
 * up to 128 bytes load everything before storing, larger copies run a
 * pipelined 64-byte loop forwards, or backwards when dst overlaps above src.
 *
 * void *__pi_memcpy_generic(void *dst, const void *src, size_t n)
 *
 * Input:    x0 dst, x1 src (any alignment, may overlap), x2 count
 * Output:   x0 dst
 * Clobbers: x1-x17, NZCV
 * Why:      the kernel's only memcpy (6.1 and 6.12), which is also memmove.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_memcpy_generic)
	add	x4, x1, x2			/* srcend */
	add	x5, x0, x2			/* dstend */
	cmp	x2, #128
	b.hi	.Lmcg_long
	cmp	x2, #32
	b.hi	.Lmcg_33_128

	/* 0..32 */
	cmp	x2, #16
	b.lo	.Lmcg_lt16
	ldp	x6, x7, [x1]
	ldp	x12, x13, [x4, #-16]
	stp	x6, x7, [x0]
	stp	x12, x13, [x5, #-16]
	ret

.Lmcg_lt16:
	tbz	x2, #3, .Lmcg_lt8
	ldr	x6, [x1]
	ldr	x7, [x4, #-8]
	str	x6, [x0]
	str	x7, [x5, #-8]
	ret

	.p2align 3
.Lmcg_lt8:
	tbz	x2, #2, .Lmcg_lt4
	ldr	w6, [x1]
	ldr	w8, [x4, #-4]
	str	w6, [x0]
	str	w8, [x5, #-4]
	ret

.Lmcg_lt4:					/* 0..3, no branches past n == 0 */
	cbz	x2, .Lmcg_ret
	lsr	x14, x2, #1
	ldrb	w6, [x1]
	ldrb	w10, [x4, #-1]
	ldrb	w8, [x1, x14]
	strb	w6, [x0]
	strb	w8, [x0, x14]
	strb	w10, [x5, #-1]
.Lmcg_ret:
	ret

	.p2align 4
.Lmcg_33_128:
	ldp	x6, x7, [x1]
	ldp	x8, x9, [x1, #16]
	ldp	x10, x11, [x4, #-32]
	ldp	x12, x13, [x4, #-16]
	cmp	x2, #64
	b.hi	.Lmcg_65_128
	stp	x6, x7, [x0]
	stp	x8, x9, [x0, #16]
	stp	x10, x11, [x5, #-32]
	stp	x12, x13, [x5, #-16]
	ret

	.p2align 4
.Lmcg_65_128:
	ldp	x14, x15, [x1, #32]
	ldp	x16, x17, [x1, #48]
	cmp	x2, #96
	b.ls	.Lmcg_le96
	ldp	x2, x3, [x4, #-64]		/* n and x3 are free now */
	ldp	x1, x4, [x4, #-48]		/* so are src and srcend */
	stp	x2, x3, [x5, #-64]
	stp	x1, x4, [x5, #-48]
.Lmcg_le96:
	stp	x6, x7, [x0]
	stp	x8, x9, [x0, #16]
	stp	x14, x15, [x0, #32]
	stp	x16, x17, [x0, #48]
	stp	x10, x11, [x5, #-32]
	stp	x12, x13, [x5, #-16]
	ret

	.p2align 4
.Lmcg_long:
	sub	x14, x0, x1
	cbz	x14, .Lmcg_ret			/* dst == src */
	cmp	x14, x2
	b.lo	.Lmcg_backward			/* dst inside (src, srcend) */

	ldp	x12, x13, [x1]			/* first 16 bytes */
	and	x14, x0, #15
	bic	x3, x0, #15			/* x3 = dst aligned down */
	sub	x1, x1, x14
	add	x2, x2, x14			/* n counted from x3: 16 too many */
	ldp	x6, x7, [x1, #16]
	stp	x12, x13, [x0]
	ldp	x8, x9, [x1, #32]
	ldp	x10, x11, [x1, #48]
	ldp	x12, x13, [x1, #64]!
	subs	x2, x2, #128 + 16
	b.ls	.Lmcg_fwd_end

.Lmcg_fwd:					/* store previous 64, load next 64 */
	stp	x6, x7, [x3, #16]
	ldp	x6, x7, [x1, #16]
	stp	x8, x9, [x3, #32]
	ldp	x8, x9, [x1, #32]
	stp	x10, x11, [x3, #48]
	ldp	x10, x11, [x1, #48]
	stp	x12, x13, [x3, #64]!
	ldp	x12, x13, [x1, #64]!
	subs	x2, x2, #64
	b.hi	.Lmcg_fwd

.Lmcg_fwd_end:					/* drain, then the last 64 bytes */
	ldp	x14, x15, [x4, #-64]
	stp	x6, x7, [x3, #16]
	ldp	x6, x7, [x4, #-48]
	stp	x8, x9, [x3, #32]
	ldp	x8, x9, [x4, #-32]
	stp	x10, x11, [x3, #48]
	ldp	x10, x11, [x4, #-16]
	stp	x12, x13, [x3, #64]
	stp	x14, x15, [x5, #-64]
	stp	x6, x7, [x5, #-48]
	stp	x8, x9, [x5, #-32]
	stp	x10, x11, [x5, #-16]
	ret

	.p2align 4
.Lmcg_backward:
	ldp	x12, x13, [x4, #-16]		/* last 16 bytes */
	and	x14, x5, #15
	sub	x4, x4, x14
	sub	x2, x2, x14
	ldp	x6, x7, [x4, #-16]
	stp	x12, x13, [x5, #-16]
	ldp	x8, x9, [x4, #-32]
	ldp	x10, x11, [x4, #-48]
	ldp	x12, x13, [x4, #-64]!
	sub	x5, x5, x14			/* dstend aligned down */
	subs	x2, x2, #128
	b.ls	.Lmcg_bwd_end

.Lmcg_bwd:
	stp	x6, x7, [x5, #-16]
	ldp	x6, x7, [x4, #-16]
	stp	x8, x9, [x5, #-32]
	ldp	x8, x9, [x4, #-32]
	stp	x10, x11, [x5, #-48]
	ldp	x10, x11, [x4, #-48]
	stp	x12, x13, [x5, #-64]!
	ldp	x12, x13, [x4, #-64]!
	subs	x2, x2, #64
	b.hi	.Lmcg_bwd

.Lmcg_bwd_end:					/* drain, then the first 64 bytes */
	ldp	x2, x3, [x1, #48]
	stp	x6, x7, [x5, #-16]
	ldp	x6, x7, [x1, #32]
	stp	x8, x9, [x5, #-32]
	ldp	x8, x9, [x1, #16]
	stp	x10, x11, [x5, #-48]
	ldp	x10, x11, [x1]
	stp	x12, x13, [x5, #-64]
	stp	x2, x3, [x0, #48]
	stp	x6, x7, [x0, #32]
	stp	x8, x9, [x0, #16]
	stp	x10, x11, [x0]
	ret
SYM_FUNC_END(__pi_memcpy_generic)
