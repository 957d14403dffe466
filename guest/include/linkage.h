/* SPDX-License-Identifier: MIT */
/*
 * Symbol and section conventions of the hypclear guest blob.
 *
 * Mirrors the arm64 nVHE hyp linkage:
 *  - library routines are position independent and named __pi_<name>;
 *    they live in .text.__pi, where build.rs accepts only PC-relative
 *    relocations (the analogue of the hyp's gen-hyprel policy);
 *  - callers reach them only through the alias table (see alias.h);
 *  - after the partial link every symbol gets the blob's namespace
 *    prefix (objcopy --prefix-symbols, as the kernel does with __kvm_nvhe_).
 *
 * Deliberately broken routines used by `hypclear selftest` live in
 * .text.selftest and are reachable only through the selftest table.
 */
#ifndef HYPCLEAR_LINKAGE_H
#define HYPCLEAR_LINKAGE_H

#ifdef __ASSEMBLER__

/* The routines are also linked into the host binary: no executable stack. */
	.pushsection .note.GNU-stack, "", %progbits
	.popsection

#define SYM_FUNC_START(name)			\
	.section .text.__pi, "ax";		\
	.globl name;				\
	.type name, %function;			\
	.balign 64;				\
name:

#define SYM_FUNC_START_SELFTEST(name)		\
	.section .text.selftest, "ax";		\
	.globl name;				\
	.type name, %function;			\
	.balign 64;				\
name:

/* A second entry point inside a routine (e.g. clear_page inside clear_pages). */
#define SYM_INNER_LABEL(name)			\
	.globl name;				\
	.type name, %function;			\
name:

#define SYM_FUNC_END(name)			\
	.size name, . - name

#endif /* __ASSEMBLER__ */
#endif /* HYPCLEAR_LINKAGE_H */
