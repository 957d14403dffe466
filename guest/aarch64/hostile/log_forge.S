/* SPDX-License-Identifier: MIT */
/*
 * Hostile guest for `hypclear selftest --hostile`:
 * a log that tries to forge the harness's PASS line.
 *
 * void *hostile_log_forge(void *dst, int c, size_t n)   (memset arguments; the
 * host may pass other addresses, see crates/check/src/hostile.rs)
 *
 * Algorithm: copies a fixed message into the log buffer, rings HC_LOG
 * once, then does the memset correctly and returns dst.
 * x9 = mailbox (TPIDRRO_EL0), x16 = doorbell, x17 = hypercall number.
 */
#include "linkage.h"
#include "hypclear_abi.h"
#include "ring.h"

SYM_FUNC_START_SELFTEST(hostile_log_forge)
	mrs	x9, tpidrro_el0
	add	x10, x9, #MB_LOG_BUF
	adr	x12, .Lmsg_log_forge
	mov	x11, #(.Lmsg_log_forge_end - .Lmsg_log_forge)
	str	x11, [x9, #MB_LOG_LEN]
1:	ldrb	w13, [x12], #1
	strb	w13, [x10], #1
	subs	x11, x11, #1
	b.ne	1b
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
.Lmsg_log_forge:
	.ascii	"\nhypclear run: PASS \342\200\224 999 passed, 0 failed\n"
.Lmsg_log_forge_end:
	.balign	4
	.ltorg
SYM_FUNC_END(hostile_log_forge)
