/* SPDX-License-Identifier: MIT */
/*
 * Unit-test helper (not part of the blob: build.rs only takes the .S files
 * directly in guest/aarch64/, lib/ and selftest/).
 *
 * uint64_t call_checked(void *fn, uint64_t a0, uint64_t a1, uint64_t a2,
 *                       uint64_t *bad)
 *
 * Calls fn(a0, a1, a2) with x18-x28 set to known values and stores in *bad
 * a bit mask of the registers the routine did not preserve: bit i for
 * x(18 + i), bit 11 for x29 and bit 12 for SP. Returns fn's x0.
 */
	.text
	.globl	call_checked
	.type	call_checked, %function
call_checked:
	stp	x29, x30, [sp, #-112]!
	mov	x29, sp
	stp	x19, x20, [sp, #16]
	stp	x21, x22, [sp, #32]
	stp	x23, x24, [sp, #48]
	stp	x25, x26, [sp, #64]
	stp	x27, x28, [sp, #80]
	stp	x4, x18, [sp, #96]
	mov	x9, x0
	mov	x0, x1
	mov	x1, x2
	mov	x2, x3
	.irp	r, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28
	mov	x\r, #(0x5a00 + \r)
	.endr
	blr	x9
	mov	x10, #0
	mov	x11, #1
	.irp	r, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28
	mov	x12, #(0x5a00 + \r)
	cmp	x\r, x12
	csel	x12, x11, xzr, ne
	orr	x10, x10, x12
	lsl	x11, x11, #1
	.endr
	mov	x12, sp
	cmp	x12, x29
	b.eq	1f
	orr	x10, x10, #(1 << 12)
	mov	sp, x29			/* the frame is still at x29 if only SP broke */
1:	ldp	x4, x18, [sp, #96]
	str	x10, [x4]
	ldp	x19, x20, [sp, #16]
	ldp	x21, x22, [sp, #32]
	ldp	x23, x24, [sp, #48]
	ldp	x25, x26, [sp, #64]
	ldp	x27, x28, [sp, #80]
	ldp	x29, x30, [sp], #112
	ret
	.size	call_checked, . - call_checked
	.section .note.GNU-stack, "", %progbits
