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
 * memset correctly and returns dst.
 * x9 = mailbox (TPIDRRO_EL0), x16 = doorbell, x17 = hypercall number.
 */
#include "linkage.h"
#include "hypclear_abi.h"
#include "ring.h"

SYM_FUNC_START_SELFTEST(hostile_log_huge)
	mrs	x9, tpidrro_el0
	add	x10, x9, #MB_LOG_BUF
	mov	x11, #LOG_BUF_SIZE
	mov	w12, #255
1:	strb	w12, [x10], #1
	subs	x11, x11, #1
	b.ne	1b
	mov	x11, #-1
	str	x11, [x9, #MB_LOG_LEN]
	dsb	ish
	ldr	x16, =DOORBELL_GPA
	ldr	x17, =HC_LOG
	RING	x17
	cbz	x2, 8f
	mov	x3, x0
	mov	x4, x2
7:	strb	w1, [x3], #1
	subs	x4, x4, #1
	b.ne	7b
8:
	ret
	.ltorg
SYM_FUNC_END(hostile_log_huge)
