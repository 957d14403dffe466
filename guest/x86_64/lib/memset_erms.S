/* SPDX-License-Identifier: MIT */
/*
 * Variant:  memset erms
 * Requires: -
 * Follows:  arch/x86/lib/memset_64.S: 6.12 __memset (FSRS), 6.1 memset_erms (ERMS)
 *
 * memset as one "rep stosb".
 *
 * void *__pi_memset_erms(void *dst, int c, size_t n)
 *
 * Kernel: arch/x86/lib/memset_64.S.
 *   6.1:  memset_erms, the ALTERNATIVE_2 target taken with X86_FEATURE_ERMS
 *         (ERMS wins over REP_GOOD when a CPU has both).
 *   6.12: the body of __memset itself, used when X86_FEATURE_FSRS is set
 *         (otherwise 6.12 jumps to memset_orig, see memset_orig.S).
 * Differs: returns with a plain "ret" (the kernel's RET may be a return
 * thunk plus int3), and there is no patched-out alternative site at the
 * entry (6.12 leaves NOP padding there when FSRS is set). Same
 * instructions otherwise.
 *
 * Input:
 *	rdi	destination, any alignment
 *	esi	fill value; only the low byte is used
 *	rdx	byte count, may be 0
 * Output:
 *	rax	dst
 * Clobbers:
 *	rax, rcx, rdi, r9, flags (DF is assumed clear and left clear)
 *
 * Algorithm: remember dst in r9, put the fill byte in al and the count in
 * rcx, let "rep stosb" store all n bytes, return the remembered dst. No
 * branches, no stack, no data.
 */
#include "linkage.h"

SYM_FUNC_START(__pi_memset_erms)
	movq	%rdi, %r9		/* return value */
	movb	%sil, %al		/* byte to store */
	movq	%rdx, %rcx		/* byte count */
	rep stosb
	movq	%r9, %rax
	ret
SYM_FUNC_END(__pi_memset_erms)
