/* SPDX-License-Identifier: MIT */
/*
 * Hostile guest for `hypclear selftest --hostile`:
 * one unterminated log with MB_LOG_LEN = ~0.
 *
 * void *hostile_log_huge(void *dst, int c, size_t n)   (memset arguments; the
 * host may pass other addresses, see crates/check/src/hostile.rs)
 *
 * Algorithm: fills the whole log buffer with 0xff (invalid UTF-8, no
 * NUL), sets MB_LOG_LEN to all ones, rings HC_LOG once, then does the
 * memset correctly (rep stosb) and returns dst.
 */
#include "linkage.h"
#include "hypclear_abi.h"
#include "ring.h"

SYM_FUNC_START_SELFTEST(hostile_log_huge)
	mov	%rdx, %r8
	mov	$LOG_BUF_SIZE, %rcx
	xor	%edx, %edx
1:	movb	$0xff, %gs:MB_LOG_BUF(%rdx)
	inc	%rdx
	cmp	%rcx, %rdx
	jb	1b
	movq	$-1, %gs:MB_LOG_LEN
	movabs	$DOORBELL_GPA, %rax
	RING	$HC_LOG
	mov	%rdi, %r9
	mov	%esi, %eax
	mov	%r8, %rcx
	rep stosb
	mov	%r9, %rax
	ret
SYM_FUNC_END(hostile_log_huge)
