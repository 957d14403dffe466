/* SPDX-License-Identifier: MIT */
/*
 * x86_64 alias table: the only way the dispatcher reaches a __pi_ routine.
 * The `vanilla` configuration has out-of-line clear_page/clear_pages routines;
 * the `memset` configuration (CONFIG_CLEAR_PAGE_ALIAS undefined) has none,
 * like arm64 after "clear_page[s] using memset": clear_page(addr) becomes
 * memset(addr, 0, PAGE_SIZE) at the call site.
 *
 * Variant names follow the kernel path each routine models (see the
 * contract comment of each lib/<family>_<variant>.S and guest/README.md):
 * erms / rep_good / orig for memset, fsrm / rep_good / orig for memcpy,
 * rep / regs for copy_page, erms / rep / orig for clear_page. nt, clzero
 * and copy_page unrolled are not kernel code.
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
HYP_ALIAS(memset_rep_good, __pi_memset_rep_good)
HYP_ALIAS(memset_orig, __pi_memset_orig)
HYP_ALIAS(memcpy_fsrm, __pi_memcpy_fsrm)
HYP_ALIAS(memcpy_rep_good, __pi_memcpy_rep_good)
HYP_ALIAS(memcpy_orig, __pi_memcpy_orig)
HYP_ALIAS(copy_page_rep, __pi_copy_page_rep)
HYP_ALIAS(copy_page_regs, __pi_copy_page_regs)
HYP_ALIAS(copy_page_unrolled, __pi_copy_page_unrolled)
