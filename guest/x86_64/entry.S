/* SPDX-License-Identifier: MIT */
/*
 * x86_64 guest entry, command dispatcher and exception vectors.
 *
 * Entry: 64-bit mode at CPL 3 or 0, rsp = this vCPU's stack (16-byte
 * aligned), GS base = its mailbox page, rflags = 0x2 (interrupts off).
 * Loop: ring HC_READY; per command call the table row a0/a1-stepped
 * MB_CMD_COUNT times between two TSC reads, ring HC_RESULT (CMD_BATCH: once
 * for all its slots, the current one in MB_BATCH_CUR).
 * Contract, around every call: rbx rbp r12-r15 hold the MB_CANARIES, DF is
 * clear; after it the canaries, rsp, DF and (CMDF_RET_A0) rax == a0 are
 * compared, and the first breach ends the command (MB_RES_BREACH*), as
 * does a page fault in MB_HOLE's page (an edge check's over-access). The
 * loop's own state lives in MB_RUN_*, never in a register a routine keeps.
 * Why: the host sees only exits; everything a check needs is in the mailbox.
 */
#include "hypclear_abi.h"
#include "ring.h"

/* Ring the doorbell with hypercall number \nr (a 64-bit store, exits as MMIO). */
.macro HYPERCALL nr
	movabs	$DOORBELL_GPA, %rax
	RING	$\nr
.endm

/* %rsi = mailbox offset of batch slot MB_BATCH_CUR (past BATCH_SLOTS: bad command). */
.macro CUR_SLOT
	mov	%gs:MB_BATCH_CUR, %rsi
	cmp	$BATCH_SLOTS, %rsi
	jae	.Lbad_command
	imul	$SLOT_SIZE, %rsi, %rsi
	add	$MB_SLOTS, %rsi
.endm

/* Read the TSC into %rax as a 64-bit value; clobbers %rdx. */
.macro READ_TSC
	rdtsc
	shl	$32, %rdx
	or	%rdx, %rax
.endm

/* Index of each callee-saved register's canary (arch::CALLEE_SAVED). */
.Lcanary_rbx = 0
.Lcanary_rbp = 1
.Lcanary_r12 = 2
.Lcanary_r13 = 3
.Lcanary_r14 = 4
.Lcanary_r15 = 5

	.section .text.entry, "ax"
	.globl	hyp_entry
	.type	hyp_entry, %function
hyp_entry:
	movabs	$MAILBOX_MAGIC, %rcx
	cmp	%gs:MB_MAGIC, %rcx
	jne	.Lbad_command
	HYPERCALL HC_READY

.Lnext:
	mov	%gs:MB_CMD_OP, %rax
	cmp	$CMD_EXIT, %rax
	je	.Lexit
	cmp	$CMD_BATCH, %rax
	je	.Lbatch
	cmp	$CMD_CALL, %rax
	jne	.Lbad_command
	call	.Lrun_call
.Lresult:
	mov	%gs:MB_CMD_ID, %rax
	mov	%rax, %gs:MB_RES_ID
	HYPERCALL HC_RESULT
	jmp	.Lnext

	/* CMD_BATCH: slots 0 .. MB_BATCH_N - 1, then one HC_RESULT. */
.Lbatch:
	mov	%gs:MB_BATCH_N, %rax
	test	%rax, %rax
	jz	.Lbad_command
	cmp	$BATCH_SLOTS, %rax
	ja	.Lbad_command
	movq	$0, %gs:MB_BATCH_CUR
1:	mov	%gs:MB_BATCH_CUR, %rsi
	cmp	%gs:MB_BATCH_N, %rsi
	jae	.Lresult
	CUR_SLOT
	.irp	k, 0, 8, 16, 24, 32, 40, 48, 56
	mov	%gs:\k(%rsi), %rax
	mov	%rax, %gs:MB_CMD_TABLE + \k
	.endr
	mov	%gs:SLOT_FLAGS(%rsi), %rax
	mov	%rax, %gs:MB_CMD_FLAGS
	call	.Lrun_call
	CUR_SLOT
	mov	%gs:MB_RES_T0, %rax
	mov	%rax, %gs:SLOT_T0(%rsi)
	mov	%gs:MB_RES_T1, %rax
	mov	%rax, %gs:SLOT_T1(%rsi)
	mov	%gs:MB_RES_RET, %rax
	mov	%rax, %gs:SLOT_RET(%rsi)
	mov	%gs:MB_RES_BREACH, %rax
	mov	%rax, %gs:SLOT_BREACH(%rsi)
	mov	%gs:MB_RES_BREACH_GOT, %rax
	mov	%rax, %gs:SLOT_BREACH_GOT(%rsi)
	mov	%gs:MB_RES_BREACH_WANT, %rax
	mov	%rax, %gs:SLOT_BREACH_WANT(%rsi)
	incq	%gs:MB_BATCH_CUR
	jmp	1b

	/*
	 * Run the command in the MB_CMD_* fields; results in MB_RES_T0/T1/RET
	 * and MB_RES_BREACH*. The 8-byte pad keeps the routines' entry stack
	 * alignment what it is for any call from 16-byte aligned code.
	 */
.Lrun_call:
	sub	$8, %rsp
	/* Pick the table: rax = the row, rcx = the table's end. */
	lea	alias_table_start(%rip), %rdx
	lea	alias_table_end(%rip), %rcx
	mov	%gs:MB_CMD_TABLE, %rax
	cmp	$TABLE_ALIAS, %rax
	je	1f
	cmp	$TABLE_BESIDE, %rax
	je	.Lbeside_table
	cmp	$TABLE_SELFTEST, %rax
	jne	.Lbad_command
	lea	selftest_table_start(%rip), %rdx
	lea	selftest_table_end(%rip), %rcx
1:
.Ltable_picked:
	mov	%gs:MB_CMD_INDEX, %rax
	shl	$4, %rax
	jc	.Lbad_command
	add	%rdx, %rax
	jc	.Lbad_command
	cmp	%rcx, %rax
	jae	.Lbad_command
	mov	(%rax), %rax			/* routine (relocated absolute address) */
	mov	%rax, %gs:MB_RUN_ROUTINE
	mov	%gs:MB_CMD_A0, %rax
	mov	%rax, %gs:MB_RUN_A0
	mov	%gs:MB_CMD_A1, %rax
	mov	%rax, %gs:MB_RUN_A1
	mov	%gs:MB_CMD_COUNT, %rax
	mov	%rax, %gs:MB_RUN_LEFT
	xor	%eax, %eax
	mov	%rax, %gs:MB_RUN_DONE
	mov	%rax, %gs:MB_RES_RET
	mov	%rax, %gs:MB_RES_BREACH
	mov	%rax, %gs:MB_RES_BREACH_GOT
	mov	%rax, %gs:MB_RES_BREACH_WANT
	mov	%rsp, %gs:MB_RUN_SP

	lfence
	READ_TSC
	lfence
	mov	%rax, %gs:MB_RUN_T0
	cmpq	$0, %gs:MB_RUN_LEFT
	je	.Lcalls_done
2:	mov	%gs:MB_RUN_A0, %rdi
	mov	%gs:MB_RUN_A1, %rsi
	mov	%gs:MB_CMD_A2, %rdx
	mov	%gs:MB_CANARIES + 0, %rbx
	mov	%gs:MB_CANARIES + 8, %rbp
	mov	%gs:MB_CANARIES + 16, %r12
	mov	%gs:MB_CANARIES + 24, %r13
	mov	%gs:MB_CANARIES + 32, %r14
	mov	%gs:MB_CANARIES + 40, %r15
	cld
	call	*%gs:MB_RUN_ROUTINE
	cmp	%gs:MB_RUN_SP, %rsp
	jne	.Lbreach_stack
	.irp	reg, rbx, rbp, r12, r13, r14, r15
	cmp	%gs:MB_CANARIES + 8 * .Lcanary_\reg, %\reg
	jne	.Lbreach_\reg
	.endr
	pushfq
	pop	%rcx
	test	$0x400, %ecx			/* DF */
	jnz	.Lbreach_flags
	testq	$CMDF_RET_A0, %gs:MB_CMD_FLAGS
	jz	3f
	cmp	%gs:MB_RUN_A0, %rax
	jne	.Lbreach_return
3:	mov	%rax, %gs:MB_RES_RET
	mov	%gs:MB_CMD_A0_STEP, %rcx
	add	%rcx, %gs:MB_RUN_A0
	mov	%gs:MB_CMD_A1_STEP, %rcx
	add	%rcx, %gs:MB_RUN_A1
	incq	%gs:MB_RUN_DONE
	decq	%gs:MB_RUN_LEFT
	jnz	2b
.Lcalls_done:
	mfence
	lfence
	READ_TSC
	mov	%gs:MB_RUN_T0, %rcx
	mov	%rcx, %gs:MB_RES_T0
	mov	%rax, %gs:MB_RES_T1
	movq	$0, %gs:MB_RUN_SP		/* no call running */
	add	$8, %rsp
	ret

	/* The second blob's table: bounds from the host, none when 0. */
.Lbeside_table:
	mov	%gs:MB_BESIDE_START, %rdx
	mov	%gs:MB_BESIDE_END, %rcx
	test	%rdx, %rdx
	jz	.Lbad_command
	cmp	%rdx, %rcx
	jb	.Lbad_command
	jmp	.Ltable_picked

	/*
	 * A breach: %rcx = kind | register << 8, %rdx = the value found,
	 * %rax = the value wanted. Record it with the failing call's index,
	 * restore what the harness needs (rsp, DF) and end the command.
	 */
	.irp	reg, rbx, rbp, r12, r13, r14, r15
.Lbreach_\reg:
	mov	$BREACH_CALLEE_SAVED | (.Lcanary_\reg << 8), %ecx
	mov	%\reg, %rdx
	mov	%gs:MB_CANARIES + 8 * .Lcanary_\reg, %rax
	jmp	.Lbreach
	.endr
.Lbreach_stack:
	mov	$BREACH_STACK, %ecx
	mov	%rsp, %rdx
	mov	%gs:MB_RUN_SP, %rax
	jmp	.Lbreach
.Lbreach_flags:
	mov	%rcx, %rdx
	mov	%rcx, %rax
	and	$~0x400, %rax
	mov	$BREACH_FLAGS, %ecx
	jmp	.Lbreach
.Lbreach_return:
	mov	%rax, %rdx
	mov	%gs:MB_RUN_A0, %rax
	mov	$BREACH_RETURN, %ecx
.Lbreach:
	mov	%gs:MB_RUN_SP, %rsp
	cld
	mov	%gs:MB_RUN_DONE, %rsi
	shl	$32, %rsi
	or	%rsi, %rcx
	mov	%rcx, %gs:MB_RES_BREACH
	mov	%rdx, %gs:MB_RES_BREACH_GOT
	mov	%rax, %gs:MB_RES_BREACH_WANT
	jmp	.Lcalls_done
	/* Where the vectors resume a call that faulted in MB_HOLE's page. */
.Lfault_resume:
	jmp	.Lcalls_done

.Lexit:
	HYPERCALL HC_DONE
	jmp	.Lexit

.Lbad_command:
	movq	$FAIL_BAD_COMMAND, %gs:MB_FAIL_CODE
	mov	%gs:MB_CMD_TABLE, %rax
	mov	%rax, %gs:MB_FAIL_D0
	mov	%gs:MB_CMD_INDEX, %rax
	mov	%rax, %gs:MB_FAIL_D1
	HYPERCALL HC_FAIL
	jmp	.Lbad_command
	.size	hyp_entry, . - hyp_entry

/*
 * Exception vectors 0..31, one 32-byte stub each (the host builds the IDT
 * from hyp_vectors + 32 * vector). They run at CPL 0 on the TSS.RSP0 stack,
 * push a uniform frame and report it with HC_FAIL / FAIL_EXCEPTION:
 *   D0 vector, D1 error code, D2 RIP, D3 CR2, D4 RSP, D5 CS.
 */
	.balign	32
	.globl	hyp_vectors
	.type	hyp_vectors, %function
hyp_vectors:
	vector = 0
	.rept	32
	.balign	32
	/* Vectors that push an error code: #DF #TS #NP #SS #GP #PF #AC #CP #VC #SX. */
	.if (vector == 8) || ((vector >= 10) && (vector <= 14)) || (vector == 17) || (vector == 21) || (vector == 29) || (vector == 30)
	.else
	pushq	$0
	.endif
	pushq	$vector
	jmp	.Lexception
	vector = vector + 1
	.endr
	.size	hyp_vectors, . - hyp_vectors

.Lexception:
	/* Frame: vector, error code, RIP, CS, RFLAGS, RSP, SS. */
	/*
	 * A page fault in MB_HOLE's page during a call is that call's fault
	 * (an edge check's over-read or over-write): record it as a breach
	 * and resume the harness where its calls end, at the caller's
	 * privilege, on its stack, with DF clear.
	 */
	cmpq	$14, 0(%rsp)
	jne	.Lreport
	cmpq	$0, %gs:MB_RUN_SP
	je	.Lreport
	mov	%cr2, %rax
	mov	%gs:MB_HOLE, %rcx
	test	%rcx, %rcx
	jz	.Lreport
	sub	%rcx, %rax
	cmp	$PAGE_SIZE, %rax
	jae	.Lreport
	mov	%gs:MB_RUN_DONE, %rax
	shl	$32, %rax
	or	$BREACH_FAULT, %rax
	mov	%rax, %gs:MB_RES_BREACH
	mov	%cr2, %rax
	mov	%rax, %gs:MB_RES_BREACH_GOT
	mov	16(%rsp), %rax
	mov	%rax, %gs:MB_RES_BREACH_WANT
	lea	.Lfault_resume(%rip), %rax
	mov	%rax, 16(%rsp)
	mov	%gs:MB_RUN_SP, %rax
	mov	%rax, 40(%rsp)
	andq	$~0x400, 32(%rsp)
	add	$16, %rsp
	iretq
.Lreport:
	movq	$FAIL_EXCEPTION, %gs:MB_FAIL_CODE
	mov	0(%rsp), %rax
	mov	%rax, %gs:MB_FAIL_D0
	mov	8(%rsp), %rax
	mov	%rax, %gs:MB_FAIL_D1
	mov	16(%rsp), %rax
	mov	%rax, %gs:MB_FAIL_D2
	mov	%cr2, %rax
	mov	%rax, %gs:MB_FAIL_D3
	mov	40(%rsp), %rax
	mov	%rax, %gs:MB_FAIL_D4
	mov	24(%rsp), %rax
	mov	%rax, %gs:MB_FAIL_D5
1:	HYPERCALL HC_FAIL
	jmp	1b
