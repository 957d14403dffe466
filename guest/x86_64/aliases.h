/* SPDX-License-Identifier: MIT */
/*
 * x86_64 alias table: the only way the dispatcher reaches a __pi_ routine.
 * The `vanilla` configuration has out-of-line clear_page/clear_pages routines;
 * the `memset` configuration (CONFIG_CLEAR_PAGE_ALIAS undefined) has none,
 * like arm64 after "clear_page[s] using memset": clear_page(addr) becomes
 * memset(addr, 0, PAGE_SIZE) at the call site.
 */
#ifdef CONFIG_CLEAR_PAGE_ALIAS
HYP_ALIAS(clear_page_erms, __pi_clear_page_erms)
HYP_ALIAS(clear_pages_erms, __pi_clear_pages_erms)
HYP_ALIAS(clear_page_rep, __pi_clear_page_rep)
HYP_ALIAS(clear_pages_rep, __pi_clear_pages_rep)
HYP_ALIAS(clear_page_orig, __pi_clear_page_orig)
HYP_ALIAS(clear_pages_orig, __pi_clear_pages_orig)
HYP_ALIAS(clear_page_nt, __pi_clear_page_nt)
HYP_ALIAS(clear_pages_nt, __pi_clear_pages_nt)
HYP_ALIAS(clear_page_clzero, __pi_clear_page_clzero)
HYP_ALIAS(clear_pages_clzero, __pi_clear_pages_clzero)
#endif
HYP_ALIAS(memset_erms, __pi_memset_erms)
HYP_ALIAS(memset_unrolled, __pi_memset_unrolled)
HYP_ALIAS(memcpy_erms, __pi_memcpy_erms)
HYP_ALIAS(memcpy_unrolled, __pi_memcpy_unrolled)
HYP_ALIAS(copy_page_rep, __pi_copy_page_rep)
HYP_ALIAS(copy_page_unrolled, __pi_copy_page_unrolled)
