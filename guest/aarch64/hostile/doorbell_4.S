/* SPDX-License-Identifier: MIT */
/*
 * Hostile guest for `hypclear selftest --hostile`:
 * rings HC_RESULT with a 4-byte store.
 *
 * void *hostile_doorbell_4(void *dst, int c, size_t n)   (memset arguments; the
 * host may pass other addresses, see crates/check/src/hostile.rs)
 *
 * Algorithm: a 4-byte store to the doorbell; never returns normally.
 * x9 = mailbox (TPIDRRO_EL0), x16 = doorbell, x17 = hypercall number.
 */
#include "linkage.h"
#include "hypclear_abi.h"

SYM_FUNC_START_SELFTEST(hostile_doorbell_4)
	dsb	ish
	ldr	x16, =DOORBELL_GPA
	ldr	x17, =HC_RESULT
	str	w17, [x16]
	udf	#0
	.ltorg
SYM_FUNC_END(hostile_doorbell_4)
