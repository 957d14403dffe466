/* SPDX-License-Identifier: MIT */
/*
 * Hostile guest for `hypclear selftest --hostile`:
 * publishes a result whose T0 is after its T1.
 *
 * void *hostile_forged_timestamps(void *dst, int c, size_t n)   (memset arguments; the
 * host may pass other addresses, see crates/check/src/hostile.rs)
 *
 * Algorithm: echoes MB_CMD_ID as MB_RES_ID, writes T0 = 1000, T1 = 1 and
 * rings HC_RESULT itself; never returns normally.
 * x9 = mailbox (TPIDRRO_EL0), x16 = doorbell, x17 = hypercall number.
 */
#include "linkage.h"
#include "hypclear_abi.h"
#include "ring.h"

SYM_FUNC_START_SELFTEST(hostile_forged_timestamps)
	mrs	x9, tpidrro_el0
	mov	x10, #1000
	str	x10, [x9, #MB_RES_T0]
	mov	x10, #1
	str	x10, [x9, #MB_RES_T1]
	ldr	x10, [x9, #MB_CMD_ID]
	str	x10, [x9, #MB_RES_ID]
	dsb	ish
	ldr	x16, =DOORBELL_GPA
	ldr	x17, =HC_RESULT
	RING	x17
	udf	#0
	.ltorg
SYM_FUNC_END(hostile_forged_timestamps)
