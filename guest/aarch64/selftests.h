/* SPDX-License-Identifier: MIT */
/* Deliberately broken routines for `hypclear selftest`; not in the alias table. */
HYP_SELFTEST(short, selftest_short)
HYP_SELFTEST(overrun, selftest_overrun)
HYP_SELFTEST(wrong_value, selftest_wrong_value)
HYP_SELFTEST(fault, selftest_fault)
HYP_SELFTEST(hang, selftest_hang)
HYP_SELFTEST(source, selftest_source)
HYP_SELFTEST(copy_short, selftest_copy_short)
HYP_SELFTEST(tail_37, selftest_tail_37)
HYP_SELFTEST(clobber, selftest_clobber)
HYP_SELFTEST(stack, selftest_stack)
HYP_SELFTEST(bad_return, selftest_bad_return)
