// hc-kvm-probe: tiny static aarch64 program proving that the QEMU-emulated
// arm64 host gives us a working KVM (in whatever mode the kernel booted in)
// and showing what EL0 sees of the CPU.
//
//   hc-kvm-probe [--require-mops]
//
// Part 1 (informational, EL0): MIDR_EL1 (sysfs), DCZID_EL0 (mrs),
//   ID_AA64ISAR2_EL1 (mrs, emulated by the kernel), AT_HWCAP/AT_HWCAP2 and
//   HWCAP2_MOPS; if MOPS is advertised, runs a SETP/SETM/SETE memset.
// Part 2 (must pass): /dev/kvm, KVM_GET_API_VERSION == 12, capabilities,
//   KVM_CREATE_VM, KVM_CREATE_VCPU, KVM_ARM_PREFERRED_TARGET,
//   KVM_ARM_VCPU_INIT (+PSCI 0.2), KVM_SET_ONE_REG(PC), then KVM_RUN of a
//   10-instruction guest that does an MMIO write, an MMIO read (whose value
//   is checked in a second MMIO write) and PSCI SYSTEM_OFF via HVC.
// Prints "HC-PROBE: PASS" and exits 0 on success, exits 1 otherwise.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <linux/kvm.h>

#ifndef HWCAP2_MOPS
#define HWCAP2_MOPS (1UL << 43) // uapi/asm/hwcap.h since Linux 6.5
#endif

#define GUEST_RAM_GPA 0x40000000ULL
#define GUEST_RAM_SIZE 0x10000ULL // 64 KiB: fine for 4K/16K/64K host pages
#define GUEST_MMIO_GPA 0x10000000ULL // not backed by any memslot
#define MMIO_READ_VALUE 0xabcd0000ULL

// The guest: runs at EL1 with the MMU off, from GUEST_RAM_GPA.
__asm__(".section .rodata\n"
        ".balign 4\n"
        ".globl hc_guest_code, hc_guest_code_end\n"
        "hc_guest_code:\n"
        "  movz x0, #0x1234\n"
        "  movz x1, #0x1000, lsl #16\n" // x1 = GUEST_MMIO_GPA
        "  str  x0, [x1]\n"             // exit 1: MMIO write 0x1234 @+0
        "  ldr  x2, [x1, #8]\n"         // exit 2: MMIO read @+8
        "  add  x2, x2, #1\n"
        "  str  x2, [x1, #16]\n"        // exit 3: MMIO write (read+1) @+16
        "  movz w0, #0x0008\n"
        "  movk w0, #0x8400, lsl #16\n" // w0 = PSCI SYSTEM_OFF
        "  hvc  #0\n"                   // exit 4: KVM_EXIT_SYSTEM_EVENT
        "  b    .\n"
        "hc_guest_code_end:\n"
        ".text\n");
extern const uint8_t hc_guest_code[], hc_guest_code_end[];

static int failures;

#define FAIL(...)                                                              \
    do {                                                                       \
        printf("HC-PROBE FAIL: " __VA_ARGS__);                                 \
        printf("\n");                                                          \
        failures++;                                                            \
    } while (0)

static int xioctl(int fd, unsigned long req, void *arg, const char *name)
{
    int r = ioctl(fd, req, arg);
    if (r < 0)
        FAIL("%s: %s", name, strerror(errno));
    return r;
}

// ---------------------------------------------------------------- EL0 part
static void cpu_info(int require_mops)
{
    char buf[64] = "";
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/regs/identification/midr_el1", "r");
    if (f) {
        if (fgets(buf, sizeof buf, f))
            buf[strcspn(buf, "\n")] = 0;
        fclose(f);
    }
    unsigned long midr = strtoul(buf, NULL, 0);
    printf("HC-PROBE midr_el1=%s (implementer=0x%02lx variant=%lu part=0x%03lx rev=%lu)\n",
           buf[0] ? buf : "?", (midr >> 24) & 0xff, (midr >> 20) & 0xf,
           (midr >> 4) & 0xfff, midr & 0xf);

    uint64_t dczid, isar2;
    __asm__ volatile("mrs %0, dczid_el0" : "=r"(dczid));
    __asm__ volatile("mrs %0, S3_0_C0_C6_2" : "=r"(isar2)); // ID_AA64ISAR2_EL1
    printf("HC-PROBE dczid_el0=0x%" PRIx64 " (DZP=%u block=%u bytes)\n", dczid,
           (unsigned)((dczid >> 4) & 1), 4u << (dczid & 0xf));
    printf("HC-PROBE id_aa64isar2_el1=0x%016" PRIx64 " (MOPS field=%u)\n", isar2,
           (unsigned)((isar2 >> 16) & 0xf));

    unsigned long hwcap = getauxval(AT_HWCAP), hwcap2 = getauxval(AT_HWCAP2);
    int mops = !!(hwcap2 & HWCAP2_MOPS);
    printf("HC-PROBE hwcap=0x%lx hwcap2=0x%lx HWCAP2_MOPS=%s\n", hwcap, hwcap2,
           mops ? "yes" : "no");
    if (mops) {
        uint8_t b[100];
        memset(b, 0, sizeof b);
        uint8_t *d = b + 3;
        uint64_t n = 77, v = 0x5a;
        __asm__ volatile(".arch_extension mops\n"
                         "setp [%0]!, %1!, %2\n"
                         "setm [%0]!, %1!, %2\n"
                         "sete [%0]!, %1!, %2\n"
                         : "+r"(d), "+r"(n)
                         : "r"(v)
                         : "memory");
        int ok = n == 0 && d == b + 80 && b[2] == 0 && b[3] == 0x5a && b[79] == 0x5a && b[80] == 0;
        printf("HC-PROBE mops SETP/SETM/SETE memset at EL0: %s\n", ok ? "ok" : "WRONG RESULT");
        if (!ok)
            FAIL("MOPS memset produced a wrong result");
    } else if (require_mops) {
        FAIL("--require-mops given but HWCAP2_MOPS is not advertised");
    }
}

// ----------------------------------------------------------------- KVM part
static uint64_t core_reg_id(size_t offset)
{
    return KVM_REG_ARM64 | KVM_REG_SIZE_U64 | KVM_REG_ARM_CORE | (offset / sizeof(uint32_t));
}

static int get_reg(int vcpu, uint64_t id, uint64_t *val)
{
    struct kvm_one_reg r = {.id = id, .addr = (uint64_t)(uintptr_t)val};
    return ioctl(vcpu, KVM_GET_ONE_REG, &r);
}

static void kvm_probe(void)
{
    int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
    if (kvm < 0) {
        FAIL("open /dev/kvm: %s", strerror(errno));
        return;
    }
    int api = ioctl(kvm, KVM_GET_API_VERSION, 0);
    printf("HC-PROBE KVM_GET_API_VERSION=%d\n", api);
    if (api != KVM_API_VERSION)
        FAIL("KVM API version %d, expected %d", api, KVM_API_VERSION);

    static const struct {
        const char *name;
        long cap;
    } caps[] = {
        {"KVM_CAP_ARM_VM_IPA_SIZE", KVM_CAP_ARM_VM_IPA_SIZE},
        {"KVM_CAP_NR_VCPUS", KVM_CAP_NR_VCPUS},
        {"KVM_CAP_MAX_VCPUS", KVM_CAP_MAX_VCPUS},
        {"KVM_CAP_ONE_REG", KVM_CAP_ONE_REG},
        {"KVM_CAP_ARM_PSCI_0_2", KVM_CAP_ARM_PSCI_0_2},
        {"KVM_CAP_ARM_PMU_V3", KVM_CAP_ARM_PMU_V3},
        {"KVM_CAP_ARM_EL1_32BIT", KVM_CAP_ARM_EL1_32BIT},
        {"KVM_CAP_ARM_SVE", KVM_CAP_ARM_SVE},
        {"KVM_CAP_ARM_PTRAUTH_ADDRESS", KVM_CAP_ARM_PTRAUTH_ADDRESS},
        {"KVM_CAP_ARM_MTE", KVM_CAP_ARM_MTE},
        {"KVM_CAP_ARM_NISV_TO_USER", KVM_CAP_ARM_NISV_TO_USER},
        {"KVM_CAP_IRQCHIP", KVM_CAP_IRQCHIP},
    };
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++)
        printf("HC-PROBE %s=%d\n", caps[i].name, ioctl(kvm, KVM_CHECK_EXTENSION, caps[i].cap));
    if (ioctl(kvm, KVM_CHECK_EXTENSION, KVM_CAP_ARM_VM_IPA_SIZE) < 32)
        FAIL("KVM_CAP_ARM_VM_IPA_SIZE < 32");

    int vm = ioctl(kvm, KVM_CREATE_VM, 0); // type 0: default 40-bit IPA
    if (vm < 0) {
        FAIL("KVM_CREATE_VM: %s", strerror(errno));
        return;
    }
    printf("HC-PROBE KVM_CREATE_VM ok (vm KVM_CAP_ARM_VM_IPA_SIZE=%d)\n",
           ioctl(vm, KVM_CHECK_EXTENSION, KVM_CAP_ARM_VM_IPA_SIZE));

    void *ram = mmap(NULL, GUEST_RAM_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ram == MAP_FAILED) {
        FAIL("mmap guest ram: %s", strerror(errno));
        return;
    }
    memcpy(ram, hc_guest_code, (size_t)(hc_guest_code_end - hc_guest_code));
    struct kvm_userspace_memory_region region = {
        .slot = 0,
        .guest_phys_addr = GUEST_RAM_GPA,
        .memory_size = GUEST_RAM_SIZE,
        .userspace_addr = (uint64_t)(uintptr_t)ram,
    };
    if (xioctl(vm, KVM_SET_USER_MEMORY_REGION, &region, "KVM_SET_USER_MEMORY_REGION") < 0)
        return;

    int vcpu = ioctl(vm, KVM_CREATE_VCPU, 0);
    if (vcpu < 0) {
        FAIL("KVM_CREATE_VCPU: %s", strerror(errno));
        return;
    }
    int mmap_size = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
    struct kvm_run *run = mmap(NULL, (size_t)mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu, 0);
    if (run == MAP_FAILED) {
        FAIL("mmap kvm_run: %s", strerror(errno));
        return;
    }

    struct kvm_vcpu_init init;
    memset(&init, 0, sizeof init);
    if (xioctl(vm, KVM_ARM_PREFERRED_TARGET, &init, "KVM_ARM_PREFERRED_TARGET") < 0)
        return;
    printf("HC-PROBE KVM_ARM_PREFERRED_TARGET target=%u\n", init.target);
    init.features[0] |= 1u << KVM_ARM_VCPU_PSCI_0_2;
    if (xioctl(vcpu, KVM_ARM_VCPU_INIT, &init, "KVM_ARM_VCPU_INIT") < 0)
        return;
    printf("HC-PROBE KVM_ARM_VCPU_INIT ok\n");

    uint64_t pc = GUEST_RAM_GPA;
    struct kvm_one_reg pc_reg = {.id = core_reg_id(offsetof(struct kvm_regs, regs.pc)),
                                 .addr = (uint64_t)(uintptr_t)&pc};
    if (xioctl(vcpu, KVM_SET_ONE_REG, &pc_reg, "KVM_SET_ONE_REG(pc)") < 0)
        return;
    uint64_t vmidr = 0;
    if (get_reg(vcpu, ARM64_SYS_REG(3, 0, 0, 0, 0), &vmidr) == 0)
        printf("HC-PROBE guest-visible MIDR_EL1=0x%" PRIx64 "\n", vmidr);

    // Expected exit sequence.
    int step = 0;
    for (int iter = 0; iter < 16 && step < 4; iter++) {
        if (ioctl(vcpu, KVM_RUN, 0) < 0) {
            if (errno == EINTR)
                continue;
            FAIL("KVM_RUN: %s (step %d)", strerror(errno), step);
            break;
        }
        uint64_t data = 0;
        if (run->exit_reason == KVM_EXIT_MMIO)
            memcpy(&data, run->mmio.data, run->mmio.len <= 8 ? run->mmio.len : 8);
        switch (step) {
        case 0:
        case 2: {
            uint64_t want_addr = GUEST_MMIO_GPA + (step == 0 ? 0 : 16);
            uint64_t want_data = step == 0 ? 0x1234 : MMIO_READ_VALUE + 1;
            if (run->exit_reason != KVM_EXIT_MMIO || !run->mmio.is_write ||
                run->mmio.phys_addr != want_addr || run->mmio.len != 8 || data != want_data)
                goto unexpected;
            printf("HC-PROBE KVM_RUN exit %d: MMIO write addr=0x%llx len=%u data=0x%" PRIx64 " ok\n",
                   step + 1, (unsigned long long)run->mmio.phys_addr, run->mmio.len, data);
            break;
        }
        case 1: {
            if (run->exit_reason != KVM_EXIT_MMIO || run->mmio.is_write ||
                run->mmio.phys_addr != GUEST_MMIO_GPA + 8 || run->mmio.len != 8)
                goto unexpected;
            uint64_t v = MMIO_READ_VALUE;
            memcpy(run->mmio.data, &v, 8);
            printf("HC-PROBE KVM_RUN exit 2: MMIO read addr=0x%llx len=%u -> 0x%llx ok\n",
                   (unsigned long long)run->mmio.phys_addr, run->mmio.len, MMIO_READ_VALUE);
            break;
        }
        case 3:
            if (run->exit_reason != KVM_EXIT_SYSTEM_EVENT ||
                run->system_event.type != KVM_SYSTEM_EVENT_SHUTDOWN)
                goto unexpected;
            printf("HC-PROBE KVM_RUN exit 4: SYSTEM_EVENT shutdown (PSCI SYSTEM_OFF via HVC) ok\n");
            break;
        }
        step++;
        continue;
    unexpected:
        pc = 0;
        get_reg(vcpu, core_reg_id(offsetof(struct kvm_regs, regs.pc)), &pc);
        FAIL("unexpected exit at step %d: exit_reason=%u pc=0x%" PRIx64
             " (mmio addr=0x%llx len=%u write=%u data=0x%" PRIx64 ")",
             step, run->exit_reason, pc, (unsigned long long)run->mmio.phys_addr,
             run->mmio.len, run->mmio.is_write, data);
        break;
    }
    if (step == 4)
        printf("HC-PROBE KVM_RUN + MMIO exits + PSCI: ok\n");
    else if (!failures)
        FAIL("guest did not complete (step %d)", step);
}

int main(int argc, char **argv)
{
    int require_mops = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--require-mops")) {
            require_mops = 1;
        } else {
            fprintf(stderr, "usage: %s [--require-mops]\n", argv[0]);
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    alarm(30); // a wedged KVM_RUN must not hang the boot (SIGALRM kills us)

    cpu_info(require_mops);
    kvm_probe();

    printf("HC-PROBE: %s (%d failure%s)\n", failures ? "FAIL" : "PASS", failures,
           failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}
