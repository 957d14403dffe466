/* SPDX-License-Identifier: MIT */
/*
 * The machine's floor for hypclear's first-hypercall latency, for
 * ci/self-bench.sh: the least a KVM user can do before its guest's first
 * exit, timed from this program's main() as hypclear times its own first
 * hypercall from its main(). Open /dev/kvm, KVM_CREATE_VM, map and register
 * one memslot of the size given (bytes; hypclear's guest RAM), one vCPU, and
 * KVM_RUN into a guest of a few instructions that exits to the host at once
 * (x86_64: real mode, `out`; arm64: a store to an address no memslot backs,
 * an MMIO exit). No CPUID table, no page tables, no blob: what is left of
 * hypclear's figure above this one is its own work.
 *
 * Prints one line: "<total ms> create_vm <ms> memslot <ms> vcpu <ms>
 * run <ms>"; exits non-zero, with the failing step, if any step fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int fail(const char *what)
{
	fprintf(stderr, "kvm-floor: %s failed: %s\n", what, strerror(errno));
	return 1;
}

#if defined(__x86_64__)
#define RAM_GPA 0x1000ULL
/* mov dx, 0x3f8; mov al, 'a'; out dx, al; hlt */
static const unsigned char code[] = { 0xba, 0xf8, 0x03, 0xb0, 'a', 0xee, 0xf4 };
#define EXIT_WANTED KVM_EXIT_IO

static int setup_vcpu(int vm, int vcpu)
{
	struct kvm_sregs s;
	struct kvm_regs r = { .rip = RAM_GPA, .rflags = 2 };

	(void)vm;
	if (ioctl(vcpu, KVM_GET_SREGS, &s) < 0)
		return fail("KVM_GET_SREGS");
	s.cs.base = 0;
	s.cs.selector = 0;
	if (ioctl(vcpu, KVM_SET_SREGS, &s) < 0)
		return fail("KVM_SET_SREGS");
	if (ioctl(vcpu, KVM_SET_REGS, &r) < 0)
		return fail("KVM_SET_REGS");
	return 0;
}
#elif defined(__aarch64__)
#define RAM_GPA 0x40000000ULL
/* str x0, [x1] with x1 = 0x10000, an address no memslot backs; then b . */
static const unsigned char code[] = { 0x20, 0x00, 0x00, 0xf9, 0x00, 0x00, 0x00, 0x14 };
#define EXIT_WANTED KVM_EXIT_MMIO

static int set_core(int vcpu, size_t off, unsigned long long v)
{
	struct kvm_one_reg reg = {
		.id = KVM_REG_ARM64 | KVM_REG_SIZE_U64 | KVM_REG_ARM_CORE |
		      (off / sizeof(__u32)),
		.addr = (unsigned long)&v,
	};

	return ioctl(vcpu, KVM_SET_ONE_REG, &reg);
}

static int setup_vcpu(int vm, int vcpu)
{
	struct kvm_vcpu_init init;

	if (ioctl(vm, KVM_ARM_PREFERRED_TARGET, &init) < 0)
		return fail("KVM_ARM_PREFERRED_TARGET");
	if (ioctl(vcpu, KVM_ARM_VCPU_INIT, &init) < 0)
		return fail("KVM_ARM_VCPU_INIT");
	if (set_core(vcpu, offsetof(struct kvm_regs, regs.pc), RAM_GPA) < 0)
		return fail("KVM_SET_ONE_REG pc");
	if (set_core(vcpu, offsetof(struct kvm_regs, regs.regs[1]), 0x10000) < 0)
		return fail("KVM_SET_ONE_REG x1");
	return 0;
}
#else
#error "kvm-floor: x86_64 and arm64 only, as hypclear"
#endif

int main(int argc, char **argv)
{
	double t0 = now_ms(), t1, t2, t3, t4;
	size_t size = argc > 1 ? strtoull(argv[1], NULL, 0) : (256u << 20);
	struct kvm_userspace_memory_region region;
	struct kvm_run *run;
	unsigned char *ram;
	int kvm, vm, vcpu, run_size;

	kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0)
		return fail("open /dev/kvm");
	vm = ioctl(kvm, KVM_CREATE_VM, 0);
	if (vm < 0)
		return fail("KVM_CREATE_VM");
	t1 = now_ms();
	/* Anonymous and not populated, as hypclear's default --backing anon. */
	ram = mmap(NULL, size, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (ram == MAP_FAILED)
		return fail("mmap guest RAM");
	memcpy(ram, code, sizeof(code));
	region = (struct kvm_userspace_memory_region){
		.slot = 0,
		.guest_phys_addr = RAM_GPA,
		.memory_size = size,
		.userspace_addr = (unsigned long)ram,
	};
	if (ioctl(vm, KVM_SET_USER_MEMORY_REGION, &region) < 0)
		return fail("KVM_SET_USER_MEMORY_REGION");
	t2 = now_ms();
	vcpu = ioctl(vm, KVM_CREATE_VCPU, 0);
	if (vcpu < 0)
		return fail("KVM_CREATE_VCPU");
	run_size = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (run_size < 0)
		return fail("KVM_GET_VCPU_MMAP_SIZE");
	run = mmap(NULL, run_size, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu, 0);
	if (run == MAP_FAILED)
		return fail("mmap kvm_run");
	if (setup_vcpu(vm, vcpu))
		return 1;
	t3 = now_ms();
	if (ioctl(vcpu, KVM_RUN, 0) < 0)
		return fail("KVM_RUN");
	t4 = now_ms();
	if (run->exit_reason != EXIT_WANTED) {
		fprintf(stderr, "kvm-floor: first exit was %u, not %u\n",
			run->exit_reason, EXIT_WANTED);
		return 1;
	}
	printf("%.3f create_vm %.3f memslot %.3f vcpu %.3f run %.3f\n",
	       t4 - t0, t1 - t0, t2 - t1, t3 - t2, t4 - t3);
	return 0;
}
