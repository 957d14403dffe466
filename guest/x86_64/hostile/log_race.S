/* SPDX-License-Identifier: MIT */
/*
 * Hostile guest for `hypclear selftest --hostile`:
 * two vCPUs log at once while each scribbles over the other's log buffer.
 *
 * void *hostile_log_race(void *peer_log_buf, unsigned long rounds, size_t)
 * (the host passes the other vCPU's MB_LOG_BUF address and the number of
 * logs, see crates/check/src/hostile.rs)
 *
 * Algorithm, `rounds` times: fill the own log buffer with 128 x U+00E9
 * (valid UTF-8, 0xc3 0xa9), then overwrite the peer's first 256 bytes
 * eight times with 0x80 0x1b (a lone continuation byte and ESC) while the
 * host may be copying the peer's log out, then ring HC_LOG with 256
 * bytes. What the host prints of either log may be torn: it must still be
 * valid, sanitized UTF-8 on one bounded line. Returns 0.
 */
#include "linkage.h"
#include "hypclear_abi.h"
#include "ring.h"

#define RACE_LEN 256

SYM_FUNC_START_SELFTEST(hostile_log_race)
	mov	%rsi, %r8
	test	%r8, %r8
	jz	9f
1:	xor	%edx, %edx
2:	movb	$0xc3, %gs:MB_LOG_BUF(%rdx)
	movb	$0xa9, %gs:MB_LOG_BUF+1(%rdx)
	add	$2, %rdx
	cmp	$RACE_LEN, %rdx
	jb	2b
	movq	$RACE_LEN, %gs:MB_LOG_LEN
	mov	$8, %r9d
3:	xor	%edx, %edx
4:	movb	$0x80, (%rdi,%rdx)
	movb	$0x1b, 1(%rdi,%rdx)
	add	$2, %rdx
	cmp	$RACE_LEN, %rdx
	jb	4b
	dec	%r9d
	jnz	3b
	movabs	$DOORBELL_GPA, %rax
	RING	$HC_LOG
	dec	%r8
	jnz	1b
9:	xor	%eax, %eax
	ret
SYM_FUNC_END(hostile_log_race)
