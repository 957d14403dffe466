/* SPDX-License-Identifier: MIT */
/*
 * aarch64 alias table: the only way the dispatcher reaches a __pi_ routine.
 * `vanilla` (CONFIG_CLEAR_PAGE_ALIAS) has out-of-line clear_page[s]
 * routines; `memset` has none, as in "arm64: clear_page[s] using memset",
 * where clear_page(addr) is memset(addr, 0, PAGE_SIZE).
 * Names are <family>_<variant> ('-' written '_'); with each lib/<file>.S header
 * this list is the variant catalogue (crates/link/src/catalog.rs), in this
 * order. Which variants follow kernel code: see guest/README.md.
 */
#ifdef CONFIG_CLEAR_PAGE_ALIAS
HYP_ALIAS(clear_page_mops, __pi_clear_page_mops)
HYP_ALIAS(clear_pages_mops, __pi_clear_pages_mops)
HYP_ALIAS(clear_page_dczva, __pi_clear_page_dczva)
HYP_ALIAS(clear_pages_dczva, __pi_clear_pages_dczva)
HYP_ALIAS(clear_page_stnp, __pi_clear_page_stnp)
HYP_ALIAS(clear_pages_stnp, __pi_clear_pages_stnp)
HYP_ALIAS(clear_page_stp, __pi_clear_page_stp)
HYP_ALIAS(clear_pages_stp, __pi_clear_pages_stp)
#endif
HYP_ALIAS(memset_mops, __pi_memset_mops)
HYP_ALIAS(memset_generic, __pi_memset_generic)
HYP_ALIAS(memcpy_mops, __pi_memcpy_mops)
HYP_ALIAS(memcpy_generic, __pi_memcpy_generic)
HYP_ALIAS(copy_page_mops, __pi_copy_page_mops)
HYP_ALIAS(copy_page_ldp_stnp, __pi_copy_page_ldp_stnp)
HYP_ALIAS(copy_page_ldp_stnp_prfm, __pi_copy_page_ldp_stnp_prfm)
