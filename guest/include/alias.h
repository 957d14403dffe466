/* SPDX-License-Identifier: MIT */
/*
 * HYP_ALIAS(alias, target): the analogue of the kernel's
 * KVM_NVHE_ALIAS_HYP(memset, __pi_memset).
 *
 * The per-architecture lists (guest/<arch>/aliases.h, selftests.h) are
 * included in two places, with a different HYP_ALIAS definition each:
 *  - common/hyp.lds.S turns every entry into a linker-script symbol
 *    assignment in the blob's namespace: __hypclear_<alias> = __hypclear_<target>;
 *  - common/tables.S turns every entry into an {address, name} row of the
 *    alias table the dispatcher calls through. The address is the alias
 *    symbol, an absolute 64-bit word that the host relocates.
 */
#ifndef HYPCLEAR_ALIAS_H
#define HYPCLEAR_ALIAS_H

/* Namespace prefix applied by objcopy --prefix-symbols after the partial link. */
#define HYP_PREFIX __hypclear_
#define __HYP_CONCAT(a, b) a##b
#define __HYP_SYM(p, s) __HYP_CONCAT(p, s)
#define HYP_SYM(s) __HYP_SYM(HYP_PREFIX, s)

#endif
