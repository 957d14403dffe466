/* SPDX-License-Identifier: MIT */
/*
 * Deliberately broken routine for the checker's selftest: faults.
 *
 * void *selftest_fault(void *dst, int c, size_t n)
 *
 * Input:  memset arguments, ignored
 * Output: never returns
 * Clobbers: nothing before the fault
 *
 * Algorithm: executes "ud2", raising an invalid-opcode exception (#UD,
 * vector 6) with RIP at the ud2 itself.
 */
#include "linkage.h"

SYM_FUNC_START_SELFTEST(selftest_fault)
	ud2
SYM_FUNC_END(selftest_fault)
