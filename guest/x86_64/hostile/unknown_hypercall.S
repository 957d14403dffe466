/* SPDX-License-Identifier: MIT */
/*
 * Hostile guest for `hypclear selftest --hostile`:
 * rings a hypercall number the ABI does not define.
 *
 * void *hostile_unknown_hypercall(void *dst, int c, size_t n)   (memset arguments; the
 * host may pass other addresses, see crates/check/src/hostile.rs)
 *
 * Algorithm: stores 0x484300ff to the doorbell; never returns normally.
 */
#include "linkage.h"
#include "hypclear_abi.h"
#include "ring.h"

SYM_FUNC_START_SELFTEST(hostile_unknown_hypercall)
	movabs	$DOORBELL_GPA, %rax
	RING	$0x484300ff
	ud2
SYM_FUNC_END(hostile_unknown_hypercall)
