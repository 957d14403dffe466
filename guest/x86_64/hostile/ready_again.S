/* SPDX-License-Identifier: MIT */
/*
 * Hostile guest for `hypclear selftest --hostile`:
 * rings HC_READY while a command is running (out of protocol).
 *
 * void *hostile_ready_again(void *dst, int c, size_t n)   (memset arguments; the
 * host may pass other addresses, see crates/check/src/hostile.rs)
 *
 * Algorithm: stores HC_READY to the doorbell; never returns normally.
 */
#include "linkage.h"
#include "hypclear_abi.h"
#include "ring.h"

SYM_FUNC_START_SELFTEST(hostile_ready_again)
	movabs	$DOORBELL_GPA, %rax
	RING	$HC_READY
	ud2
SYM_FUNC_END(hostile_ready_again)
