/* SPDX-License-Identifier: MIT */
/*
 * Hostile guest for `hypclear selftest --hostile`:
 * rings HC_LOG forever with full 2 KiB messages.
 *
 * void *hostile_log_flood(void *dst, int c, size_t n)   (memset arguments; the
 * host may pass other addresses, see crates/check/src/hostile.rs)
 *
 * Algorithm: fills the log buffer with 'A', sets MB_LOG_LEN to
 * LOG_BUF_SIZE and rings HC_LOG in an endless loop; never returns.
 */
#include "linkage.h"
#include "hypclear_abi.h"
#include "ring.h"

SYM_FUNC_START_SELFTEST(hostile_log_flood)
	mov	$LOG_BUF_SIZE, %rcx
	xor	%edx, %edx
1:	movb	$'A', %gs:MB_LOG_BUF(%rdx)
	inc	%rdx
	cmp	%rcx, %rdx
	jb	1b
	movq	$LOG_BUF_SIZE, %gs:MB_LOG_LEN
	movabs	$DOORBELL_GPA, %rax
2:	RING	$HC_LOG
	jmp	2b
SYM_FUNC_END(hostile_log_flood)
