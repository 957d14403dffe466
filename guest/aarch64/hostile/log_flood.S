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
 * x9 = mailbox (TPIDRRO_EL0), x16 = doorbell, x17 = hypercall number.
 */
#include "linkage.h"
#include "hypclear_abi.h"
#include "ring.h"

SYM_FUNC_START_SELFTEST(hostile_log_flood)
	mrs	x9, tpidrro_el0
	add	x10, x9, #MB_LOG_BUF
	mov	x11, #LOG_BUF_SIZE
	mov	w12, #65
1:	strb	w12, [x10], #1
	subs	x11, x11, #1
	b.ne	1b
	mov	x11, #LOG_BUF_SIZE
	str	x11, [x9, #MB_LOG_LEN]
2:
	dsb	ish
	ldr	x16, =DOORBELL_GPA
	ldr	x17, =HC_LOG
	RING	x17
	b	2b
	.ltorg
SYM_FUNC_END(hostile_log_flood)
