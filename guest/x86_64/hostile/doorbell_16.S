/* SPDX-License-Identifier: MIT */
/*
 * Hostile guest for `hypclear selftest --hostile`:
 * rings HC_RESULT with one 16-byte store (movups), whose low half is the
 * number, after publishing a well-formed result.
 *
 * void *hostile_doorbell_16(void *dst, int c, size_t n)   (memset arguments;
 * the host may pass other addresses, see crates/check/src/hostile.rs)
 *
 * Algorithm: echoes MB_CMD_ID as MB_RES_ID with T0 = 1, T1 = 2, then stores
 * { HC_RESULT, HC_RESULT } to the doorbell. KVM splits the store into two
 * 8-byte exits, each a valid-looking hypercall; neither comes from a ring
 * site. Never returns normally.
 */
#include "linkage.h"
#include "hypclear_abi.h"

SYM_FUNC_START_SELFTEST(hostile_doorbell_16)
	movq	$1, %gs:MB_RES_T0
	movq	$2, %gs:MB_RES_T1
	mov	%gs:MB_CMD_ID, %rax
	mov	%rax, %gs:MB_RES_ID
	mov	$HC_RESULT, %ecx
	movq	%rcx, %xmm0
	punpcklqdq %xmm0, %xmm0
	movabs	$DOORBELL_GPA, %rax
	movups	%xmm0, (%rax)
	ud2
SYM_FUNC_END(hostile_doorbell_16)
