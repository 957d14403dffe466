// SPDX-License-Identifier: MIT
//
// Exhaustive-ish user-space tests of the aarch64 routines in guest/aarch64/lib
// and of the deliberately broken selftest routines, run natively on arm64 or
// under qemu-aarch64 (-cpu max has FEAT_MOPS; -cpu a64fx has a 256-byte DC
// ZVA block). Build and run with guest/aarch64/test/run.sh.
//
// Every call goes through call_checked (trampoline.S), which also checks
// that x18-x29 and SP are preserved. Destinations and sources are placed
// (a) in the middle of a buffer with guard bytes on both sides, (b) ending
// exactly at a PROT_NONE page and (c) starting exactly after a PROT_NONE
// page, so out-of-bounds writes show up as changed guard bytes and
// out-of-bounds reads or writes as SIGSEGV (reported, not fatal).
//
//   routines_test [--no-mops] [--quick] [--dczid-only]
//
// Prints one line per routine and "N passed, N failed"; exits 1 on failure.
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef HWCAP2_MOPS
#define HWCAP2_MOPS (1UL << 43)
#endif

#define PAGE 4096UL
#define MIB (1UL << 20)
#define GUARD 256UL

uint64_t call_checked(void *fn, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t *bad);

#define DECL_CLEAR(v)                                                          \
    extern char __pi_clear_page_##v[], __pi_clear_pages_##v[];
DECL_CLEAR(mops)
DECL_CLEAR(dczva)
DECL_CLEAR(stnp)
DECL_CLEAR(stp)
extern char __pi_memset_mops[], __pi_memset_generic[];
extern char __pi_memcpy_mops[], __pi_memcpy_generic[];
extern char __pi_copy_page_mops[], __pi_copy_page_ldp_stnp[], __pi_copy_page_ldp_stnp_prfm[];
extern char selftest_short[], selftest_overrun[], selftest_wrong_value[];
extern char selftest_clobber[], selftest_stack[], selftest_bad_return[];

static int quick;
// Harness self-check mode: failures are expected, not printed, and a test
// "passes" only if it detected at least one.
static int expect_failures;
// Set while the broken selftest routines run: they test the harness, not a
// routine, so --quick gives them the few offsets it gives big sizes.
static int harness_run;
static unsigned long passed, failed;
static unsigned long calls;

// ---------------------------------------------------------------- buffers
// One mapping: [PROT_NONE page][data: DATA bytes][PROT_NONE page].
#define DATA (6 * MIB)
static uint8_t *data;

static void map_buffers(void)
{
    uint8_t *m = mmap(NULL, DATA + 2 * PAGE, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    mprotect(m, PAGE, PROT_NONE);
    mprotect(m + PAGE + DATA, PAGE, PROT_NONE);
    data = m + PAGE;
}

static sigjmp_buf jump;
static volatile sig_atomic_t in_call;
static volatile uintptr_t fault_addr;

static void on_segv(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    if (!in_call) {
        signal(sig, SIG_DFL);
        raise(sig);
    }
    fault_addr = (uintptr_t)si->si_addr;
    siglongjmp(jump, 1);
}

// Pattern byte for address a (never 0, never 0xa5/0xff/0x5a fill values).
static inline uint8_t pat(uintptr_t a, uint8_t salt)
{
    uint8_t b = (uint8_t)((a * 0x9e37u) >> 7) ^ salt;
    if (b == 0 || b == 0xa5 || b == 0xff || b == 0x5a || b == 0x01)
        b = 0x3c;
    return b;
}

static void fill_pat(uint8_t *p, size_t n, uint8_t salt)
{
    for (size_t i = 0; i < n; i++)
        p[i] = pat((uintptr_t)(p + i), salt);
}

// First index in [p, p+n) that is not pattern(salt), or -1.
static long check_pat(const uint8_t *p, size_t n, uint8_t salt)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != pat((uintptr_t)(p + i), salt))
            return (long)i;
    return -1;
}

static long check_byte(const uint8_t *p, size_t n, uint8_t v)
{
    size_t i = 0;
    uint64_t w = v * 0x0101010101010101ULL;
    for (; i < n && ((uintptr_t)(p + i) & 7); i++)
        if (p[i] != v)
            return (long)i;
    for (; i + 8 <= n; i += 8)
        if (*(const uint64_t *)(p + i) != w)
            break;
    for (; i < n; i++)
        if (p[i] != v)
            return (long)i;
    return -1;
}

// ------------------------------------------------------------ reporting
struct result {
    const char *name;
    unsigned long cases, bad;
};

static void fail(struct result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void fail(struct result *r, const char *fmt, ...)
{
    va_list ap;
    r->bad++;
    if (r->bad <= 10 && !expect_failures) {
        printf("  FAIL %s: ", r->name);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
    }
}

static void report(struct result *r)
{
    int ok = expect_failures ? r->bad > 0 : r->bad == 0;
    printf("%-28s %8lu cases  %s", r->name, r->cases, ok ? "ok" : "FAILED");
    if (expect_failures)
        printf(" (%lu failures detected, as expected)", r->bad);
    printf("\n");
    if (ok)
        passed++;
    else
        failed++;
}

// Call with fault protection. Returns 0 on fault (and records it).
static int call(struct result *r, void *fn, uint64_t a0, uint64_t a1, uint64_t a2,
                uint64_t *ret, const char *what)
{
    uint64_t bad = 0;
    calls++;
    r->cases++;
    if (sigsetjmp(jump, 1)) {
        in_call = 0;
        fail(r, "%s: SIGSEGV at %#lx", what, (unsigned long)fault_addr);
        return 0;
    }
    in_call = 1;
    *ret = call_checked(fn, a0, a1, a2, &bad);
    in_call = 0;
    if (bad) {
        fail(r, "%s: registers not preserved (mask %#lx)", what, (unsigned long)bad);
        return 0;
    }
    return 1;
}

// ----------------------------------------------------------------- sizes
static size_t sizes[1024];
static int nsizes;

static void make_sizes(void)
{
    nsizes = 0;
    for (size_t n = 0; n <= 300; n++)
        sizes[nsizes++] = n;
    size_t extra[] = {511, 512, 513, 1023, 1024, 1025, 2047, 2048, 2049,
                      4095, 4096, 4097, 8191, 8192, 8193, 65535, 65536, 65537,
                      2 * MIB - 1, 2 * MIB, 2 * MIB + 1};
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++)
        sizes[nsizes++] = extra[i];
    srand(12345);
    for (int i = 0; i < 40; i++)
        sizes[nsizes++] = 301 + (size_t)rand() % 20000;
}

// ------------------------------------------------------------ memset-like
// kind: 0 correct memset, 1 short by one, 2 one over, 3 byte n/2 inverted.
static void test_memset(const char *name, void *fn, int kind)
{
    struct result r = {name, 0, 0};
    const int fills[] = {0, 0xa5, 0x1ff, 0x5a};
    for (int si = 0; si < nsizes; si++) {
        size_t n = sizes[si];
        int big = n > 300;
        int max_off = (quick && (big || harness_run)) ? 4 : 64;
        for (int off = 0; off < max_off; off++) {
            for (int fi = 0; fi < 4; fi++) {
                if (big && fi >= 2)
                    break;
                int c = fills[fi];
                uint8_t v = (uint8_t)c;
                // placement 0: middle with guards; 1: end at the PROT_NONE page
                for (int place = 0; place < 3; place++) {
                    uint8_t *dst;
                    if (place == 0)
                        dst = data + PAGE + off;
                    else if (place == 1)
                        dst = data + DATA - n - (kind == 2); // overrun writes n+1
                    else {
                        if (off != 0)
                            continue;
                        dst = data; // starts right after the PROT_NONE page
                    }
                    if (place == 1 && off != 0)
                        continue;
                    size_t lo = place == 0 ? GUARD : 0, hi = place == 0 ? GUARD : 0;
                    uint8_t *start = dst - lo;
                    size_t span = lo + n + hi + (kind == 2 && place == 1);
                    fill_pat(start, span, 0x11);
                    uint64_t ret;
                    char what[96];
                    snprintf(what, sizeof what, "n=%zu off=%d c=%#x place=%d", n, off, c, place);
                    if (!call(&r, fn, (uint64_t)dst, (uint64_t)c, n, &ret, what))
                        continue;
                    if (ret != (uint64_t)dst)
                        fail(&r, "%s: returned %#lx, expected dst %p", what, (unsigned long)ret, dst);
                    long e;
                    size_t written = kind == 1 ? (n ? n - 1 : 0) : kind == 2 ? n + 1 : n;
                    size_t first = kind == 3 && n ? n / 2 : written;
                    if ((e = check_byte(dst, first, v)) >= 0)
                        fail(&r, "%s: byte %ld is %#x, expected %#x", what, e, dst[e], v);
                    if (kind == 3 && n) {
                        unsigned inv = v ^ 0xffu;
                        if (dst[n / 2] != inv)
                            fail(&r, "%s: byte n/2 is %#x, expected %#x", what, dst[n / 2], inv);
                        if ((e = check_byte(dst + n / 2 + 1, n - n / 2 - 1, v)) >= 0)
                            fail(&r, "%s: byte %ld is wrong", what, (long)(n / 2 + 1 + e));
                    }
                    if ((e = check_pat(start, lo, 0x11)) >= 0)
                        fail(&r, "%s: guard byte %ld before dst changed", what, e - (long)lo);
                    long tail = (long)(n + hi) - (long)written;
                    if (tail > 0 && (e = check_pat(dst + written, (size_t)tail, 0x11)) >= 0)
                        fail(&r, "%s: byte %ld after the expected end changed", what, (long)written + e);
                }
            }
        }
    }
    report(&r);
}

// ---------------------------------------------------------------- memcpy
static void test_memcpy(const char *name, void *fn)
{
    struct result r = {name, 0, 0};
    static const int src_offs_small[] = {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 48, 63};
    static const int src_offs_big[] = {0, 5, 33};
    uint8_t *src_area = data + 3 * MIB; // [3 MiB, 6 MiB) of the buffer
    for (int si = 0; si < nsizes; si++) {
        size_t n = sizes[si];
        int big = n > 300;
        const int *so = big ? src_offs_big : src_offs_small;
        int nso = big ? 3 : (int)(sizeof src_offs_small / sizeof src_offs_small[0]);
        int max_off = (quick && big) ? 4 : 64;
        if (n > 2 * MIB - 64 && !quick)
            max_off = 16;
        for (int off = 0; off < max_off; off++) {
            for (int s = 0; s < nso; s++) {
                for (int place = 0; place < 3; place++) {
                    uint8_t *dst, *src;
                    if (place == 0) {
                        dst = data + PAGE + off;
                        src = src_area + PAGE + so[s];
                    } else if (place == 1) {
                        // both end at a PROT_NONE page: dst at the end of the
                        // buffer, src just below dst's guard area is not
                        // possible, so only the source ends at the page.
                        if (off || s)
                            continue;
                        src = data + DATA - n;
                        dst = data + PAGE;
                    } else {
                        if (off || s)
                            continue;
                        src = data; // starts right after a PROT_NONE page
                        dst = src_area + PAGE;
                    }
                    if (n > 2 * MIB + 64 && place == 1)
                        continue; // would overlap dst
                    fill_pat(dst - GUARD, n + 2 * GUARD, 0x22);
                    fill_pat(src, n, 0x33);
                    uint64_t ret;
                    char what[96];
                    snprintf(what, sizeof what, "n=%zu dst_off=%d src_off=%d place=%d", n, off, place ? 0 : so[s], place);
                    if (!call(&r, fn, (uint64_t)dst, (uint64_t)src, n, &ret, what))
                        continue;
                    if (ret != (uint64_t)dst)
                        fail(&r, "%s: returned %#lx, expected dst", what, (unsigned long)ret);
                    if (memcmp(dst, src, n)) {
                        size_t i = 0;
                        while (dst[i] == src[i])
                            i++;
                        fail(&r, "%s: byte %zu differs", what, i);
                    }
                    long e;
                    if ((e = check_pat(src, n, 0x33)) >= 0)
                        fail(&r, "%s: source byte %ld changed", what, e);
                    if ((e = check_pat(dst - GUARD, GUARD, 0x22)) >= 0)
                        fail(&r, "%s: guard byte %ld before dst changed", what, e - (long)GUARD);
                    if ((e = check_pat(dst + n, GUARD, 0x22)) >= 0)
                        fail(&r, "%s: byte %ld after dst changed (overrun)", what, e);
                }
            }
        }
    }
    report(&r);
}

// --------------------------------------------------------------- memmove
// The kernel's arm64 memcpy is also memmove: overlapping buffers, dst above
// src (backward copy for n > 128) and below it (forward), for every size
// class boundary (16, 32, 64, 96, 128) and a few distances. The expected
// result comes from the C library's memmove on a copy of the area.
static void test_memmove(const char *name, void *fn)
{
    struct result r = {name, 0, 0};
    static const size_t dists[] = {1, 2, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 200};
    static uint8_t want[128 * 1024];
    uint8_t *area = data + PAGE;
    for (int si = 0; si < nsizes; si++) {
        size_t n = sizes[si];
        if (n > 40000)
            continue;
        int max_off = (quick && n > 300) ? 2 : 16;
        for (int off = 0; off < max_off; off++) {
            for (size_t di = 0; di < sizeof dists / sizeof dists[0]; di++) {
                size_t d = dists[di];
                if (d > n + 1 && d != 1)
                    continue; // no overlap: covered by test_memcpy
                for (int up = 0; up < 2; up++) {
                    uint8_t *lo = area + GUARD + off;
                    uint8_t *src = up ? lo : lo + d, *dst = up ? lo + d : lo;
                    size_t span = GUARD + d + n + GUARD;
                    fill_pat(area, span + off, 0x77);
                    memcpy(want, area, span + off);
                    memmove(want + (dst - area), want + (src - area), n);
                    uint64_t ret;
                    char what[96];
                    snprintf(what, sizeof what, "n=%zu off=%d dst=src%c%zu", n, off, up ? '+' : '-', d);
                    if (!call(&r, fn, (uint64_t)dst, (uint64_t)src, n, &ret, what))
                        continue;
                    if (ret != (uint64_t)dst)
                        fail(&r, "%s: returned %#lx, expected dst", what, (unsigned long)ret);
                    if (memcmp(area, want, span + off)) {
                        size_t i = 0;
                        while (area[i] == want[i])
                            i++;
                        fail(&r, "%s: byte %ld (from dst) is %#x, expected %#x", what,
                             (long)(area + i - dst), area[i], want[i]);
                    }
                }
            }
        }
    }
    report(&r);
}

// ----------------------------------------------------- clear_page(s)
static void test_clear(const char *name, void *page_fn, void *pages_fn)
{
    struct result r = {name, 0, 0};
    const size_t counts[] = {0, 1, 2, 3, 7, 16, 17, 255, 512, 513};
    for (int single = 0; single < 2; single++) {
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
            size_t np = single ? 1 : counts[ci];
            if (single && ci > 0)
                break;
            for (int place = 0; place < 3; place++) {
                uint8_t *dst = place == 0 ? data + 4 * PAGE + (ci & 3) * PAGE
                             : place == 1 ? data + DATA - np * PAGE
                                          : data;
                size_t lo = place == 0 ? PAGE : 0, hi = place == 0 ? PAGE : 0;
                fill_pat(dst - lo, lo + np * PAGE + hi, 0x44);
                uint64_t ret;
                char what[96];
                snprintf(what, sizeof what, "%s npages=%zu place=%d",
                         single ? "clear_page" : "clear_pages", np, place);
                if (!call(&r, single ? page_fn : pages_fn, (uint64_t)dst, np, 0xdead, &ret, what))
                    continue;
                long e;
                if ((e = check_byte(dst, np * PAGE, 0)) >= 0)
                    fail(&r, "%s: byte %ld not zero", what, e);
                if ((e = check_pat(dst - lo, lo, 0x44)) >= 0)
                    fail(&r, "%s: byte before the pages changed", what);
                if ((e = check_pat(dst + np * PAGE, hi, 0x44)) >= 0)
                    fail(&r, "%s: byte %ld after the pages changed", what, e);
            }
        }
    }
    report(&r);
}

static void test_copy_page(const char *name, void *fn)
{
    struct result r = {name, 0, 0};
    for (int place = 0; place < 4; place++) {
        uint8_t *dst, *src;
        switch (place) {
        case 0: dst = data + 4 * PAGE; src = data + 10 * PAGE; break;
        case 1: dst = data + 10 * PAGE; src = data + 4 * PAGE; break;
        case 2: dst = data + 4 * PAGE; src = data + DATA - PAGE; break; // src before PROT_NONE
        default: dst = data + DATA - PAGE; src = data; break;
        }
        size_t lo = place == 3 ? 0 : PAGE, hi = place == 3 ? 0 : PAGE;
        fill_pat(dst - lo, lo + PAGE + hi, 0x55);
        fill_pat(src, PAGE, 0x66);
        uint64_t ret;
        char what[64];
        snprintf(what, sizeof what, "place=%d", place);
        if (!call(&r, fn, (uint64_t)dst, (uint64_t)src, 0xdead, &ret, what))
            continue;
        if (memcmp(dst, src, PAGE))
            fail(&r, "%s: copy differs", what);
        long e;
        if ((e = check_pat(src, PAGE, 0x66)) >= 0)
            fail(&r, "%s: source changed", what);
        if ((e = check_pat(dst - lo, lo, 0x55)) >= 0 || (e = check_pat(dst + PAGE, hi, 0x55)) >= 0)
            fail(&r, "%s: byte outside the destination page changed", what);
    }
    report(&r);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    int mops = !!(getauxval(AT_HWCAP2) & HWCAP2_MOPS);
    // --dczid-only: just the routines whose path depends on DCZID_EL0
    // (memset's DC ZVA zero fill, clear_page's DC ZVA / STNP choice), for
    // the runs that differ from the first only in DCZID_EL0.
    int dczid_only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-mops"))
            mops = 0;
        else if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--dczid-only"))
            dczid_only = 1;
    }
    uint64_t dczid;
    __asm__ volatile("mrs %0, dczid_el0" : "=r"(dczid));
    printf("dczid_el0=%#lx (DZP=%lu, block %lu bytes), MOPS %s%s\n",
           (unsigned long)dczid, (unsigned long)(dczid >> 4) & 1,
           4UL << (dczid & 0xf), mops ? "yes" : "no",
#ifdef HYPCLEAR_TEST_DCZID
           ", routines built with a fixed DCZID_EL0 (fallback test)"
#else
           ""
#endif
    );
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    map_buffers();
    make_sizes();

    test_memset("memset_generic", __pi_memset_generic, 0);
    test_clear("clear_page_dczva", __pi_clear_page_dczva, __pi_clear_pages_dczva);
    if (dczid_only) {
        printf("%lu calls (DCZID_EL0-dependent routines only)\n%lu passed, %lu failed\n",
               calls, passed, failed);
        return failed ? 1 : 0;
    }
    if (mops)
        test_memset("memset_mops", __pi_memset_mops, 0);
    test_memcpy("memcpy_generic", __pi_memcpy_generic);
    test_memmove("memcpy_generic (memmove)", __pi_memcpy_generic);
    if (mops)
        test_memcpy("memcpy_mops", __pi_memcpy_mops);
    test_clear("clear_page_stnp", __pi_clear_page_stnp, __pi_clear_pages_stnp);
    test_clear("clear_page_stp", __pi_clear_page_stp, __pi_clear_pages_stp);
    if (mops)
        test_clear("clear_page_mops", __pi_clear_page_mops, __pi_clear_pages_mops);
    test_copy_page("copy_page_ldp_stnp", __pi_copy_page_ldp_stnp);
    test_copy_page("copy_page_ldp_stnp_prfm", __pi_copy_page_ldp_stnp_prfm);
    if (mops)
        test_copy_page("copy_page_mops", __pi_copy_page_mops);
    // The selftest routines must be broken exactly as documented.
    harness_run = 1;
    test_memset("selftest_short (expect)", selftest_short, 1);
    test_memset("selftest_overrun (expect)", selftest_overrun, 2);
    test_memset("selftest_wrong_value (expect)", selftest_wrong_value, 3);

    // Harness self-check: each broken routine, tested as if it were a
    // correct memset, must be caught.
    expect_failures = 1;
    test_memset("harness catches short", selftest_short, 0);
    test_memset("harness catches overrun", selftest_overrun, 0);
    test_memset("harness catches wrong value", selftest_wrong_value, 0);
    // Every byte right, the call contract broken (x18, SP, x0).
    test_memset("harness catches clobber", selftest_clobber, 0);
    test_memset("harness catches stack", selftest_stack, 0);
    test_memset("harness catches bad return", selftest_bad_return, 0);
    expect_failures = 0;
    harness_run = 0;

    printf("%lu calls\n%lu passed, %lu failed\n", calls, passed, failed);
    return failed ? 1 : 0;
}
