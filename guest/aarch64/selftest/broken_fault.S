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
 * Algorithm: executes "udf #0" (a permanently undefined encoding), raising
 * an Unknown-reason / undefined-instruction exception (ESR_EL1.EC 0x00)
 * with ELR_EL1 at the udf itself.
 */
#include "linkage.h"

SYM_FUNC_START_SELFTEST(selftest_fault)
	udf	#0
SYM_FUNC_END(selftest_fault)
