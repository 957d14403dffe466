/* SPDX-License-Identifier: MIT */
/*
 * Hostile guest for `hypclear selftest --hostile`:
 * a routine that rings HC_RESULT itself, with the ABI's 8-byte store but
 * not through the harness's RING, after publishing a well-formed result.
 *
 * void *hostile_doorbell_site(void *dst, int c, size_t n)   (memset
 * arguments; the host may pass other addresses, see crates/check/src/hostile.rs)
 *
 * Algorithm: echoes MB_CMD_ID as MB_RES_ID with T0 = 1, T1 = 2, then
 * `str x17, [x16]` from its own text; never returns normally.
 * x9 = mailbox (TPIDRRO_EL0), x16 = doorbell, x17 = hypercall number.
 */
#include "linkage.h"
#include "hypclear_abi.h"

SYM_FUNC_START_SELFTEST(hostile_doorbell_site)
	mrs	x9, tpidrro_el0
	mov	x10, #1
	str	x10, [x9, #MB_RES_T0]
	mov	x10, #2
	str	x10, [x9, #MB_RES_T1]
	ldr	x10, [x9, #MB_CMD_ID]
	str	x10, [x9, #MB_RES_ID]
	dsb	ish
	ldr	x16, =DOORBELL_GPA
	ldr	x17, =HC_RESULT
	str	x17, [x16]
	udf	#0
	.ltorg
SYM_FUNC_END(hostile_doorbell_site)
