/* SPDX-License-Identifier: MIT */
/*
 * Hostile guest for `hypclear selftest --hostile`:
 * rings HC_READY while a command is running (out of protocol).
 *
 * void *hostile_ready_again(void *dst, int c, size_t n)   (memset arguments; the
 * host may pass other addresses, see crates/check/src/hostile.rs)
 *
 * Algorithm: stores HC_READY to the doorbell; never returns normally.
 * x9 = mailbox (TPIDRRO_EL0), x16 = doorbell, x17 = hypercall number.
 */
#include "linkage.h"
#include "hypclear_abi.h"
#include "ring.h"

SYM_FUNC_START_SELFTEST(hostile_ready_again)
	dsb	ish
	ldr	x16, =DOORBELL_GPA
	ldr	x17, =HC_READY
	RING	x17
	udf	#0
	.ltorg
SYM_FUNC_END(hostile_ready_again)
