//! aarch64 VM and vCPU setup against KVM, register dumps and exception
//! decoding.
//!
//! The vCPU starts with the MMU already on: the host writes stage-1 tables
//! (see `paging`), and programs SCTLR_EL1/TCR_EL1/MAIR_EL1/TTBR0_EL1,
//! VBAR_EL1 (the blob's vectors), TPIDRRO_EL0 (the mailbox), CNTKCTL_EL1,
//! SP and PSTATE (EL1h or EL0t, DAIF masked) with KVM_SET_ONE_REG after
//! KVM_ARM_VCPU_INIT. With the MMU off every access would be Device memory,
//! where DC ZVA and unaligned accesses fault on real hardware.
//!
//! At EL2 (`Privilege::Hyp`, nested virtualization) the vCPU is made with
//! KVM_ARM_VCPU_HAS_EL2 | HAS_EL2_E2H0 (a non-VHE guest hypervisor, as the
//! nVHE hyp runs) and starts at EL2h with the MMU off in the blob's
//! `hyp_el2_init` (at its guest-physical address: the EL2 tables map that
//! page there too, the idmap), which programs MAIR/TCR/TTBR0/HCR/VBAR/
//! SCTLR_EL2 from the values the host puts in x0-x5 and jumps to the hyp VA
//! by x6 (see guest/aarch64/entry.S). KVM needs
//! an in-kernel vGICv3 for such a vCPU (without one the first KVM_RUN fails
//! with EAGAIN, kvm_vgic_vcpu_nv_init), so `setup_vm` creates one.
use super::error::{Error, Result};
use super::layout::*;
use super::paging;
use super::sysregs::{self as sr};
use crate::Privilege;
use crate::{CpuCaps, KvmFlavour, PagingMode};
use crate::{HypSupport, Loaded, RamAccess};
use hypclear_abi as abi;
use kvm_bindings::{KVM_ARM_VCPU_PSCI_0_2, kvm_vcpu_init};
use kvm_ioctls::{DeviceFd, Kvm, VcpuFd, VmFd};

/// The blob's load address must be a multiple of this (2 MiB: the arm64
/// Image boot protocol, enforced by linux-loader's PE loader).
pub use super::layout::BLOB_ALIGN as LOAD_ALIGN;
pub use super::layout::{
    ARENA_BASE, BLOB_WINDOW, BLOB_WINDOW_END, EDGE_REGION, MAX_RAM, MIN_RAM, RAM_ALIGN, RAM_BASE,
    edge_hole, guest_pa, guest_va, harness_areas, mailbox_gpa,
};
/// Where the contract's `create_vm` lives on x86_64; here a protected VM
/// needs its own type.
pub use super::protected::create_vm;

/// Name of the guest timestamp counter.
pub const COUNTER_NAME: &str = "CNTVCT_EL0";

/// The exception class `describe_exception` reports for an undefined
/// instruction (aarch64: ESR_EL1.EC 0x00, "unknown reason").
pub const UNDEFINED_INSTRUCTION_CLASS: u64 = 0x00;

/// Harness areas a hostile guest may try to corrupt (`selftest
/// --hostile`): the root page table and the exception vectors the guest
/// at `privilege` uses, as (name, guest-virtual address, bytes).
pub fn corruptible_areas(
    loaded: &Loaded,
    mem: &MemoryState,
    privilege: Privilege,
) -> [(&'static str, u64, u64); 2] {
    match (privilege, loaded.hyp) {
        (Privilege::Hyp, Some(h)) => [
            (
                "TTBR0_EL2 page tables",
                guest_va(mem.hyp_root),
                abi::PAGE_SIZE,
            ),
            ("VBAR_EL2 vectors", h.vectors, 2048),
        ],
        (Privilege::User, _) => [
            ("page tables", guest_va(mem.user_root), abi::PAGE_SIZE),
            ("VBAR_EL1 vectors", loaded.vectors, 2048),
        ],
        _ => [
            ("page tables", guest_va(mem.kernel_root), abi::PAGE_SIZE),
            ("VBAR_EL1 vectors", loaded.vectors, 2048),
        ],
    }
}

/// Guest-physical addresses of the vGICv3 (only for guests at EL2): below
/// RAM, where nothing else is mapped; the redistributors take 128 KiB per
/// vCPU.
pub(crate) const GICD_GPA: u64 = 0x0800_0000;
pub(crate) const GICR_GPA: u64 = 0x080a_0000;
const _: () = assert!(GICR_GPA + abi::MAX_VCPUS * 0x2_0000 <= RAM_BASE);

/// In-kernel devices of a VM: the vGICv3 of a guest at EL2.
#[derive(Debug)]
pub struct VmState {
    gic: Option<DeviceFd>,
}

fn gic_attr(gic: &DeviceFd, group: u32, attr: u32, value: Option<u64>) -> Result<()> {
    let v = value.unwrap_or(0);
    let a = kvm_bindings::kvm_device_attr {
        group,
        attr: u64::from(attr),
        addr: if value.is_some() {
            std::ptr::addr_of!(v) as u64
        } else {
            0
        },
        flags: 0,
    };
    gic.set_device_attr(&a)
        .map_err(Error::kvm("KVM_SET_DEVICE_ATTR(vGICv3)"))
}

/// Extra KVM-level setup of a fresh VM: nothing at EL1/EL0 (no devices; the
/// default 40-bit IPA space holds RAM and the doorbell); for a guest at EL2
/// the vGICv3 nested virtualization needs, its distributor and
/// redistributors placed below RAM.
pub fn setup_vm(vm: &VmFd, privilege: Privilege) -> Result<VmState> {
    use kvm_bindings::{
        KVM_DEV_ARM_VGIC_GRP_ADDR, KVM_VGIC_V3_ADDR_TYPE_DIST, KVM_VGIC_V3_ADDR_TYPE_REDIST,
        kvm_device_type_KVM_DEV_TYPE_ARM_VGIC_V3 as VGIC_V3,
    };
    if privilege != Privilege::Hyp {
        return Ok(VmState { gic: None });
    }
    let mut dev = kvm_bindings::kvm_create_device {
        type_: VGIC_V3,
        fd: 0,
        flags: 0,
    };
    let gic = vm
        .create_device(&mut dev)
        .map_err(Error::kvm("KVM_CREATE_DEVICE(KVM_DEV_TYPE_ARM_VGIC_V3)"))?;
    let grp = KVM_DEV_ARM_VGIC_GRP_ADDR;
    gic_attr(&gic, grp, KVM_VGIC_V3_ADDR_TYPE_DIST, Some(GICD_GPA))?;
    gic_attr(&gic, grp, KVM_VGIC_V3_ADDR_TYPE_REDIST, Some(GICR_GPA))?;
    Ok(VmState { gic: Some(gic) })
}

/// After the last vCPU exists: KVM_DEV_ARM_VGIC_CTRL_INIT of the vGIC, if any.
pub fn finish_vm(state: &VmState) -> Result<()> {
    use kvm_bindings::{KVM_DEV_ARM_VGIC_CTRL_INIT, KVM_DEV_ARM_VGIC_GRP_CTRL};
    match &state.gic {
        Some(gic) => gic_attr(
            gic,
            KVM_DEV_ARM_VGIC_GRP_CTRL,
            KVM_DEV_ARM_VGIC_CTRL_INIT,
            None,
        ),
        None => Ok(()),
    }
}

/// Whether KVM can start vCPUs at EL2 as a non-VHE guest hypervisor: both
/// KVM_CAP_ARM_EL2 and KVM_CAP_ARM_EL2_E2H0; else what the host lacks.
pub fn hyp_support(kvm: &Kvm) -> HypSupport {
    let cap = |c: u64| kvm.check_extension_raw(c as libc::c_ulong) > 0;
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    super::decode::el2_support(
        cap(sr::KVM_CAP_ARM_EL2),
        cap(sr::KVM_CAP_ARM_EL2_E2H0),
        &cmdline,
        &kernel_log(),
        release.trim(),
    )
}

/// What vCPU setup needs from the memory setup.
#[derive(Debug, Clone, Copy)]
pub struct MemoryState {
    /// TTBR0_EL1 for routines at EL1 (`Privilege::Kernel`).
    pub kernel_root: u64,
    /// TTBR0_EL1 for routines at EL0 (`Privilege::User`).
    pub user_root: u64,
    /// TTBR0_EL2 for routines at EL2 (`Privilege::Hyp`; EL2 descriptor format).
    pub hyp_root: u64,
}

/// Write the three sets of stage-1 page tables (EL1, EL0 and EL2
/// permissions); the EL2 set also maps the first blob's EL2 init code at
/// its guest-physical address (the idmap it turns the MMU on in).
pub fn prepare_memory(ram: &impl RamAccess, _vcpus: u64, blobs: &[Loaded]) -> Result<MemoryState> {
    if ram.base() != RAM_BASE {
        return Err(Error::RamBase(ram.base()));
    }
    if let Some(b) = blobs
        .iter()
        .find(|b| b.base < BLOB_WINDOW || b.base >= BLOB_WINDOW_END)
    {
        return Err(Error::OutsideWindow(b.base));
    }
    if let Some(b) = blobs.first().filter(|b| !b.vectors.is_multiple_of(2048)) {
        return Err(Error::VectorsUnaligned(b.vectors));
    }
    let sections: Vec<_> = blobs.iter().map(|b| (b.base, b.sections)).collect();
    let regions = regions(ram.size(), &sections);
    let tables = |r: &[Region], p: Privilege, from: u64| {
        paging::map_regions(r, p, from, PAGE_TABLES_END).map_err(Error::PageTables)
    };
    let kernel = tables(&regions, Privilege::Kernel, PAGE_TABLES_GPA)?;
    let user = tables(&regions, Privilege::User, kernel.next_free())?;
    let mut hyp_regions = regions;
    if let Some(b) = blobs.first()
        && let Some(h) = b.hyp
    {
        hyp_regions.push(hyp_idmap(b.base + (h.entry - b.va)));
    }
    let hyp = tables(&hyp_regions, Privilege::Hyp, user.next_free())?;
    for pt in [&kernel, &user, &hyp] {
        for (gpa, table) in pt.tables() {
            ram.write_words(gpa, table)?;
        }
    }
    Ok(MemoryState {
        kernel_root: kernel.root,
        user_root: user.root,
        hyp_root: hyp.root,
    })
}

fn get_reg(fd: &VcpuFd, id: u64, op: &'static str) -> Result<u64> {
    let mut b = [0u8; 8];
    fd.get_one_reg(id, &mut b).map_err(Error::kvm(op))?;
    Ok(u64::from_le_bytes(b))
}

fn set_reg(fd: &VcpuFd, id: u64, v: u64, op: &'static str) -> Result<()> {
    fd.set_one_reg(id, &v.to_le_bytes())
        .map_err(Error::kvm(op))?;
    Ok(())
}

/// KVM_ARM_PREFERRED_TARGET + KVM_ARM_VCPU_INIT with PSCI 0.2 (and at EL2
/// HAS_EL2 | HAS_EL2_E2H0: features[0] = 0x184).
fn init_vcpu(vm: &VmFd, fd: &VcpuFd, privilege: Privilege) -> Result<()> {
    let mut kvi = kvm_vcpu_init::default();
    vm.get_preferred_target(&mut kvi)
        .map_err(Error::kvm("KVM_ARM_PREFERRED_TARGET"))?;
    kvi.features[0] |= 1 << KVM_ARM_VCPU_PSCI_0_2;
    if privilege == Privilege::Hyp {
        kvi.features[0] |= (1 << sr::VCPU_FEATURE_HAS_EL2) | (1 << sr::VCPU_FEATURE_HAS_EL2_E2H0);
        return fd
            .vcpu_init(&kvi)
            .map_err(Error::kvm("KVM_ARM_VCPU_INIT(HAS_EL2 | HAS_EL2_E2H0)"));
    }
    fd.vcpu_init(&kvi).map_err(Error::kvm("KVM_ARM_VCPU_INIT"))
}

/// The EL2 start: PSTATE EL2h with the MMU off, PC `hyp_el2_init` at its
/// guest-physical address (its idmap), x0-x5 the values it programs and
/// x6 the hyp VA's offset from guest-physical, which it jumps by once the
/// MMU is on (guest/aarch64/entry.S); TPIDRRO_EL0 the mailbox's VA.
fn setup_vcpu_el2(
    fd: &VcpuFd,
    id: u64,
    loaded: &Loaded,
    mem: &MemoryState,
    tcr: u64,
) -> Result<()> {
    let hyp = loaded.hyp.ok_or_else(|| Error::Unsupported {
        what: "a guest at EL2 with this blob",
        detail: "the blob has no hyp_el2_init / hyp_el2_vectors (made by an older hypclear, \
                 whose EL2 entry runs at its guest-physical address only): rebuild it with \
                 `hypclear blob`"
            .into(),
    })?;
    // Guest-physical to guest-virtual, for the blob as for all of RAM.
    let offset = loaded.va.wrapping_sub(loaded.base);
    let x: [(u64, &'static str); 7] = [
        (sr::mair_el1(), "KVM_SET_ONE_REG(x0: MAIR_EL2)"),
        (tcr, "KVM_SET_ONE_REG(x1: TCR_EL2)"),
        (mem.hyp_root, "KVM_SET_ONE_REG(x2: TTBR0_EL2)"),
        (sr::sctlr_el2(), "KVM_SET_ONE_REG(x3: SCTLR_EL2)"),
        (sr::hcr_el2(), "KVM_SET_ONE_REG(x4: HCR_EL2)"),
        (guest_va(stack_top(id)), "KVM_SET_ONE_REG(x5: SP_EL2)"),
        (offset, "KVM_SET_ONE_REG(x6: hyp VA offset)"),
    ];
    let regs = x
        .into_iter()
        .enumerate()
        .map(|(n, (v, op))| (sr::core_x(n as u64), v, op))
        .chain([
            (
                sr::TPIDRRO_EL0,
                guest_va(mailbox_gpa(id)),
                "KVM_SET_ONE_REG(TPIDRRO_EL0)",
            ),
            (
                sr::CORE_PSTATE,
                sr::pstate(Privilege::Hyp),
                "KVM_SET_ONE_REG(PSTATE)",
            ),
            // At its guest-physical address: the MMU is off.
            (
                sr::CORE_PC,
                hyp.entry.wrapping_sub(offset),
                "KVM_SET_ONE_REG(PC)",
            ),
        ]);
    for (reg, v, op) in regs {
        set_reg(fd, reg, v, op)?;
    }
    Ok(())
}

/// Put a vCPU at the blob's entry with the MMU on, at the chosen privilege.
pub fn setup_vcpu(
    _kvm: &Kvm,
    vm: &VmFd,
    fd: &VcpuFd,
    id: u64,
    loaded: &Loaded,
    mem: &MemoryState,
    privilege: Privilege,
) -> Result<()> {
    init_vcpu(vm, fd, privilege)?;
    let isar2 = get_reg(
        fd,
        sr::ID_AA64ISAR2_EL1,
        "KVM_GET_ONE_REG(ID_AA64ISAR2_EL1)",
    )?;
    let mmfr0 = get_reg(
        fd,
        sr::ID_AA64MMFR0_EL1,
        "KVM_GET_ONE_REG(ID_AA64MMFR0_EL1)",
    )?;
    let tcr = sr::tcr_el1(mmfr0, abi::DOORBELL_GPA + abi::PAGE_SIZE - 1).ok_or_else(|| {
        Error::Unsupported {
            what: "the hypclear guest layout",
            detail: format!(
                "ID_AA64MMFR0_EL1 {mmfr0:#x}: the CPU's physical address range does not reach \
                 the doorbell at {:#x}",
                abi::DOORBELL_GPA
            ),
        }
    })?;
    let root = match privilege {
        Privilege::Kernel => mem.kernel_root,
        Privilege::User => mem.user_root,
        Privilege::Hyp => {
            let tcr = sr::tcr_el2(mmfr0, abi::DOORBELL_GPA + abi::PAGE_SIZE - 1).unwrap_or(tcr);
            return setup_vcpu_el2(fd, id, loaded, mem, tcr);
        }
    };
    let sctlr = sr::sctlr_el1(privilege, sr::has_mops(isar2));
    setup_vcpu_el1(fd, id, loaded, privilege, [root, tcr, sctlr])
}

/// The EL1 and EL0 start: the EL1 regime's registers (`[TTBR0_EL1,
/// TCR_EL1, SCTLR_EL1]` from the caller), the stacks and the mailbox at
/// their hyp VAs, PSTATE EL1h or EL0t, PC the blob's entry.
fn setup_vcpu_el1(
    fd: &VcpuFd,
    id: u64,
    loaded: &Loaded,
    privilege: Privilege,
    [root, tcr, sctlr]: [u64; 3],
) -> Result<()> {
    let (sp_el1, sp_el0) = match privilege {
        Privilege::User => (exception_stack_top(id), guest_va(stack_top(id))),
        _ => (stack_top(id), 0),
    };
    let sysregs: [(u64, u64, &'static str); 12] = [
        (sr::MAIR_EL1, sr::mair_el1(), "KVM_SET_ONE_REG(MAIR_EL1)"),
        (sr::TCR_EL1, tcr, "KVM_SET_ONE_REG(TCR_EL1)"),
        (sr::TTBR0_EL1, root, "KVM_SET_ONE_REG(TTBR0_EL1)"),
        (sr::TTBR1_EL1, 0, "KVM_SET_ONE_REG(TTBR1_EL1)"),
        (sr::VBAR_EL1, loaded.vectors, "KVM_SET_ONE_REG(VBAR_EL1)"),
        (
            sr::TPIDRRO_EL0,
            guest_va(mailbox_gpa(id)),
            "KVM_SET_ONE_REG(TPIDRRO_EL0)",
        ),
        (
            sr::CNTKCTL_EL1,
            sr::cntkctl_el1(),
            "KVM_SET_ONE_REG(CNTKCTL_EL1)",
        ),
        // Last: the MMU goes on with everything else in place.
        (sr::SCTLR_EL1, sctlr, "KVM_SET_ONE_REG(SCTLR_EL1)"),
        (sr::CORE_SP_EL1, guest_va(sp_el1), "KVM_SET_ONE_REG(SP_EL1)"),
        (sr::CORE_SP_EL0, sp_el0, "KVM_SET_ONE_REG(SP_EL0)"),
        (
            sr::CORE_PSTATE,
            sr::pstate(privilege),
            "KVM_SET_ONE_REG(PSTATE)",
        ),
        (sr::CORE_PC, loaded.entry, "KVM_SET_ONE_REG(PC)"),
    ];
    for (reg, v, op) in sysregs {
        set_reg(fd, reg, v, op)?;
    }
    Ok(())
}

/// CNTFRQ_EL0 as the host sees it (the guest reads the same register).
fn cntfrq() -> u64 {
    let v: u64;
    // SAFETY: reading CNTFRQ_EL0 is always permitted at EL0 on Linux (the
    // kernel enables EL0 access to the virtual counter).
    unsafe { std::arch::asm!("mrs {}, cntfrq_el0", out(reg) v, options(nomem, nostack)) };
    v
}

/// DCZID_EL0 as the host sees it.
fn host_dczid() -> u64 {
    let v: u64;
    // SAFETY: DCZID_EL0 is readable at EL0.
    unsafe { std::arch::asm!("mrs {}, dczid_el0", out(reg) v, options(nomem, nostack)) };
    v
}

/// Guest timestamp counter (CNTVCT_EL0) frequency in kHz.
pub fn counter_khz(_fd: &VcpuFd) -> Result<u64> {
    let hz = cntfrq();
    if hz < 1000 {
        return Err(Error::Unsupported {
            what: "the generic timer",
            detail: format!("CNTFRQ_EL0 reads {hz} Hz"),
        });
    }
    Ok(hz / 1000)
}

/// Whether KVM has re-initialised the vCPU behind the guest's back: never
/// on arm64 (a guest that cannot go on stops with its registers intact).
pub fn reinitialised(_fd: &VcpuFd) -> bool {
    false
}

/// The guest's PC. At a doorbell exit it is the store itself: KVM steps
/// over an MMIO access at the next KVM_RUN, so it matches the ring site
/// the guest's `RING` lists.
pub fn pc(fd: &VcpuFd) -> Result<u64> {
    get_reg(fd, sr::CORE_PC, "KVM_GET_ONE_REG")
}

/// The guest's program counter and a register dump, if KVM can read them.
pub fn registers(fd: &VcpuFd) -> Option<(u64, String)> {
    let g = |id: u64| get_reg(fd, id, "KVM_GET_ONE_REG").ok();
    let pc = g(sr::CORE_PC)?;
    let pstate = g(sr::CORE_PSTATE).unwrap_or(0);
    let mut out = format!(
        "PC {pc:#018x} PSTATE {pstate:#010x} ({}) SP_EL0 {:#018x} SP_EL1 {:#018x}",
        sr::mode_name(pstate),
        g(sr::CORE_SP_EL0).unwrap_or(0),
        g(sr::CORE_SP_EL1).unwrap_or(0),
    );
    for row in 0..8u64 {
        out.push('\n');
        for col in 0..4u64 {
            let n = row * 4 + col;
            if n > 30 {
                break;
            }
            let v = g(sr::core_x(n)).unwrap_or(0);
            let name = format!("X{n}");
            out.push_str(&format!("{name:<3} {v:#018x}  "));
        }
        out.truncate(out.trim_end().len());
    }
    if pstate & 0xc == 0x8 {
        out.push_str(&el2_registers(&g));
    } else {
        out.push_str(&format!(
            "\nELR_EL1 {:#x} SPSR_EL1 {:#x} ESR_EL1 {:#x} FAR_EL1 {:#x}\n\
             SCTLR_EL1 {:#x} TCR_EL1 {:#x} TTBR0_EL1 {:#x} VBAR_EL1 {:#x}",
            g(sr::CORE_ELR_EL1).unwrap_or(0),
            g(sr::CORE_SPSR_EL1).unwrap_or(0),
            g(sr::ESR_EL1).unwrap_or(0),
            g(sr::FAR_EL1).unwrap_or(0),
            g(sr::SCTLR_EL1).unwrap_or(0),
            g(sr::TCR_EL1).unwrap_or(0),
            g(sr::TTBR0_EL1).unwrap_or(0),
            g(sr::VBAR_EL1).unwrap_or(0),
        ));
    }
    Some((pc, out))
}

/// The EL2 lines of a register dump (the vCPU stopped at EL2).
fn el2_registers(g: &dyn Fn(u64) -> Option<u64>) -> String {
    format!(
        "\nSP_EL2 {:#x} ELR_EL2 {:#x} SPSR_EL2 {:#x} ESR_EL2 {:#x} FAR_EL2 {:#x}\n\
         HCR_EL2 {:#x} SCTLR_EL2 {:#x} TCR_EL2 {:#x} TTBR0_EL2 {:#x} VBAR_EL2 {:#x}",
        g(sr::SP_EL2).unwrap_or(0),
        g(sr::ELR_EL2).unwrap_or(0),
        g(sr::SPSR_EL2).unwrap_or(0),
        g(sr::ESR_EL2).unwrap_or(0),
        g(sr::FAR_EL2).unwrap_or(0),
        g(sr::HCR_EL2).unwrap_or(0),
        g(sr::SCTLR_EL2).unwrap_or(0),
        g(sr::TCR_EL2).unwrap_or(0),
        g(sr::TTBR0_EL2).unwrap_or(0),
        g(sr::VBAR_EL2).unwrap_or(0),
    )
}

/// Explain a FAIL_EXCEPTION report (see `abi::MB_FAIL_D0..D5`): returns the
/// faulting PC (ELR_EL1), the exception class (ESR_EL1.EC) and a sentence.
pub fn describe_exception(d: [u64; 6], symbolize: &dyn Fn(u64) -> String) -> (u64, u64, String) {
    let x = super::decode::Exception::from_mailbox(d);
    let text = super::decode::describe(&x, &symbolize(x.elr));
    (x.elr, super::decode::ec(x.esr), text)
}

/// The address a FAIL_EXCEPTION report's instruction or data abort was
/// taken for (FAR_ELx), `None` for other exceptions.
pub fn fault_address(d: [u64; 6]) -> Option<u64> {
    let x = super::decode::Exception::from_mailbox(d);
    // Instruction aborts (0x20, 0x21) and data aborts (0x24, 0x25), from
    // a lower level or the same one: FAR_ELx holds the address.
    matches!(super::decode::ec(x.esr), 0x20 | 0x21 | 0x24 | 0x25).then_some(x.far)
}

/// ID registers as a vCPU sees them, read with KVM_GET_ONE_REG from a
/// scratch VM: (MIDR_EL1, ID_AA64ISAR2_EL1, ID_AA64MMFR0_EL1).
fn vcpu_id_regs(kvm: &Kvm) -> Option<(u64, u64, u64)> {
    let vm = kvm.create_vm().ok()?;
    let fd = vm.create_vcpu(0).ok()?;
    init_vcpu(&vm, &fd, Privilege::Kernel).ok()?;
    let g = |id| get_reg(&fd, id, "KVM_GET_ONE_REG").ok();
    Some((
        g(sr::MIDR_EL1)?,
        g(sr::ID_AA64ISAR2_EL1)?,
        g(sr::ID_AA64MMFR0_EL1)?,
    ))
}

/// Guest code of the MOPS probe, run at EL1h with the MMU off from
/// `RAM_BASE`, with x1 = the doorbell and x3 = a RAM address: a zero-length
/// SETP/SETM/SETE, then a store of 1 to the doorbell. The synchronous
/// exception vector (VBAR_EL1 = RAM_BASE + 0x800, entry +0x200) stores
/// ESR_EL1 to the doorbell instead.
const MOPS_PROBE_CODE: [u32; 8] = [
    0xd280_0000, // mov  x0, #0
    0xd280_0002, // mov  x2, #0
    0x19c2_0403, // setp [x3]!, x0!, x2
    0x19c2_4403, // setm [x3]!, x0!, x2
    0x19c2_8403, // sete [x3]!, x0!, x2
    0xd280_0024, // mov  x4, #1
    0xf900_0024, // str  x4, [x1]
    0x1400_0000, // b    .
];
const MOPS_PROBE_VECTOR: [u32; 3] = [
    0xd538_5204, // mrs  x4, esr_el1
    0xf900_0024, // str  x4, [x1]
    0x1400_0000, // b    .
];

/// The probe VM's memory: one private anonymous mapping, unmapped on drop.
struct ProbeMemory(*mut libc::c_void);

impl ProbeMemory {
    const SIZE: usize = 0x1_0000; // one page even with 64 KiB host pages

    fn new() -> Result<ProbeMemory> {
        // SAFETY: a fresh private anonymous mapping, unmapped on drop.
        let host = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                Self::SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if host == libc::MAP_FAILED {
            return Err(Error::ProbeMmap);
        }
        Ok(ProbeMemory(host))
    }

    /// Write instruction `words` at byte offset `off`.
    fn put(&self, off: usize, words: &[u32]) {
        assert!(off + 4 * words.len() <= Self::SIZE);
        for (i, w) in words.iter().enumerate() {
            // SAFETY: off + 4 * i + 4 <= SIZE (checked above).
            unsafe {
                self.0
                    .cast::<u8>()
                    .add(off + 4 * i)
                    .cast::<u32>()
                    .write_unaligned(w.to_le())
            };
        }
    }
}

impl Drop for ProbeMemory {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, SIZE bytes.
        unsafe { libc::munmap(self.0, Self::SIZE) };
    }
}

/// Whether the MOPS instructions actually work in a KVM guest at EL1:
/// `Ok(None)` if they do, `Ok(Some(esr))` with the syndrome if they trap
/// (e.g. when KVM advertises FEAT_MOPS in ID_AA64ISAR2_EL1 but leaves
/// HCRX_EL2.MSCEn clear, which makes them UNDEFINED), `Err` if the probe
/// could not run. A self-contained probe VM: it must not depend on the VMM
/// it decides for.
pub(crate) fn probe_mops(kvm: &Kvm) -> Result<Option<u64>> {
    use kvm_bindings::kvm_userspace_memory_region;
    let mem = ProbeMemory::new()?;
    mem.put(0, &MOPS_PROBE_CODE);
    mem.put(0xa00, &MOPS_PROBE_VECTOR);
    let vm = kvm.create_vm().map_err(Error::probe("KVM_CREATE_VM"))?;
    let region = kvm_userspace_memory_region {
        slot: 0,
        flags: 0,
        guest_phys_addr: RAM_BASE,
        memory_size: ProbeMemory::SIZE as u64,
        userspace_addr: mem.0 as u64,
    };
    // SAFETY: the region is a live mapping that outlives the VM fd (both
    // are dropped at the end of this function, the VM first).
    unsafe { vm.set_user_memory_region(region) }.map_err(Error::probe("memslot"))?;
    let fd = vm.create_vcpu(0).map_err(Error::probe("KVM_CREATE_VCPU"))?;
    init_vcpu(&vm, &fd, Privilege::Kernel)?;
    for (id, v) in [
        (sr::VBAR_EL1, RAM_BASE + 0x800),
        (sr::core_x(1), abi::DOORBELL_GPA),
        (sr::core_x(3), RAM_BASE + 0x8000),
        (sr::CORE_PSTATE, sr::pstate(Privilege::Kernel)),
        (sr::CORE_PC, RAM_BASE),
    ] {
        set_reg(&fd, id, v, "KVM_SET_ONE_REG")?;
    }
    let result = run_probe(fd);
    drop(vm);
    drop(mem);
    result
}

/// Run the probe vCPU to its doorbell write: 1 (the MOPS sequence ran) or
/// the ESR_EL1 its vector stored; bounded by a 5 s watchdog.
fn run_probe(mut fd: kvm_ioctls::VcpuFd) -> Result<Option<u64>> {
    use kvm_ioctls::VcpuExit;
    let mut watchdog = crate::watchdog::Watchdog::for_current_thread();
    loop {
        watchdog.arm(std::time::Duration::from_secs(5));
        let exit = fd.run();
        watchdog.disarm();
        match exit {
            Ok(VcpuExit::MmioWrite(addr, data)) if addr == abi::DOORBELL_GPA => {
                let mut v = [0u8; 8];
                let n = data.len().min(8);
                v[..n].copy_from_slice(&data[..n]);
                let v = u64::from_le_bytes(v);
                return Ok(if v == 1 { None } else { Some(v) });
            }
            Ok(other) => return Err(Error::ProbeExit(format!("{other:?}"))),
            Err(e) if e.errno() == libc::EINTR || e.errno() == libc::EAGAIN => {
                if watchdog.fired() {
                    return Err(Error::ProbeTimeout);
                }
            }
            Err(e) => return Err(Error::probe("KVM_RUN")(e)),
        }
    }
}

/// MIDR_EL1 of CPU 0 from sysfs (fallback when no vCPU can be made).
fn host_midr() -> u64 {
    std::fs::read_to_string("/sys/devices/system/cpu/cpu0/regs/identification/midr_el1")
        .ok()
        .and_then(|s| u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok())
        .unwrap_or(0)
}

pub fn cpu_caps(kvm: &Kvm) -> CpuCaps {
    let (midr, isar2) = match vcpu_id_regs(kvm) {
        Some((m, i, _)) => (m, i),
        None => (host_midr(), 0),
    };
    // Advertised and actually usable in a guest (see `probe_mops`).
    let mops = sr::has_mops(isar2) && matches!(probe_mops(kvm), Ok(None));
    let (dczva, _) = sr::dczid(host_dczid());
    let emulated = super::decode::midr_is_emulated(midr);
    let mut model = super::decode::midr_model(midr);
    if emulated {
        model.push_str(", emulated: results are functional only");
    }
    CpuCaps {
        model,
        features: vec![
            ("mops".into(), mops),
            ("dczva".into(), dczva),
            ("no_hw_prefetch".into(), super::no_hw_prefetch(midr)),
        ],
        x86_vendor: None,
    }
}

/// The KVM flavour: how the host kernel runs KVM/arm64 (`arm64-vhe`,
/// `arm64-nvhe`, `arm64-protected`, or `arm64` when it cannot tell).
/// From `kvm-arm.mode=` on the kernel command line, else from the kernel
/// log line KVM prints at init (readable by root).
pub fn kvm_flavour() -> KvmFlavour {
    static FLAVOUR: std::sync::OnceLock<KvmFlavour> = std::sync::OnceLock::new();
    *FLAVOUR.get_or_init(|| {
        let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
        super::decode::flavour_from(&cmdline, &kernel_log())
    })
}

/// KVM/arm64 always translates guest memory with stage 2.
pub fn kvm_paging() -> PagingMode {
    PagingMode::Stage2
}

/// The kernel log (klogctl SYSLOG_ACTION_READ_ALL), empty if not permitted.
fn kernel_log() -> String {
    const SYSLOG_ACTION_READ_ALL: libc::c_int = 3;
    const SYSLOG_ACTION_SIZE_BUFFER: libc::c_int = 10;
    // SAFETY: klogctl with a null buffer only returns the buffer size.
    let size = unsafe { libc::klogctl(SYSLOG_ACTION_SIZE_BUFFER, std::ptr::null_mut(), 0) };
    if size <= 0 {
        return String::new();
    }
    let mut buf = vec![0u8; size as usize];
    // SAFETY: the buffer is `size` bytes long and klogctl writes at most that.
    let n = unsafe {
        libc::klogctl(
            SYSLOG_ACTION_READ_ALL,
            buf.as_mut_ptr().cast::<libc::c_char>(),
            size,
        )
    };
    if n <= 0 {
        return String::new();
    }
    buf.truncate(n as usize);
    String::from_utf8_lossy(&buf).into_owned()
}

/// The guest-side name of a privilege level.
pub fn privilege_name(p: Privilege) -> &'static str {
    match p {
        Privilege::Kernel => "EL1",
        Privilege::User => "EL0",
        Privilege::Hyp => "EL2",
    }
}

/// Whether the CPU has MOPS (`isar2`: ID_AA64ISAR2_EL1) and, if it says
/// so, whether the instructions work in a guest (probed in one).
fn mops_support(kvm: &Kvm, isar2: u64) -> String {
    if !sr::has_mops(isar2) {
        return "MOPS no".to_string();
    }
    match probe_mops(kvm) {
        Ok(None) => "MOPS yes, works in a guest".to_string(),
        Ok(Some(esr)) => format!(
            "MOPS advertised but the instructions trap in a guest (ESR_EL1 {esr:#x}: {}); \
             KVM does not enable them (HCRX_EL2.MSCEn), so the mops variants are skipped",
            super::decode::ec_name(super::decode::ec(esr))
        ),
        Err(e) => format!("MOPS advertised; the guest probe failed: {e}"),
    }
}

/// What KVM answered this process that a cache may keep for the next one:
/// nothing on arm64 (its one question, KVM_ARM_PREFERRED_TARGET, is a
/// single cheap ioctl; x86 keeps its CPUID table).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KvmAnswers {}

/// The answers worth caching: none on arm64.
pub fn kvm_answers() -> Option<KvmAnswers> {
    None
}

/// Take cached answers: there are none to take on arm64.
pub fn adopt(_: &KvmAnswers) -> bool {
    false
}

/// Extra architecture details for `info` (name, value).
pub fn cpu_details(kvm: &Kvm) -> Vec<(String, String)> {
    let mut v = Vec::new();
    let regs = vcpu_id_regs(kvm);
    let midr = regs.map_or_else(host_midr, |r| r.0);
    v.push((
        "MIDR_EL1".to_string(),
        format!("{midr:#010x} ({})", super::decode::midr_model(midr)),
    ));
    if let Some((_, isar2, mmfr0)) = regs {
        let mops = mops_support(kvm, isar2);
        v.push(("ID_AA64ISAR2_EL1".into(), format!("{isar2:#018x} ({mops})")));
        v.push((
            "ID_AA64MMFR0_EL1".into(),
            format!(
                "{mmfr0:#018x} (PARange {} bits)",
                sr::pa_bits(mmfr0 & 0xf).map_or("?".into(), |b| b.to_string())
            ),
        ));
    }
    let dczid = host_dczid();
    let (ok, block) = sr::dczid(dczid);
    v.push((
        "DCZID_EL0".into(),
        format!(
            "{dczid:#x} (DC ZVA {}, {block}-byte blocks)",
            if ok { "allowed" } else { "prohibited" }
        ),
    ));
    v.push(("CNTFRQ_EL0".into(), format!("{} Hz", cntfrq())));
    v.push((
        "KVM IPA limit".into(),
        format!("{} bits", kvm.get_host_ipa_limit()),
    ));
    v.push(("KVM mode".into(), kvm_flavour().to_string()));
    let hyp = hyp_support(kvm);
    v.push((
        "guest at EL2".into(),
        format!(
            "{} ({})",
            if hyp.offered {
                "offered (nVHE, E2H=0)"
            } else {
                "not offered"
            },
            hyp.detail
        ),
    ));
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aarch64::VARIANTS;

    #[test]
    fn privilege_names_and_variants() {
        assert_eq!(privilege_name(Privilege::Kernel), "EL1");
        assert_eq!(privilege_name(Privilege::User), "EL0");
        assert_eq!(privilege_name(Privilege::Hyp), "EL2");
        assert!(VARIANTS.iter().any(|v| v.name == "ldp-stnp"));
    }
}
