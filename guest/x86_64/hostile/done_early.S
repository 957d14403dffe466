/* SPDX-License-Identifier: MIT */
/*
 * Hostile guest for `hypclear selftest --hostile`:
 * rings HC_DONE while a command is running (out of protocol).
 *
 * void *hostile_done_early(void *dst, int c, size_t n)   (memset arguments; the
 * host may pass other addresses, see crates/check/src/hostile.rs)
 *
 * Algorithm: stores HC_DONE to the doorbell; never returns normally.
 */
#include "linkage.h"
#include "hypclear_abi.h"
#include "ring.h"

SYM_FUNC_START_SELFTEST(hostile_done_early)
	movabs	$DOORBELL_GPA, %rax
	RING	$HC_DONE
	ud2
SYM_FUNC_END(hostile_done_early)
