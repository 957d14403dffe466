/* SPDX-License-Identifier: MIT */
/*
 * Variant:  memset orig
 * Requires: -
 * Follows:  arch/x86/lib/memset_64.S memset_orig, 6.1 and 6.12 (6.12 no FSRS; 6.1 no ERMS/REP_GOOD)
 * Paths:    memset_orig
 *
 * memset with plain 64-bit stores: one unaligned quadword to align dst,
 * a 64-byte loop, then quadwords and bytes for the rest.
 *
 * void *__pi_memset_orig(void *dst, int c, size_t n)
 *
 * Input:    rdi dst (any alignment), esi fill (low byte), rdx count
 * Output:   rax dst
 * Clobbers: rax, rcx, rdx, rdi, r8, r9, r10, flags
 * Why:      the fallback memset: 6.12 without FSRS (most CPUs today),
 *           6.1 without ERMS and REP_GOOD.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_memset_orig)
	movq	%rdi, %r10		/* return value */
	movzbl	%sil, %ecx
	movabsq	$0x0101010101010101, %rax
	imulq	%rcx, %rax		/* byte in every lane */

	movl	%edi, %r9d
	andl	$7, %r9d		/* misalignment of dst */
	jnz	.Lmso_unaligned
.Lmso_aligned:
	movq	%rdx, %rcx
	shrq	$6, %rcx		/* 64-byte blocks */
	jz	.Lmso_quads

	.p2align 4
.Lmso_block:
	decq	%rcx
	movq	%rax, (%rdi)
	movq	%rax, 8(%rdi)
	movq	%rax, 16(%rdi)
	movq	%rax, 24(%rdi)
	movq	%rax, 32(%rdi)
	movq	%rax, 40(%rdi)
	movq	%rax, 48(%rdi)
	movq	%rax, 56(%rdi)
	leaq	64(%rdi), %rdi
	jnz	.Lmso_block

	.p2align 4
.Lmso_quads:
	movl	%edx, %ecx
	andl	$56, %ecx		/* bytes in whole quadwords below 64 */
	jz	.Lmso_bytes
	shrl	$3, %ecx
	.p2align 4
.Lmso_quad:
	decl	%ecx
	movq	%rax, (%rdi)
	leaq	8(%rdi), %rdi
	jnz	.Lmso_quad

.Lmso_bytes:
	andl	$7, %edx
	jz	.Lmso_done
	.p2align 4
.Lmso_byte:
	decl	%edx
	movb	%al, (%rdi)
	leaq	1(%rdi), %rdi
	jnz	.Lmso_byte

.Lmso_done:
	movq	%r10, %rax
	ret

.Lmso_unaligned:
	cmpq	$7, %rdx
	jbe	.Lmso_bytes		/* too short to align: bytes only */
	movq	%rax, (%rdi)		/* covers up to the boundary */
	movq	$8, %r8
	subq	%r9, %r8		/* bytes to the boundary */
	addq	%r8, %rdi
	subq	%r8, %rdx
	jmp	.Lmso_aligned
SYM_FUNC_END(__pi_memset_orig)
