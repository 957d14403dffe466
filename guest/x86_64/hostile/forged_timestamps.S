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
 */
#include "linkage.h"
#include "hypclear_abi.h"
#include "ring.h"

SYM_FUNC_START_SELFTEST(hostile_forged_timestamps)
	movq	$1000, %gs:MB_RES_T0
	movq	$1, %gs:MB_RES_T1
	mov	%gs:MB_CMD_ID, %rax
	mov	%rax, %gs:MB_RES_ID
	movabs	$DOORBELL_GPA, %rax
	RING	$HC_RESULT
	ud2
SYM_FUNC_END(hostile_forged_timestamps)
