/* SPDX-License-Identifier: MIT */
/*
 * aarch64 alias table: the only way the dispatcher reaches a __pi_ routine.
 * The `vanilla` configuration has out-of-line clear_page/clear_pages routines;
 * the `memset` configuration (CONFIG_CLEAR_PAGE_ALIAS undefined) has none,
 * as in "arm64: clear_page[s] using memset": clear_page(addr) becomes
 * memset(addr, 0, PAGE_SIZE) at the call site.
 *
 * Alias names are <family>_<variant> with '-' replaced by '_' (see
 * src/routines/lower.rs and the VARIANTS list in src/arch/aarch64/mod.rs). In each
 * family the variants that run on every CPU come first (the MOPS ones need
 * FEAT_MOPS), so "the first memset" is always safe to call natively.
 *
 * Kernel paths (arch/arm64/lib, 6.1 and 6.12; see guest/README.md):
 * clear_page dczva (DC ZVA, STNP when DZP = 1), stnp (that STNP path
 * forced); memset generic; memcpy generic (also memmove); copy_page
 * ldp-stnp (6.12, and 6.1 without NO_HW_PREFETCH), ldp-stnp-prfm (6.1 with
 * ARM64_HAS_NO_HW_PREFETCH). stp and every mops variant are not kernel
 * code in 6.1 / 6.12.
 */
#ifdef CONFIG_CLEAR_PAGE_ALIAS
HYP_ALIAS(clear_page_stp, __pi_clear_page_stp)
HYP_ALIAS(clear_pages_stp, __pi_clear_pages_stp)
HYP_ALIAS(clear_page_stnp, __pi_clear_page_stnp)
HYP_ALIAS(clear_pages_stnp, __pi_clear_pages_stnp)
HYP_ALIAS(clear_page_dczva, __pi_clear_page_dczva)
HYP_ALIAS(clear_pages_dczva, __pi_clear_pages_dczva)
HYP_ALIAS(clear_page_mops, __pi_clear_page_mops)
HYP_ALIAS(clear_pages_mops, __pi_clear_pages_mops)
#endif
HYP_ALIAS(memset_generic, __pi_memset_generic)
HYP_ALIAS(memset_mops, __pi_memset_mops)
HYP_ALIAS(memcpy_generic, __pi_memcpy_generic)
HYP_ALIAS(memcpy_mops, __pi_memcpy_mops)
HYP_ALIAS(copy_page_ldp_stnp, __pi_copy_page_ldp_stnp)
HYP_ALIAS(copy_page_ldp_stnp_prfm, __pi_copy_page_ldp_stnp_prfm)
HYP_ALIAS(copy_page_mops, __pi_copy_page_mops)
