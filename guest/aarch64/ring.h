/* SPDX-License-Identifier: MIT */
/*
 * RING reg: the doorbell store `str reg, [x16]` (x16 = DOORBELL_GPA) and
 * its entry in .rodata.hyp_rings, a PC-relative list of ring sites.
 * The host accepts a hypercall only from a listed site, so a routine's own
 * store to the doorbell is a protocol violation, never a hypercall.
 * The site is the STR itself: arm64 KVM steps over an MMIO access at the
 * next KVM_RUN, so the PC at the exit still points at it.
 */
#ifndef HYPCLEAR_RING_H
#define HYPCLEAR_RING_H

#ifdef __ASSEMBLER__
.macro RING reg
9999:
	str	\reg, [x16]
	.pushsection .rodata.hyp_rings, "a"
	.balign	4
	.long	9999b - .
	.popsection
.endm
#endif

#endif /* HYPCLEAR_RING_H */
