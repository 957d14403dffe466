/* SPDX-License-Identifier: MIT */
/*
 * Hostile guest for `hypclear selftest --hostile`:
 * rings HC_RESULT with a 2-byte store.
 *
 * void *hostile_doorbell_2(void *dst, int c, size_t n)   (memset arguments; the
 * host may pass other addresses, see crates/check/src/hostile.rs)
 *
 * Algorithm: a 2-byte store to the doorbell; never returns normally.
 */
#include "linkage.h"
#include "hypclear_abi.h"

SYM_FUNC_START_SELFTEST(hostile_doorbell_2)
	movabs	$DOORBELL_GPA, %rax
	movw	$(HC_RESULT & 0xffff), (%rax)
	ud2
SYM_FUNC_END(hostile_doorbell_2)
