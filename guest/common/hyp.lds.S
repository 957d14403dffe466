/* SPDX-License-Identifier: MIT */
/*
 * Linker script of the guest blob, run through the C preprocessor like the
 * kernel's vmlinux.lds.S. Linked at address 0; the host loads it at a
 * randomized page-aligned address and applies .hyp.reloc.
 *
 * Every input symbol already carries the __hypclear_ prefix (objcopy
 * --prefix-symbols after the partial link), so symbols defined here do too.
 */
#include "alias.h"

ENTRY(HYP_SYM(hyp_entry))

SECTIONS
{
	. = 0;
	.text : {
		KEEP(*(.text.head))
		*(.text.entry)
#ifndef HYP_KERNEL_OBJECTS
		*(.text)
#endif
	}
	. = ALIGN(64);
	/* __pi_ library routines: build.rs accepts only PC-relative relocations here. */
	.pi.text : {
		HYP_SYM(pi_text_start) = .;
		*(.text.__pi)
#ifdef HYP_KERNEL_OBJECTS
		/* A kernel tree's library objects: their text is the __pi_ code. */
		*(.text) *(.noinstr.text)
#ifdef HYP_X86_RETURN_THUNK
		/* Their returns jump here until the host patches them to ret; int3. */
		HYP_SYM(__x86_return_thunk) = .;
		BYTE(0xc3) BYTE(0xcc)
#endif
#endif
		HYP_SYM(pi_text_end) = .;
	}
#ifdef HYP_KERNEL_OBJECTS
	/* Kept for the host, which applies the alternatives at load time. */
	. = ALIGN(64);
	.altinstr_replacement : { *(.altinstr_replacement) }
	.altinstructions : { KEEP(*(.altinstructions)) }
	.return_sites : { KEEP(*(.return_sites)) }
#endif
	. = ALIGN(64);
	.selftest.text : { *(.text.selftest) }
	. = ALIGN(4096);
	.rodata : {
		/* RING's list of doorbell sites (ring.h): the host takes a
		 * hypercall only from one of them. */
		HYP_SYM(hyp_rings_start) = .;
		KEEP(*(.rodata.hyp_rings))
		HYP_SYM(hyp_rings_end) = .;
		*(.rodata .rodata.*)
	}
	. = ALIGN(4096);
	.data : {
		HYP_SYM(alias_table_start) = .;
		KEEP(*(.data.alias_table))
		HYP_SYM(alias_table_end) = .;
		HYP_SYM(selftest_table_start) = .;
		KEEP(*(.data.selftest_table))
		HYP_SYM(selftest_table_end) = .;
		*(.data .data.*)
	}
	.bss : { *(.bss .bss.*) }
	HYP_SYM(hyp_end) = .;

	/DISCARD/ : {
		*(.note .note.*) *(.comment) *(.eh_frame) *(.eh_frame_hdr)
#ifdef HYP_KERNEL_OBJECTS
		/* What the hyp does not need from a kernel tree's objects. */
		*(.export_symbol) *(__ex_table) *(__ksymtab*) *(___ksymtab*)
		*(.orc_unwind*) *(.orc_header) *(.discard*) *(.debug*)
		/* objtool's lists for the kernel's own boot-time patching
		 * (call depth thunks, IBT sealing, retpolines): no hyp uses them. */
		*(.call_sites) *(.ibt_endbr_seal) *(.retpoline_sites)
#endif
	}
}

/*
 * The aliases in the blob's namespace (__hypclear_<alias> = __hypclear_<target>)
 * are appended by the link pipeline (crates/link/src/link.rs) from the alias list.
 */
