/* SPDX-License-Identifier: MIT */
/*
 * Deliberately broken routine for the checker's selftest: never returns.
 *
 * void *selftest_hang(void *dst, int c, size_t n)
 *
 * Input:  memset arguments, ignored
 * Output: never returns
 * Clobbers: nothing
 *
 * Algorithm: spins forever on "yield" with a PC-relative backward branch
 * (no WFI/WFE, so nothing traps to the hypervisor); only the host's
 * watchdog kick gets out of it.
 */
#include "linkage.h"

SYM_FUNC_START_SELFTEST(selftest_hang)
1:	yield
	b	1b
SYM_FUNC_END(selftest_hang)
