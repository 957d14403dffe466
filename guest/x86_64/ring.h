/* SPDX-License-Identifier: MIT */
/*
 * RING src: the doorbell store `movq src, (%rax)` (%rax = DOORBELL_GPA) and
 * its entry in .rodata.hyp_rings, a PC-relative list of ring sites.
 * The host accepts a hypercall only from a listed site, so a routine's own
 * store to the doorbell, or a 16-byte store KVM splits into two 8-byte
 * exits, is a protocol violation and never half a hypercall.
 * The site is the PC after the store: x86 KVM retires an emulated MMIO
 * store before it exits to the host.
 */
#ifndef HYPCLEAR_RING_H
#define HYPCLEAR_RING_H

#ifdef __ASSEMBLER__
.macro RING src
	movq	\src, (%rax)
9999:
	.pushsection .rodata.hyp_rings, "a"
	.balign	4
	.long	9999b - .
	.popsection
.endm
#endif

#endif /* HYPCLEAR_RING_H */
