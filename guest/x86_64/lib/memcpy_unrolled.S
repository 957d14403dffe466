/* SPDX-License-Identifier: MIT */
/*
 * memcpy without string instructions: general-purpose loads/stores only.
 *
 * void *__pi_memcpy_unrolled(void *dst, const void *src, size_t n)
 *
 * Input:
 *	rdi	destination, any alignment
 *	rsi	source, any alignment; must not overlap the destination
 *	rdx	byte count, any value including 0
 * Output:
 *	rax	dst
 * Clobbers:
 *	rax, rcx, rdx, rsi, rdi, r8, r9, r10, r11, flags
 *
 * Algorithm (relies on src and dst not overlapping, so the order of the
 * loads and stores never matters and bytes may be copied twice):
 *   n <= 64 is done without a loop, with copies from both ends that may
 *   overlap in the middle (never touching a byte outside the buffers):
 *	33..64: 4 x 8 bytes from the start and 4 x 8 bytes to the end
 *	16..32: 2 x 8 bytes from the start and 2 x 8 bytes to the end
 *	 8..15: 8 bytes at the start and 8 bytes ending at the end
 *	 4..7:  4 bytes at the start and 4 bytes ending at the end
 *	 2..3:  1 byte at the start and 2 bytes ending at the end
 *	 1:     1 byte;   0: nothing
 *   n > 64: copy 8 unaligned bytes at the start, then advance rdi to
 *   the next 8-byte boundary (1..8 bytes, so no gap) and rsi and rdx by
 *   the same amount (rdx > 56 remains).  While more than 64 bytes
 *   remain, copy a 64-byte block: eight 8-byte loads (source possibly
 *   unaligned) and eight aligned 8-byte stores, in two halves of four
 *   registers.  Finally copy the last 64 bytes, ending at the end of
 *   both buffers, which covers the 1..64 remaining bytes.
 * Only local PC-relative branches; no stack, no data.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_memcpy_unrolled)
	movq	%rdi, %rax			/* return value */
	cmpq	$64, %rdx
	ja	.Lmc_large
	cmpq	$16, %rdx
	jb	.Lmc_lt16
	/* 16..64 */
	movq	(%rsi), %rcx
	movq	8(%rsi), %r8
	movq	-16(%rsi,%rdx), %r9
	movq	-8(%rsi,%rdx), %r10
	movq	%rcx, (%rdi)
	movq	%r8, 8(%rdi)
	movq	%r9, -16(%rdi,%rdx)
	movq	%r10, -8(%rdi,%rdx)
	cmpq	$32, %rdx
	jbe	.Lmc_ret
	/* 33..64 */
	movq	16(%rsi), %rcx
	movq	24(%rsi), %r8
	movq	-32(%rsi,%rdx), %r9
	movq	-24(%rsi,%rdx), %r10
	movq	%rcx, 16(%rdi)
	movq	%r8, 24(%rdi)
	movq	%r9, -32(%rdi,%rdx)
	movq	%r10, -24(%rdi,%rdx)
.Lmc_ret:
	ret

.Lmc_lt16:
	cmpq	$8, %rdx
	jb	.Lmc_lt8
	/* 8..15 */
	movq	(%rsi), %rcx
	movq	-8(%rsi,%rdx), %r8
	movq	%rcx, (%rdi)
	movq	%r8, -8(%rdi,%rdx)
	ret
.Lmc_lt8:
	cmpq	$4, %rdx
	jb	.Lmc_lt4
	/* 4..7 */
	movl	(%rsi), %ecx
	movl	-4(%rsi,%rdx), %r8d
	movl	%ecx, (%rdi)
	movl	%r8d, -4(%rdi,%rdx)
	ret
.Lmc_lt4:
	testq	%rdx, %rdx
	jz	.Lmc_ret
	/* 1..3 */
	movzbl	(%rsi), %ecx
	movb	%cl, (%rdi)
	cmpq	$2, %rdx
	jb	.Lmc_ret
	/* 2..3 */
	movzwl	-2(%rsi,%rdx), %ecx
	movw	%cx, -2(%rdi,%rdx)
	ret

.Lmc_large:
	movq	(%rsi), %rcx			/* unaligned head */
	movq	%rcx, (%rdi)
	movq	%rdi, %rcx
	addq	$8, %rdi
	andq	$-8, %rdi			/* rdi = aligned, <= dst + 8 */
	subq	%rdi, %rcx			/* rcx = -(bytes skipped) */
	subq	%rcx, %rsi
	addq	%rcx, %rdx			/* rdx = bytes left, > 56 */
	cmpq	$64, %rdx
	jbe	.Lmc_tail
	.p2align 4
.Lmc_loop:
	movq	 0(%rsi), %rcx
	movq	 8(%rsi), %r8
	movq	16(%rsi), %r9
	movq	24(%rsi), %r10
	movq	%rcx,  0(%rdi)
	movq	%r8,   8(%rdi)
	movq	%r9,  16(%rdi)
	movq	%r10, 24(%rdi)
	movq	32(%rsi), %rcx
	movq	40(%rsi), %r8
	movq	48(%rsi), %r9
	movq	56(%rsi), %r10
	movq	%rcx, 32(%rdi)
	movq	%r8,  40(%rdi)
	movq	%r9,  48(%rdi)
	movq	%r10, 56(%rdi)
	addq	$64, %rsi
	addq	$64, %rdi
	subq	$64, %rdx
	cmpq	$64, %rdx
	ja	.Lmc_loop
.Lmc_tail:					/* 1..64 bytes left */
	leaq	(%rsi,%rdx), %rsi		/* rsi = src end */
	leaq	(%rdi,%rdx), %rdi		/* rdi = dst end */
	movq	-64(%rsi), %rcx
	movq	-56(%rsi), %r8
	movq	-48(%rsi), %r9
	movq	-40(%rsi), %r10
	movq	%rcx, -64(%rdi)
	movq	%r8,  -56(%rdi)
	movq	%r9,  -48(%rdi)
	movq	%r10, -40(%rdi)
	movq	-32(%rsi), %rcx
	movq	-24(%rsi), %r8
	movq	-16(%rsi), %r9
	movq	-8(%rsi), %r10
	movq	%rcx, -32(%rdi)
	movq	%r8,  -24(%rdi)
	movq	%r9,  -16(%rdi)
	movq	%r10, -8(%rdi)
	ret
SYM_FUNC_END(__pi_memcpy_unrolled)
