/* SPDX-License-Identifier: MIT */
/*
 * aarch64 guest: arm64 Image header, hyp_entry (the command dispatcher),
 * hyp_vectors (VBAR_EL1), and for a guest at EL2 hyp_el2_entry (the nVHE
 * hyp's init of its own translation regime) and hyp_el2_vectors (VBAR_EL2).
 *
 * Entry (from crates/arch/src/aarch64/host.rs): MMU and caches on, EL1h or EL0t,
 * DAIF masked; SP = this vCPU's stack (at EL0, SP_EL1 is the exception
 * stack), TPIDRRO_EL0 = its mailbox, VBAR_EL1 = hyp_vectors. At EL2 the
 * vCPU starts in hyp_el2_entry instead, which turns the MMU on and goes on
 * into hyp_entry.
 * Loop: ring HC_READY; per command call the table row a0/a1-stepped
 * MB_CMD_COUNT times between two CNTVCT_EL0 reads, ring HC_RESULT
 * (CMD_SEALED: report over the doorbell's value word and power off).
 * Registers: x19 routine, x20/x21 a0/a1, x22 calls left, x23/x24 steps,
 * x25 a2, x26 return value, x27 t0, x28 mailbox (callee-saved, so the
 * routines keep them).
 * Why: position independent (PC-relative only, 4 KiB aligned load) like hyp
 * code; the table rows are the only absolute words (.hyp.reloc).
 */
#include "hypclear_abi.h"

/* PSCI 0.2 SYSTEM_OFF (SMC32 function ID, Arm DEN 0022). */
#define PSCI_0_2_FN_SYSTEM_OFF	0x84000008

/* Load a 64-bit constant with movz + movk, skipping zero halfwords. */
.macro mov_imm reg, val
	.if ((\val) & 0xffffffffffff0000) == 0
	movz	\reg, #((\val) & 0xffff)
	.else
	.set	.Lmov_imm_first, 1
	.irp	sh, 0, 16, 32, 48
	.if (((\val) >> \sh) & 0xffff) != 0
	.if .Lmov_imm_first
	movz	\reg, #(((\val) >> \sh) & 0xffff), lsl #\sh
	.set	.Lmov_imm_first, 0
	.else
	movk	\reg, #(((\val) >> \sh) & 0xffff), lsl #\sh
	.endif
	.endif
	.endr
	.endif
.endm

/*
 * Ring the doorbell with hypercall number \nr: a plain 64-bit STR (no
 * writeback, so the data abort has a valid syndrome, ESR_EL2.ISV = 1) to
 * a Device page no memslot covers, which KVM turns into KVM_EXIT_MMIO.
 * The DSB makes the mailbox stores complete first. Clobbers x16, x17.
 */
.macro HYPERCALL nr
	dsb	ish
	mov_imm	x16, DOORBELL_GPA
	mov_imm	x17, \nr
	str	x17, [x16]
.endm

/*
 * x0 = MB_BATCH_CUR (past BATCH_SLOTS: bad command), \reg = the address of
 * that batch slot in the mailbox (x28).
 */
.macro CUR_SLOT reg
	ldr	x0, [x28, #MB_BATCH_CUR]
	cmp	x0, #BATCH_SLOTS
	b.hs	.Lbad_command
	mov	\reg, #SLOT_SIZE
	mul	\reg, x0, \reg
	add	\reg, \reg, #MB_SLOTS
	add	\reg, x28, \reg
.endm

/* Read the virtual counter into \reg, ordered by ISBs on both sides. */
.macro READ_CNTVCT reg
	isb
	mrs	\reg, cntvct_el0
	isb
.endm

/*
 * The arm64 Image header (Documentation/arch/arm64/booting.rst layout),
 * so that linux-loader's PE loader accepts the flat binary: branch to the
 * entry, text_offset 0, image_size (with .bss), flags = little endian,
 * 4 KiB pages, placement anywhere, magic "ARM\x64" at offset 0x38.
 */
	.section .text.head, "ax"
	.globl	hyp_image_header
	.type	hyp_image_header, %function
hyp_image_header:
	b	hyp_entry			/* code0 */
	.long	0				/* code1 */
	.quad	0				/* text_offset */
	.quad	hyp_end - hyp_image_header	/* image_size (PC-relative reloc) */
	.quad	0xa				/* flags: LE, 4K, anywhere */
	.quad	0				/* res2 */
	.quad	0				/* res3 */
	.quad	0				/* res4 */
	.ascii	"ARM\x64"			/* magic */
	.long	0				/* res5: no PE header */
	.size	hyp_image_header, . - hyp_image_header

	.section .text.entry, "ax"
	.globl	hyp_entry
	.type	hyp_entry, %function
hyp_entry:
	mrs	x28, tpidrro_el0		/* x28 = mailbox */
	ldr	x0, [x28, #MB_MAGIC]
	mov_imm	x1, MAILBOX_MAGIC
	cmp	x0, x1
	b.ne	.Lbad_command
	HYPERCALL HC_READY

.Lnext:
	ldr	x0, [x28, #MB_CMD_OP]
	cmp	x0, #CMD_EXIT
	b.eq	.Lexit
	cmp	x0, #CMD_BATCH
	b.eq	.Lbatch
	cmp	x0, #CMD_SEALED
	b.eq	.Lsealed
	cmp	x0, #CMD_CALL
	b.ne	.Lbad_command
	bl	.Lrun_call
.Lresult:
	ldr	x0, [x28, #MB_CMD_ID]
	str	x0, [x28, #MB_RES_ID]
	HYPERCALL HC_RESULT
	b	.Lnext

	/* CMD_BATCH: slots 0 .. MB_BATCH_N - 1, then one HC_RESULT. */
.Lbatch:
	ldr	x0, [x28, #MB_BATCH_N]
	cbz	x0, .Lbad_command
	cmp	x0, #BATCH_SLOTS
	b.hi	.Lbad_command
	str	xzr, [x28, #MB_BATCH_CUR]
5:	ldr	x0, [x28, #MB_BATCH_CUR]
	ldr	x1, [x28, #MB_BATCH_N]
	cmp	x0, x1
	b.hs	.Lresult
	CUR_SLOT x2
	add	x1, x28, #MB_CMD_TABLE
	.irp	k, 0, 16, 32, 48
	ldp	x3, x4, [x2, #\k]
	stp	x3, x4, [x1, #\k]
	.endr
	bl	.Lrun_call
	CUR_SLOT x1
	ldr	x2, [x28, #MB_RES_T0]
	str	x2, [x1, #SLOT_T0]
	ldr	x2, [x28, #MB_RES_T1]
	str	x2, [x1, #SLOT_T1]
	ldr	x2, [x28, #MB_RES_RET]
	str	x2, [x1, #SLOT_RET]
	add	x0, x0, #1
	str	x0, [x28, #MB_BATCH_CUR]
	b	5b

	/* Run the command in the MB_CMD_* fields; results in MB_RES_T0/T1/RET. */
.Lrun_call:
	stp	x29, x30, [sp, #-16]!
	/* Pick the table: x19 = first row, x1 = end. */
	ldr	x0, [x28, #MB_CMD_TABLE]
	cmp	x0, #TABLE_ALIAS
	b.ne	1f
	adrp	x19, alias_table_start
	add	x19, x19, :lo12:alias_table_start
	adrp	x1, alias_table_end
	add	x1, x1, :lo12:alias_table_end
	b	2f
1:	cmp	x0, #TABLE_SELFTEST
	b.ne	.Lbad_command
	adrp	x19, selftest_table_start
	add	x19, x19, :lo12:selftest_table_start
	adrp	x1, selftest_table_end
	add	x1, x1, :lo12:selftest_table_end
2:	sub	x1, x1, x19
	lsr	x1, x1, #4			/* rows in the table */
	ldr	x0, [x28, #MB_CMD_INDEX]
	cmp	x0, x1
	b.hs	.Lbad_command
	add	x19, x19, x0, lsl #4
	ldr	x19, [x19]			/* routine (relocated absolute address) */

	ldr	x20, [x28, #MB_CMD_A0]
	ldr	x21, [x28, #MB_CMD_A1]
	ldr	x22, [x28, #MB_CMD_COUNT]
	ldr	x23, [x28, #MB_CMD_A0_STEP]
	ldr	x24, [x28, #MB_CMD_A1_STEP]
	ldr	x25, [x28, #MB_CMD_A2]
	mov	x26, #0

	dsb	sy
	READ_CNTVCT x27
	cbz	x22, 4f
3:	mov	x0, x20
	mov	x1, x21
	mov	x2, x25
	blr	x19
	mov	x26, x0
	add	x20, x20, x23
	add	x21, x21, x24
	subs	x22, x22, #1
	b.ne	3b
	/* Wait for the stores (incl. non-temporal ones) before the 2nd read. */
4:	dsb	sy
	READ_CNTVCT x0

	str	x27, [x28, #MB_RES_T0]
	str	x0, [x28, #MB_RES_T1]
	str	x26, [x28, #MB_RES_RET]
	ldp	x29, x30, [sp], #16
	ret

	/*
	 * CMD_SEALED (a protected VM: the host may not read this RAM): the
	 * call, its timestamps through the doorbell's value word, HC_RESULT,
	 * then PSCI SYSTEM_OFF by HVC (the conduit KVM gives an EL1 guest with
	 * PSCI 0.2). Should SYSTEM_OFF return, HC_DONE says so.
	 */
.Lsealed:
	bl	.Lrun_call
	ldr	x0, [x28, #MB_RES_T0]
	ldr	x1, [x28, #MB_RES_T1]
	mov_imm	x16, DOORBELL_VALUE
	str	x0, [x16]
	str	x1, [x16]
	HYPERCALL HC_RESULT
	mov_imm	x0, PSCI_0_2_FN_SYSTEM_OFF
	hvc	#0

.Lexit:
	HYPERCALL HC_DONE
	b	.Lexit

.Lbad_command:
	mov	x0, #FAIL_BAD_COMMAND
	str	x0, [x28, #MB_FAIL_CODE]
	ldr	x0, [x28, #MB_CMD_TABLE]
	str	x0, [x28, #MB_FAIL_D0]
	ldr	x0, [x28, #MB_CMD_INDEX]
	str	x0, [x28, #MB_FAIL_D1]
	HYPERCALL HC_FAIL
	b	.Lbad_command
	.size	hyp_entry, . - hyp_entry

/*
 * hyp_el2_entry: the start at EL2 (HCR_EL2.E2H = 0, a vCPU made with
 * KVM_ARM_VCPU_HAS_EL2 | HAS_EL2_E2H0), EL2h, DAIF masked, MMU off. Does
 * what the nVHE hyp's ___kvm_hyp_init (arch/arm64/kvm/hyp/nvhe/hyp-init.S)
 * does before its library code runs, with the values the host computed
 * (crates/arch/src/aarch64/sysregs.rs) in registers instead of a
 * struct kvm_nvhe_init_params:
 *   x0 MAIR_EL2, x1 TCR_EL2, x2 TTBR0_EL2 (the EL2-format identity map),
 *   x3 SCTLR_EL2 (M, C, I, SA, WXN, RES1), x4 HCR_EL2 (RW only: no guest of
 *   its own, no traps), x5 SP_EL2.
 * TPIDRRO_EL0 (the mailbox) is set by the host as at EL1. Then hyp_entry,
 * whose doorbell is MMIO and so works from EL2 as from EL1; nothing here
 * uses HVC (from EL2 it would go to this guest's own vectors).
 */
	.section .text.entry, "ax"
	.globl	hyp_el2_entry
	.type	hyp_el2_entry, %function
hyp_el2_entry:
	msr	hcr_el2, x4
	msr	mair_el2, x0
	msr	tcr_el2, x1
	msr	ttbr0_el2, x2
	isb
	/* Stale TLB entries from before (hyp-init: the bootloader's). */
	tlbi	alle2
	dsb	sy
	adrp	x6, hyp_el2_vectors
	add	x6, x6, :lo12:hyp_el2_vectors
	msr	vbar_el2, x6
	mov	sp, x5
	/* set_sctlr_el2 (arch/arm64/include/asm/assembler.h). */
	msr	sctlr_el2, x3
	isb
	ic	iallu
	dsb	nsh
	isb
	b	hyp_entry
	.size	hyp_el2_entry, . - hyp_el2_entry

/*
 * Exception vectors (VBAR_EL1, 2 KiB aligned): 16 entries of 0x80 bytes,
 * {current EL with SP_EL0, current EL with SP_ELx, lower EL AArch64,
 * lower EL AArch32} x {synchronous, IRQ, FIQ, SError}. Every entry puts
 * its offset in x17 and branches to the common reporter, which runs at
 * EL1 on no stack at all and reports through the mailbox with HC_FAIL /
 * FAIL_EXCEPTION:
 *   D0 ESR_EL1, D1 ELR_EL1, D2 FAR_EL1, D3 SPSR_EL1, D4 vector offset,
 *   D5 the interrupted SP (SP_EL1 for "current EL with SP_ELx", SP_EL0
 *      otherwise).
 * Only x15-x17 are clobbered, so the host's register dump still shows the
 * routine's arguments and working registers.
 */
	.section .text.entry, "ax"
	.balign	2048
	.globl	hyp_vectors
	.type	hyp_vectors, %function
hyp_vectors:
	vector = 0
	.rept	16
	.balign	0x80
	mov	x17, #vector
	b	.Lexception
	vector = vector + 0x80
	.endr
	.size	hyp_vectors, . - hyp_vectors

.Lexception:
	mrs	x16, tpidrro_el0		/* mailbox */
	mov	x15, #FAIL_EXCEPTION
	str	x15, [x16, #MB_FAIL_CODE]
	mrs	x15, esr_el1
	str	x15, [x16, #MB_FAIL_D0]
	mrs	x15, elr_el1
	str	x15, [x16, #MB_FAIL_D1]
	mrs	x15, far_el1
	str	x15, [x16, #MB_FAIL_D2]
	mrs	x15, spsr_el1
	str	x15, [x16, #MB_FAIL_D3]
	str	x17, [x16, #MB_FAIL_D4]
	mrs	x15, sp_el0
	cmp	x17, #0x200
	b.lo	1f
	cmp	x17, #0x400
	b.hs	1f
	mov	x15, sp				/* current EL with SP_EL1 */
1:	str	x15, [x16, #MB_FAIL_D5]
2:	HYPERCALL HC_FAIL
	b	2b

/*
 * The EL2 vectors (VBAR_EL2, 2 KiB aligned): as hyp_vectors, but the
 * reporter reads ESR_EL2, ELR_EL2, FAR_EL2 and SPSR_EL2, and ORs
 * FAIL_EXC_EL2 into D4 so the host names the EL2 registers.
 */
	.section .text.entry, "ax"
	.balign	2048
	.globl	hyp_el2_vectors
	.type	hyp_el2_vectors, %function
hyp_el2_vectors:
	vector = 0
	.rept	16
	.balign	0x80
	mov	x17, #vector
	b	.Lexception_el2
	vector = vector + 0x80
	.endr
	.size	hyp_el2_vectors, . - hyp_el2_vectors

.Lexception_el2:
	mrs	x16, tpidrro_el0		/* mailbox */
	mov	x15, #FAIL_EXCEPTION
	str	x15, [x16, #MB_FAIL_CODE]
	mrs	x15, esr_el2
	str	x15, [x16, #MB_FAIL_D0]
	mrs	x15, elr_el2
	str	x15, [x16, #MB_FAIL_D1]
	mrs	x15, far_el2
	str	x15, [x16, #MB_FAIL_D2]
	mrs	x15, spsr_el2
	str	x15, [x16, #MB_FAIL_D3]
	mov_imm	x15, FAIL_EXC_EL2
	orr	x15, x15, x17
	str	x15, [x16, #MB_FAIL_D4]
	mrs	x15, sp_el0
	cmp	x17, #0x200
	b.lo	1f
	cmp	x17, #0x400
	b.hs	1f
	mov	x15, sp				/* current EL with SP_EL2 */
1:	str	x15, [x16, #MB_FAIL_D5]
2:	HYPERCALL HC_FAIL
	b	2b
