/* SPDX-License-Identifier: MIT */
/*
 * The alias table and the selftest table, built from the per-arch lists.
 * Each row is 16 bytes: { .quad routine, .quad name }. Both words are
 * absolute addresses; build.rs records them in .hyp.reloc and the host adds
 * the load address before the first entry (the hyp's gen-hyprel scheme).
 */
#include "alias.h"

#define HYP_ROW(section, sym, name)				\
	.pushsection .rodata.table_names, "a";			\
9998:	.asciz name;						\
	.popsection;						\
	.pushsection section, "aw";				\
	.balign 8;						\
	.quad sym;						\
	.quad 9998b;						\
	.popsection;

#define HYP_ALIAS(alias, target)	HYP_ROW(.data.alias_table, alias, #alias)
#define HYP_SELFTEST(name, sym)		HYP_ROW(.data.selftest_table, sym, #name)

#include "aliases.h"
#include "selftests.h"
#include "hostile.h"
