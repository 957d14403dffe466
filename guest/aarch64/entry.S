/* SPDX-License-Identifier: MIT */
/*
 * aarch64 guest: arm64 Image header, hyp_entry (the command dispatcher),
 * hyp_vectors (VBAR_EL1), and for a guest at EL2 hyp_el2_init (the nVHE
 * hyp's init of its own translation regime) and hyp_el2_vectors (VBAR_EL2).
 *
 * Entry (from crates/arch/src/aarch64/host.rs): MMU and caches on, EL1h or EL0t,
 * DAIF masked; SP = this vCPU's stack (at EL0, SP_EL1 is the exception
 * stack), TPIDRRO_EL0 = its mailbox, VBAR_EL1 = hyp_vectors. At EL2 the
 * vCPU starts in hyp_el2_init instead, which turns the MMU on and goes on
 * into hyp_entry.
 * Loop: ring HC_READY; per command call the table row a0/a1-stepped
 * MB_CMD_COUNT times between two CNTVCT_EL0 reads, ring HC_RESULT
 * (CMD_BATCH: once for all its slots; CMD_SEALED: report over the
 * doorbell's value word and power off).
 * Contract, around every call: x0-x2 hold the arguments and x18-x29 the
 * MB_CANARIES (x18: the kernel's shadow call stack register); after it
 * sp (first), the canaries and (CMDF_RET_A0) x0 == a0 are compared, and
 * the first breach ends the command (MB_RES_BREACH*), as does a data
 * abort in MB_HOLE's page (an edge check's over-access). The loop's state,
 * its own LR included, lives in MB_RUN_*, and the mailbox comes back from
 * TPIDRRO_EL0 (readable at EL0, EL1 and EL2), so no register a routine
 * must keep holds anything the harness needs; x28 is the mailbox only
 * outside .Lrun_call's calls.
 * Why: position independent (PC-relative only, 4 KiB aligned load) like hyp
 * code; the table rows are the only absolute words (.hyp.reloc).
 */
#include "hypclear_abi.h"
#include "ring.h"

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
	RING	x17
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
 * In a vector (x16 = mailbox, x17 = the vector offset): a data abort in
 * MB_HOLE's page while a call runs is that call's fault (an edge check's
 * over-read or over-write), not the guest's. Record it as BREACH_FAULT
 * (found: FAR, wanted: the pc) and return to .Lfault_resume at the level
 * and on the stack the call ran with; anything else branches to \report
 * with only x15 changed. \el: el1 or el2, whose syndrome registers apply.
 */
.macro EDGE_FAULT el, report
	tst	x17, #0x180			/* a synchronous vector */
	b.ne	\report
	mrs	x15, esr_\el
	ubfx	x15, x15, #27, #5		/* EC >> 1: 0x24 and 0x25, data */
	cmp	x15, #0x12			/* aborts from a lower or the same EL */
	b.ne	\report
	ldr	x15, [x16, #MB_RUN_SP]
	cbz	x15, \report			/* no call running */
	ldr	x15, [x16, #MB_HOLE]
	cbz	x15, \report
	mrs	x16, far_\el
	sub	x15, x16, x15
	mrs	x16, tpidrro_el0
	cmp	x15, #PAGE_SIZE
	b.hs	\report
	mov	x15, #BREACH_FAULT
	ldr	x17, [x16, #MB_RUN_DONE]
	orr	x15, x15, x17, lsl #32
	str	x15, [x16, #MB_RES_BREACH]
	mrs	x15, far_\el
	str	x15, [x16, #MB_RES_BREACH_GOT]
	mrs	x15, elr_\el
	str	x15, [x16, #MB_RES_BREACH_WANT]
	adr	x15, .Lfault_resume
	msr	elr_\el, x15
	eret
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
	ldr	x3, [x2, #SLOT_FLAGS]
	str	x3, [x28, #MB_CMD_FLAGS]
	bl	.Lrun_call
	CUR_SLOT x1
	ldr	x2, [x28, #MB_RES_T0]
	str	x2, [x1, #SLOT_T0]
	ldr	x2, [x28, #MB_RES_T1]
	str	x2, [x1, #SLOT_T1]
	ldr	x2, [x28, #MB_RES_RET]
	str	x2, [x1, #SLOT_RET]
	ldr	x2, [x28, #MB_RES_BREACH]
	str	x2, [x1, #SLOT_BREACH]
	ldr	x2, [x28, #MB_RES_BREACH_GOT]
	str	x2, [x1, #SLOT_BREACH_GOT]
	ldr	x2, [x28, #MB_RES_BREACH_WANT]
	str	x2, [x1, #SLOT_BREACH_WANT]
	add	x0, x0, #1
	str	x0, [x28, #MB_BATCH_CUR]
	b	5b

	/*
	 * Run the command in the MB_CMD_* fields (x28 = mailbox); results in
	 * MB_RES_T0/T1/RET and MB_RES_BREACH*. Returns with x28 = mailbox
	 * again; x18-x27 and x29 hold canaries, x0-x17 are clobbered.
	 */
.Lrun_call:
	str	x30, [x28, #MB_RUN_LR]
	/* Pick the table: x0 = first row, x1 = end. */
	ldr	x2, [x28, #MB_CMD_TABLE]
	cmp	x2, #TABLE_ALIAS
	b.ne	1f
	adrp	x0, alias_table_start
	add	x0, x0, :lo12:alias_table_start
	adrp	x1, alias_table_end
	add	x1, x1, :lo12:alias_table_end
	b	2f
1:	cmp	x2, #TABLE_BESIDE
	b.ne	3f
	/* The second blob's table: bounds from the host, none when 0. */
	ldr	x0, [x28, #MB_BESIDE_START]
	ldr	x1, [x28, #MB_BESIDE_END]
	cbz	x0, .Lbad_command
	cmp	x1, x0
	b.lo	.Lbad_command
	b	2f
3:	cmp	x2, #TABLE_SELFTEST
	b.ne	.Lbad_command
	adrp	x0, selftest_table_start
	add	x0, x0, :lo12:selftest_table_start
	adrp	x1, selftest_table_end
	add	x1, x1, :lo12:selftest_table_end
2:	sub	x1, x1, x0
	lsr	x1, x1, #4			/* rows in the table */
	ldr	x2, [x28, #MB_CMD_INDEX]
	cmp	x2, x1
	b.hs	.Lbad_command
	add	x0, x0, x2, lsl #4
	ldr	x0, [x0]			/* routine (relocated absolute address) */
	str	x0, [x28, #MB_RUN_ROUTINE]
	ldr	x0, [x28, #MB_CMD_A0]
	str	x0, [x28, #MB_RUN_A0]
	ldr	x0, [x28, #MB_CMD_A1]
	str	x0, [x28, #MB_RUN_A1]
	ldr	x0, [x28, #MB_CMD_COUNT]
	str	x0, [x28, #MB_RUN_LEFT]
	str	xzr, [x28, #MB_RUN_DONE]
	str	xzr, [x28, #MB_RES_RET]
	str	xzr, [x28, #MB_RES_BREACH]
	str	xzr, [x28, #MB_RES_BREACH_GOT]
	str	xzr, [x28, #MB_RES_BREACH_WANT]
	mov	x0, sp
	str	x0, [x28, #MB_RUN_SP]

	dsb	sy
	READ_CNTVCT x0
	str	x0, [x28, #MB_RUN_T0]
	ldr	x0, [x28, #MB_RUN_LEFT]
	cbz	x0, .Lcalls_done
	/* x9 = mailbox: a temporary, re-read from TPIDRRO_EL0 after the call. */
3:	mrs	x9, tpidrro_el0
	ldr	x0, [x9, #MB_RUN_A0]
	ldr	x1, [x9, #MB_RUN_A1]
	ldr	x2, [x9, #MB_CMD_A2]
	ldr	x16, [x9, #MB_RUN_ROUTINE]
	ldp	x18, x19, [x9, #MB_CANARIES + 0]
	ldp	x20, x21, [x9, #MB_CANARIES + 16]
	ldp	x22, x23, [x9, #MB_CANARIES + 32]
	ldp	x24, x25, [x9, #MB_CANARIES + 48]
	ldp	x26, x27, [x9, #MB_CANARIES + 64]
	ldp	x28, x29, [x9, #MB_CANARIES + 80]
	blr	x16
	mrs	x9, tpidrro_el0
	/*
	 * sp first: an unbalanced stack also reloads saved registers from the
	 * wrong slots, so it is the cause to report when both are off.
	 */
	ldr	x10, [x9, #MB_RUN_SP]
	mov	x11, sp
	cmp	x11, x10
	b.ne	.Lbreach_stack
	.irp	n, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29
	ldr	x10, [x9, #MB_CANARIES + 8 * (\n - 18)]
	cmp	x\n, x10
	b.ne	.Lbreach_x\n
	.endr
	ldr	x10, [x9, #MB_CMD_FLAGS]
	tst	x10, #CMDF_RET_A0
	b.eq	4f
	ldr	x10, [x9, #MB_RUN_A0]
	cmp	x0, x10
	b.ne	.Lbreach_return
4:	str	x0, [x9, #MB_RES_RET]
	ldr	x10, [x9, #MB_RUN_A0]
	ldr	x11, [x9, #MB_CMD_A0_STEP]
	add	x10, x10, x11
	str	x10, [x9, #MB_RUN_A0]
	ldr	x10, [x9, #MB_RUN_A1]
	ldr	x11, [x9, #MB_CMD_A1_STEP]
	add	x10, x10, x11
	str	x10, [x9, #MB_RUN_A1]
	ldr	x10, [x9, #MB_RUN_DONE]
	add	x10, x10, #1
	str	x10, [x9, #MB_RUN_DONE]
	ldr	x10, [x9, #MB_RUN_LEFT]
	subs	x10, x10, #1
	str	x10, [x9, #MB_RUN_LEFT]
	b.ne	3b
.Lcalls_done:
	mrs	x28, tpidrro_el0
	/* Wait for the stores (incl. non-temporal ones) before the 2nd read. */
	dsb	sy
	READ_CNTVCT x0
	ldr	x1, [x28, #MB_RUN_T0]
	str	x1, [x28, #MB_RES_T0]
	str	x0, [x28, #MB_RES_T1]
	str	xzr, [x28, #MB_RUN_SP]		/* no call running */
	ldr	x30, [x28, #MB_RUN_LR]
	ret

	/*
	 * Where the vectors resume a call that faulted in MB_HOLE's page
	 * (EDGE_FAULT): the breach is recorded; put sp back, end the command.
	 */
.Lfault_resume:
	mrs	x9, tpidrro_el0
	ldr	x13, [x9, #MB_RUN_SP]
	mov	sp, x13
	b	.Lcalls_done

	/*
	 * A breach: x11 = kind | register << 8, x12 = the value found, x10 =
	 * the value wanted, x9 = mailbox. Record it with the failing call's
	 * index, put sp back and end the command.
	 */
	.irp	n, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29
.Lbreach_x\n:
	mov	x11, #(BREACH_CALLEE_SAVED | ((\n - 18) << 8))
	mov	x12, x\n
	b	.Lbreach
	.endr
.Lbreach_stack:
	mov	x12, x11
	mov	x11, #BREACH_STACK
	b	.Lbreach
.Lbreach_return:
	mov	x12, x0
	mov	x11, #BREACH_RETURN
.Lbreach:
	ldr	x13, [x9, #MB_RUN_SP]
	mov	sp, x13
	ldr	x13, [x9, #MB_RUN_DONE]
	orr	x11, x11, x13, lsl #32
	str	x11, [x9, #MB_RES_BREACH]
	str	x12, [x9, #MB_RES_BREACH_GOT]
	str	x10, [x9, #MB_RES_BREACH_WANT]
	b	.Lcalls_done

	/*
	 * CMD_SEALED (a protected VM: the host may not read this RAM): the
	 * call, then over the doorbell's value word its timestamps and its
	 * breach words (MB_RES_BREACH, _GOT, _WANT), HC_RESULT, then PSCI
	 * SYSTEM_OFF by HVC (the conduit KVM gives an EL1 guest with PSCI
	 * 0.2). Should SYSTEM_OFF return, HC_DONE says so.
	 */
.Lsealed:
	bl	.Lrun_call
	mov_imm	x16, DOORBELL_VALUE
	ldr	x0, [x28, #MB_RES_T0]
	str	x0, [x16]
	ldr	x0, [x28, #MB_RES_T1]
	str	x0, [x16]
	ldr	x0, [x28, #MB_RES_BREACH]
	str	x0, [x16]
	ldr	x0, [x28, #MB_RES_BREACH_GOT]
	str	x0, [x16]
	ldr	x0, [x28, #MB_RES_BREACH_WANT]
	str	x0, [x16]
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
 * hyp_el2_init: the start at EL2 (HCR_EL2.E2H = 0, a vCPU made with
 * KVM_ARM_VCPU_HAS_EL2 | HAS_EL2_E2H0), EL2h, DAIF masked, MMU off. Does
 * what the nVHE hyp's ___kvm_hyp_init (arch/arm64/kvm/hyp/nvhe/hyp-init.S)
 * does before its library code runs, with the values the host computed
 * (crates/arch/src/aarch64/sysregs.rs) in registers instead of a
 * struct kvm_nvhe_init_params:
 *   x0 MAIR_EL2, x1 TCR_EL2, x2 TTBR0_EL2 (the EL2-format tables: RAM at the
 *   hyp VA, this page also at its physical address), x3 SCTLR_EL2 (M, C, I,
 *   SA, WXN, RES1), x4 HCR_EL2 (RW only: no guest of its own, no traps),
 *   x5 SP_EL2 (a hyp VA), x6 the hyp VA minus the physical address.
 * It runs at its physical address, as the hyp's init runs in its idmap:
 * VBAR_EL2 gets the vectors' hyp VA, and once the MMU is on it jumps by x6
 * to its hyp VA. TPIDRRO_EL0 (the mailbox's hyp VA) is set by the host as
 * at EL1. Then hyp_entry, whose doorbell is MMIO and so works from EL2 as
 * from EL1; nothing here uses HVC (from EL2 it would go to this guest's
 * own vectors). Aligned to 256 bytes and shorter, so it never spans two
 * pages: the host maps the one page it starts in.
 */
	.section .text.entry, "ax"
	.balign	256
	.globl	hyp_el2_init
	.type	hyp_el2_init, %function
hyp_el2_init:
	msr	hcr_el2, x4
	msr	mair_el2, x0
	msr	tcr_el2, x1
	msr	ttbr0_el2, x2
	isb
	/* Stale TLB entries from before (hyp-init: the bootloader's). */
	tlbi	alle2
	dsb	sy
	adr	x7, hyp_el2_vectors
	add	x7, x7, x6
	msr	vbar_el2, x7
	mov	sp, x5
	/* set_sctlr_el2 (arch/arm64/include/asm/assembler.h). */
	msr	sctlr_el2, x3
	isb
	ic	iallu
	dsb	nsh
	isb
	/* Still at the physical address: on to the hyp VA. */
	adr	x7, hyp_entry
	add	x7, x7, x6
	br	x7
	.size	hyp_el2_init, . - hyp_el2_init
	.if	. - hyp_el2_init > 256
	.error	"hyp_el2_init must fit the 256 bytes it is aligned to"
	.endif

/*
 * Exception vectors (VBAR_EL1, 2 KiB aligned): 16 entries of 0x80 bytes,
 * {current EL with SP_EL0, current EL with SP_ELx, lower EL AArch64,
 * lower EL AArch32} x {synchronous, IRQ, FIQ, SError}. Every entry puts
 * its offset in x17 and branches to the common reporter, which runs at
 * EL1 on no stack at all; unless EDGE_FAULT takes the exception as the
 * running call's (a data abort in MB_HOLE's page), it reports through the
 * mailbox with HC_FAIL / FAIL_EXCEPTION:
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
	EDGE_FAULT el1, .Lreport
.Lreport:
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
	EDGE_FAULT el2, .Lreport_el2
.Lreport_el2:
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
