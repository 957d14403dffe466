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
 * `movq $HC_RESULT, (doorbell)` from its own text; never returns normally.
 */
#include "linkage.h"
#include "hypclear_abi.h"

SYM_FUNC_START_SELFTEST(hostile_doorbell_site)
	movq	$1, %gs:MB_RES_T0
	movq	$2, %gs:MB_RES_T1
	mov	%gs:MB_CMD_ID, %rax
	mov	%rax, %gs:MB_RES_ID
	movabs	$DOORBELL_GPA, %rax
	movq	$HC_RESULT, (%rax)
	ud2
SYM_FUNC_END(hostile_doorbell_site)
