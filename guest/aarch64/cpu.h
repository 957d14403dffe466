/* SPDX-License-Identifier: MIT */
/*
 * Small aarch64 helpers shared by the routines.
 *
 * READ_DCZID(reg): read DCZID_EL0 (DC ZVA block size in BS[3:0] as log2 of
 * words, DC ZVA prohibited if DZP, bit 4, is set). The unit-test harness
 * (guest/aarch64/test/) builds the routines once more with
 * -DHYPCLEAR_TEST_DCZID=<value> to exercise the DZP = 1 fallbacks, which
 * user space cannot otherwise see on Linux (it sets SCTLR_EL1.DZE).
 */
#ifndef HYPCLEAR_AARCH64_CPU_H
#define HYPCLEAR_AARCH64_CPU_H

#ifdef __ASSEMBLER__
#ifdef HYPCLEAR_TEST_DCZID
#define READ_DCZID(reg)	mov reg, #(HYPCLEAR_TEST_DCZID)
#else
#define READ_DCZID(reg)	mrs reg, dczid_el0
#endif
#endif /* __ASSEMBLER__ */

#endif /* HYPCLEAR_AARCH64_CPU_H */
