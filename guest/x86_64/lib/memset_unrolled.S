/* SPDX-License-Identifier: MIT */
/*
 * memset without string instructions: general-purpose stores only.
 *
 * void *__pi_memset_unrolled(void *dst, int c, size_t n)
 *
 * Input:
 *	rdi	destination, any alignment
 *	esi	fill value; only the low byte is used
 *	rdx	byte count, any value including 0
 * Output:
 *	rax	dst
 * Clobbers:
 *	rax, rcx, rdx, rdi, r8, flags
 *
 * Algorithm:
 *   r8 = (c & 0xff) * 0x0101010101010101, the byte in all 8 lanes.
 *   n <= 64 is done without a loop, with stores from both ends that may
 *   overlap in the middle (every byte of [dst, dst+n) is written, never
 *   a byte outside it):
 *	33..64: 4 x 8 bytes from the start and 4 x 8 bytes to the end
 *	16..32: 2 x 8 bytes from the start and 2 x 8 bytes to the end
 *	 8..15: 8 bytes at the start and 8 bytes ending at the end
 *	 4..7:  4 bytes at the start and 4 bytes ending at the end
 *	 2..3:  1 byte at the start and 2 bytes ending at the end
 *	 1:     1 byte;   0: nothing
 *   n > 64: rcx = end = dst + n.  Store 8 unaligned bytes at dst, then
 *   round rdi up to the next 8-byte boundary (at most dst + 8, so no gap)
 *   and let rdx = end - rdi (> 56).  While more than 64 bytes remain,
 *   store one 64-byte block of eight aligned 8-byte stores.  Finally
 *   store the last 64 bytes [end-64, end) with eight 8-byte stores;
 *   that covers the 1..64 remaining bytes and may rewrite bytes already
 *   set, which is harmless (end - 64 >= dst because n > 64).
 * Only local PC-relative branches; no stack, no data.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_memset_unrolled)
	movq	%rdi, %rax			/* return value */
	movzbl	%sil, %ecx
	movabsq	$0x0101010101010101, %r8
	imulq	%rcx, %r8			/* r8 = byte broadcast */

	cmpq	$64, %rdx
	ja	.Lms_large
	cmpq	$16, %rdx
	jb	.Lms_lt16
	/* 16..64 */
	movq	%r8, (%rdi)
	movq	%r8, 8(%rdi)
	movq	%r8, -16(%rdi,%rdx)
	movq	%r8, -8(%rdi,%rdx)
	cmpq	$32, %rdx
	jbe	.Lms_ret
	/* 33..64 */
	movq	%r8, 16(%rdi)
	movq	%r8, 24(%rdi)
	movq	%r8, -32(%rdi,%rdx)
	movq	%r8, -24(%rdi,%rdx)
.Lms_ret:
	ret

.Lms_lt16:
	cmpq	$8, %rdx
	jb	.Lms_lt8
	/* 8..15 */
	movq	%r8, (%rdi)
	movq	%r8, -8(%rdi,%rdx)
	ret
.Lms_lt8:
	cmpq	$4, %rdx
	jb	.Lms_lt4
	/* 4..7 */
	movl	%r8d, (%rdi)
	movl	%r8d, -4(%rdi,%rdx)
	ret
.Lms_lt4:
	testq	%rdx, %rdx
	jz	.Lms_ret
	/* 1..3 */
	movb	%r8b, (%rdi)
	cmpq	$2, %rdx
	jb	.Lms_ret
	/* 2..3 */
	movw	%r8w, -2(%rdi,%rdx)
	ret

.Lms_large:
	leaq	(%rdi,%rdx), %rcx		/* rcx = end */
	movq	%r8, (%rdi)			/* unaligned head */
	addq	$8, %rdi
	andq	$-8, %rdi			/* rdi = aligned, <= dst + 8 */
	movq	%rcx, %rdx
	subq	%rdi, %rdx			/* rdx = bytes left, > 56 */
	cmpq	$64, %rdx
	jbe	.Lms_tail
	.p2align 4
.Lms_loop:
	movq	%r8,  0(%rdi)
	movq	%r8,  8(%rdi)
	movq	%r8, 16(%rdi)
	movq	%r8, 24(%rdi)
	movq	%r8, 32(%rdi)
	movq	%r8, 40(%rdi)
	movq	%r8, 48(%rdi)
	movq	%r8, 56(%rdi)
	addq	$64, %rdi
	subq	$64, %rdx
	cmpq	$64, %rdx
	ja	.Lms_loop
.Lms_tail:					/* 1..64 bytes left */
	movq	%r8, -64(%rcx)
	movq	%r8, -56(%rcx)
	movq	%r8, -48(%rcx)
	movq	%r8, -40(%rcx)
	movq	%r8, -32(%rcx)
	movq	%r8, -24(%rcx)
	movq	%r8, -16(%rcx)
	movq	%r8, -8(%rcx)
	ret
SYM_FUNC_END(__pi_memset_unrolled)
