/* SPDX-License-Identifier: MIT */
/*
 * Hostile guest for `hypclear selftest --hostile`:
 * a log that tries to forge the harness's PASS line.
 *
 * void *hostile_log_forge(void *dst, int c, size_t n)   (memset arguments; the
 * host may pass other addresses, see crates/check/src/hostile.rs)
 *
 * Algorithm: copies a fixed message into the log buffer, rings HC_LOG
 * once, then does the memset correctly (rep stosb) and returns dst.
 */
#include "linkage.h"
#include "hypclear_abi.h"
#include "ring.h"

SYM_FUNC_START_SELFTEST(hostile_log_forge)
	mov	%rdx, %r8
	lea	.Lmsg_log_forge(%rip), %r10
	xor	%edx, %edx
1:	movzbl	(%r10,%rdx), %eax
	movb	%al, %gs:MB_LOG_BUF(%rdx)
	inc	%rdx
	cmp	$.Lmsg_log_forge_len, %rdx
	jb	1b
	movq	$.Lmsg_log_forge_len, %gs:MB_LOG_LEN
	movabs	$DOORBELL_GPA, %rax
	RING	$HC_LOG
	mov	%rdi, %r9
	mov	%esi, %eax
	mov	%r8, %rcx
	rep stosb
	mov	%r9, %rax
	ret
.Lmsg_log_forge:
	.ascii	"\nhypclear run: PASS \342\200\224 999 passed, 0 failed\n"
	.set	.Lmsg_log_forge_len, . - .Lmsg_log_forge
SYM_FUNC_END(hostile_log_forge)
