//! x86_64 VM and vCPU setup against KVM, register dumps and exception
//! decoding.
use super::error::{Error, Result};
use super::kernel::CpuidView;
use super::layout::*;
use super::paging;
use super::regs::{self, Cpl};
use crate::Privilege;
use crate::{CpuCaps, KvmFlavour, PagingMode};
use crate::{HypSupport, Loaded, RamAccess};
use hypclear_abi as abi;
use kvm_bindings::KVM_MAX_CPUID_ENTRIES;
use kvm_ioctls::{Kvm, VcpuFd, VmFd};

pub use super::layout::{
    ARENA_BASE, BLOB_WINDOW, BLOB_WINDOW_END, EDGE_REGION, MAX_RAM, MIN_RAM, RAM_ALIGN, RAM_BASE,
    edge_hole, guest_pa, guest_va, harness_areas, mailbox_gpa,
};

/// Alignment of the randomized blob load address.
pub const LOAD_ALIGN: u64 = abi::PAGE_SIZE;

/// Name of the guest timestamp counter.
pub const COUNTER_NAME: &str = "TSC";

/// Extra KVM-level setup of a fresh VM (none needed on x86_64).
/// Harness areas a hostile guest may try to corrupt (`selftest
/// --hostile`): the root page table and the exception vectors, as
/// (name, guest-physical address, bytes).
pub fn corruptible_areas(
    loaded: &Loaded,
    mem: &MemoryState,
    privilege: Privilege,
) -> [(&'static str, u64, u64); 2] {
    let _ = (loaded, privilege);
    [
        ("page tables", mem.root, abi::PAGE_SIZE),
        ("IDT", IDT_GPA, IDT_VECTORS * 16),
    ]
}

/// KVM_CREATE_VM: only ordinary VMs exist on x86_64 (protected VMs are
/// pKVM's, arm64 only).
pub fn create_vm(kvm: &Kvm, ty: crate::VmType) -> Result<VmFd> {
    match ty {
        crate::VmType::Normal => kvm.create_vm().map_err(Error::kvm("KVM_CREATE_VM")),
        crate::VmType::Protected => Err(Error::Unsupported {
            what: "protected VMs",
            detail:
                "they are pKVM's (arm64, Linux 7.1+, kvm-arm.mode=protected); this host is x86_64"
                    .into(),
        }),
    }
}

/// In-kernel devices of a VM: none on x86_64.
#[derive(Debug)]
pub struct VmState;

pub fn setup_vm(_vm: &VmFd, privilege: Privilege) -> Result<VmState> {
    if privilege == Privilege::Hyp {
        return Err(Error::NoHypLevel);
    }
    Ok(VmState)
}

/// After the last vCPU: nothing to do on x86_64.
pub fn finish_vm(_state: &VmState) -> Result<()> {
    Ok(())
}

/// x86_64 guests never start at a hypervisor level here.
pub fn hyp_support(_kvm: &Kvm) -> HypSupport {
    HypSupport {
        offered: false,
        detail: "x86_64: the guest runs at CPL0 or CPL3 (EL2 is an aarch64 option)".into(),
    }
}

/// KVM_GET_SUPPORTED_CPUID, asked once per process (every VM's vCPUs,
/// `cpu_caps` and `cpu_details` need it), or taken from [`adopt`]. The
/// answer cannot change while the process holds /dev/kvm open: it depends
/// on the CPU, the kernel and the KVM module's parameters, and the module
/// cannot be reloaded under an open fd. A failed query is not kept; a
/// caller that comes while another asks waits for its answer.
fn supported_cpuid(kvm: &Kvm) -> std::result::Result<kvm_bindings::CpuId, kvm_ioctls::Error> {
    let mut known = SUPPORTED_CPUID.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(c) = known.as_ref() {
        return Ok(c.clone());
    }
    let c = kvm.get_supported_cpuid(KVM_MAX_CPUID_ENTRIES)?;
    *known = Some(c.clone());
    Ok(c)
}

static SUPPORTED_CPUID: std::sync::Mutex<Option<kvm_bindings::CpuId>> = std::sync::Mutex::new(None);

/// What KVM answered this process that a cache may keep for the next one
/// (keyed by the boot, kernel and KVM modules, as the `--cpl auto`
/// decision is): the supported CPUID table. Asking for it costs 0.3-0.4 ms
/// under nested KVM (each leaf a CPUID exit to the outer hypervisor), the
/// largest single step before a guest's first hypercall there.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KvmAnswers {
    /// Per entry: function, index, flags, eax, ebx, ecx, edx.
    cpuid: Vec<[u32; 7]>,
}

/// The answers this process has had from KVM, if it asked.
pub fn kvm_answers() -> Option<KvmAnswers> {
    let known = SUPPORTED_CPUID.lock().unwrap_or_else(|p| p.into_inner());
    let cpuid = known
        .as_ref()?
        .as_slice()
        .iter()
        .map(|e| [e.function, e.index, e.flags, e.eax, e.ebx, e.ecx, e.edx])
        .collect();
    Some(KvmAnswers { cpuid })
}

/// Take cached answers instead of asking KVM, unless this process already
/// asked. Answers that cannot be KVM's (no vendor or feature leaf, more
/// entries than KVM returns) are ignored: `false`.
pub fn adopt(a: &KvmAnswers) -> bool {
    let has = |f: u32| a.cpuid.iter().any(|e| e[0] == f);
    if !(has(0) && has(1)) || a.cpuid.len() > KVM_MAX_CPUID_ENTRIES {
        return false;
    }
    let entries: Vec<kvm_bindings::kvm_cpuid_entry2> = a
        .cpuid
        .iter()
        .map(
            |&[function, index, flags, eax, ebx, ecx, edx]| kvm_bindings::kvm_cpuid_entry2 {
                function,
                index,
                flags,
                eax,
                ebx,
                ecx,
                edx,
                ..Default::default()
            },
        )
        .collect();
    let Ok(c) = kvm_bindings::CpuId::from_entries(&entries) else {
        return false;
    };
    let mut known = SUPPORTED_CPUID.lock().unwrap_or_else(|p| p.into_inner());
    known.get_or_insert(c);
    true
}

/// What vCPU setup needs from the memory setup.
#[derive(Debug, Clone, Copy)]
pub struct MemoryState {
    /// Guest-physical address of the PML4.
    pub root: u64,
}

/// Write page tables, GDT, IDT and TSSs for `vcpus` vCPUs.
/// `blobs[0]` is the one the vCPUs enter; any others (a second side's,
/// loaded beside it) are mapped the same way.
pub fn prepare_memory(ram: &impl RamAccess, vcpus: u64, blobs: &[Loaded]) -> Result<MemoryState> {
    let loaded = blobs.first().ok_or(Error::NoBlob)?;
    let pt = paging::guest_map(&paging::GuestMap {
        ram_size: ram.size(),
        doorbell: abi::DOORBELL_GPA,
        area: (PAGE_TABLES_GPA, PAGE_TABLES_END),
        hole: edge_hole(ram.size()),
        blobs: blobs.iter().map(|b| (b.base, b.sections)).collect(),
    })
    .map_err(Error::PageTables)?;
    for (gpa, table) in pt.tables() {
        ram.write_words(gpa, table)?;
    }
    ram.write_words(GDT_GPA, &regs::gdt(abi::MAX_VCPUS))?;
    ram.write_words(IDT_GPA, &regs::idt(loaded.vectors))?;
    for v in 0..vcpus {
        ram.write_bytes(tss_gpa(v), &regs::tss(v))?;
    }
    Ok(MemoryState { root: pt.root })
}

/// Put a vCPU at the blob's entry in 64-bit mode at the chosen privilege.
pub fn setup_vcpu(
    kvm: &Kvm,
    _vm: &VmFd,
    fd: &VcpuFd,
    id: u64,
    loaded: &Loaded,
    mem: &MemoryState,
    privilege: Privilege,
) -> Result<()> {
    let cpuid = supported_cpuid(kvm).map_err(Error::kvm("KVM_GET_SUPPORTED_CPUID"))?;
    fd.set_cpuid2(&cpuid)
        .map_err(Error::kvm("KVM_SET_CPUID2"))?;
    let cpl = match privilege {
        Privilege::Kernel => Cpl::Kernel,
        Privilege::User => Cpl::User,
        Privilege::Hyp => return Err(Error::NoHypLevel),
    };
    let sregs = fd.get_sregs().map_err(Error::kvm("KVM_GET_SREGS"))?;
    fd.set_sregs(&regs::sregs(sregs, cpl, id, mem.root))
        .map_err(Error::kvm("KVM_SET_SREGS"))?;
    fd.set_regs(&regs::regs(loaded.entry, id))
        .map_err(Error::kvm("KVM_SET_REGS"))?;
    Ok(())
}

/// Guest timestamp counter frequency in kHz.
pub fn counter_khz(fd: &VcpuFd) -> Result<u64> {
    fd.get_tsc_khz()
        .map(u64::from)
        .map_err(Error::kvm("KVM_GET_TSC_KHZ"))
}

/// The guest's RIP. At a doorbell exit it is past the store: KVM retires
/// an emulated MMIO store before it exits (a split one after its first
/// 8-byte fragment), so it matches the ring site the guest's `RING` lists.
pub fn pc(fd: &VcpuFd) -> Result<u64> {
    fd.get_regs()
        .map(|r| r.rip)
        .map_err(Error::kvm("KVM_GET_REGS"))
}

/// The guest's program counter and a register dump, if KVM can read them.
pub fn registers(fd: &VcpuFd) -> Option<(u64, String)> {
    let r = fd.get_regs().ok()?;
    let s = fd.get_sregs().ok();
    let mut out = format!(
        "RIP {:#018x} RSP {:#018x} RFLAGS {:#010x}\n\
         RAX {:#018x} RBX {:#018x} RCX {:#018x} RDX {:#018x}\n\
         RSI {:#018x} RDI {:#018x} RBP {:#018x} R8  {:#018x}\n\
         R9  {:#018x} R10 {:#018x} R11 {:#018x} R12 {:#018x}\n\
         R13 {:#018x} R14 {:#018x} R15 {:#018x}",
        r.rip,
        r.rsp,
        r.rflags,
        r.rax,
        r.rbx,
        r.rcx,
        r.rdx,
        r.rsi,
        r.rdi,
        r.rbp,
        r.r8,
        r.r9,
        r.r10,
        r.r11,
        r.r12,
        r.r13,
        r.r14,
        r.r15
    );
    if let Some(s) = s {
        out.push_str(&format!(
            "\nCS {:#06x} (CPL {}) CR0 {:#x} CR2 {:#x} CR3 {:#x} CR4 {:#x} EFER {:#x}",
            s.cs.selector,
            s.cs.selector & 3,
            s.cr0,
            s.cr2,
            s.cr3,
            s.cr4,
            s.efer
        ));
    }
    Some((r.rip, out))
}

/// Whether KVM has re-initialised the vCPU (see `regs::is_init_state`):
/// then its registers say nothing about the guest. False when unreadable.
pub fn reinitialised(fd: &VcpuFd) -> bool {
    match (fd.get_regs(), fd.get_sregs()) {
        (Ok(r), Ok(s)) => regs::is_init_state(&r, &s),
        _ => false,
    }
}

const VECTORS: [&str; 32] = [
    "#DE divide error",
    "#DB debug",
    "NMI",
    "#BP breakpoint",
    "#OF overflow",
    "#BR bound range",
    "#UD invalid opcode",
    "#NM device not available",
    "#DF double fault",
    "coprocessor segment overrun",
    "#TS invalid TSS",
    "#NP segment not present",
    "#SS stack fault",
    "#GP general protection",
    "#PF page fault",
    "reserved",
    "#MF x87 error",
    "#AC alignment check",
    "#MC machine check",
    "#XM SIMD error",
    "#VE virtualization",
    "#CP control protection",
    "reserved",
    "reserved",
    "reserved",
    "reserved",
    "reserved",
    "reserved",
    "#HV hypervisor injection",
    "#VC VMM communication",
    "#SX security",
    "reserved",
];

/// The exception class `describe_exception` reports for an undefined
/// instruction (x86_64: vector 6, #UD).
pub const UNDEFINED_INSTRUCTION_CLASS: u64 = 6;

/// Explain a FAIL_EXCEPTION report (see `abi::MB_FAIL_D0..D5`): returns the
/// faulting PC, the exception class (the vector on x86_64) and a sentence.
pub fn describe_exception(d: [u64; 6], symbolize: &dyn Fn(u64) -> String) -> (u64, u64, String) {
    let [vector, error, rip, cr2, rsp, cs] = d;
    let name = VECTORS
        .get(vector as usize)
        .copied()
        .unwrap_or("unknown vector");
    let mut s = format!(
        "exception vector {vector} ({name}) at RIP {rip:#x} ({}), error code {error:#x}, RSP {rsp:#x}, CS {cs:#x} (CPL {})",
        symbolize(rip),
        cs & 3
    );
    if vector == PAGE_FAULT_VECTOR {
        s.push_str(&format!(
            ", CR2 {cr2:#x} ({} {} from CPL{})",
            if error & 1 != 0 {
                "protection violation"
            } else {
                "not-present page"
            },
            match error {
                e if e & 0x10 != 0 => "on instruction fetch",
                e if e & 2 != 0 => "on write",
                _ => "on read",
            },
            if error & 4 != 0 { 3 } else { 0 }
        ));
    }
    (rip, vector, s)
}

/// The address a FAIL_EXCEPTION report's page fault was taken for (CR2),
/// `None` for other exceptions.
pub fn fault_address(d: [u64; 6]) -> Option<u64> {
    (d[0] == PAGE_FAULT_VECTOR).then_some(d[3])
}

/// The page-fault vector (#PF).
pub const PAGE_FAULT_VECTOR: u64 = 14;

/// What the guest's CPUID says about the string features (REP_GOOD as
/// Linux synthesizes it, see `super::kernel`) and the CPU's vendor.
pub fn cpu_caps(kvm: &Kvm) -> CpuCaps {
    let mut view = CpuidView::default();
    let mut clzero = false;
    if let Ok(c) = supported_cpuid(kvm) {
        for e in c.as_slice() {
            match (e.function, e.index) {
                (0, _) => {
                    for (i, r) in [e.ebx, e.edx, e.ecx].iter().enumerate() {
                        view.vendor[4 * i..4 * i + 4].copy_from_slice(&r.to_le_bytes());
                    }
                }
                (1, _) => view.leaf1_eax = e.eax,
                (7, 0) => {
                    view.leaf7_ebx = e.ebx;
                    view.leaf7_edx = e.edx;
                }
                (7, 1) => view.leaf7_1_eax = e.eax,
                (0x8000_0008, _) => clzero = e.ebx & 1 != 0,
                _ => {}
            }
        }
    }
    let f = view.features();
    CpuCaps {
        model: host_cpu_model(),
        features: vec![
            ("erms".into(), f.erms),
            ("fsrm".into(), f.fsrm),
            ("fsrs".into(), f.fsrs),
            ("rep_good".into(), f.rep_good),
            ("clzero".into(), clzero),
        ],
        x86_vendor: f.vendor,
    }
}

fn host_cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown x86_64".into())
}

/// The KVM flavour: PVM (paravirtual, CPL 0 emulated), or hardware VMX/SVM.
pub fn kvm_flavour() -> KvmFlavour {
    flavour_from(|m| std::path::Path::new(&format!("/sys/module/{m}")).exists())
}

/// The flavour from the vendor modules `loaded` reports: the one KVM's
/// x86 ops come from. kvm_pvm first, as hypclear always checked it.
fn flavour_from(loaded: impl Fn(&str) -> bool) -> KvmFlavour {
    [
        ("kvm_pvm", KvmFlavour::Pvm),
        ("kvm_intel", KvmFlavour::Vmx),
        ("kvm_amd", KvmFlavour::Svm),
    ]
    .into_iter()
    .find(|(m, _)| loaded(m))
    .map_or(KvmFlavour::Unknown, |(_, f)| f)
}

/// The paging mode KVM uses for guests: the vendor module's `ept`/`npt`
/// parameter (what KVM decided at load: off when asked or when the CPU
/// lacks it), shadow paging under PVM (it has no two-dimensional paging).
pub fn kvm_paging() -> PagingMode {
    paging_from(kvm_flavour(), |m, p| {
        std::fs::read_to_string(format!("/sys/module/{m}/parameters/{p}")).ok()
    })
}

fn paging_from(flavour: KvmFlavour, param: impl Fn(&str, &str) -> Option<String>) -> PagingMode {
    let tdp = |module: &str, name: &str, on: PagingMode| match param(module, name)
        .as_deref()
        .map(str::trim)
    {
        Some("Y" | "1") => on,
        Some("N" | "0") => PagingMode::Shadow,
        _ => PagingMode::Unknown,
    };
    match flavour {
        KvmFlavour::Vmx => tdp("kvm_intel", "ept", PagingMode::Ept),
        KvmFlavour::Svm => tdp("kvm_amd", "npt", PagingMode::Npt),
        KvmFlavour::Pvm => PagingMode::Shadow,
        _ => PagingMode::Unknown,
    }
}

/// The guest-side name of the user privilege level.
pub fn privilege_name(p: Privilege) -> &'static str {
    match p {
        Privilege::Kernel => "CPL0",
        Privilege::User => "CPL3",
        Privilege::Hyp => "no hypervisor level on x86_64",
    }
}

/// Extra architecture details for `info` (name, value).
pub fn cpu_details(kvm: &Kvm) -> Vec<(String, String)> {
    let mut v = Vec::new();
    if let Ok(c) = supported_cpuid(kvm) {
        for e in c.as_slice() {
            if e.function == 1 {
                let family = ((e.eax >> 8) & 0xf) + ((e.eax >> 20) & 0xff);
                let model = ((e.eax >> 4) & 0xf) | (((e.eax >> 16) & 0xf) << 4);
                v.push((
                    "CPUID family/model/stepping".to_string(),
                    format!("{family:#x}/{model:#x}/{}", e.eax & 0xf),
                ));
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_that_cannot_be_kvms_are_not_taken() {
        let leaf = |f: u32| [f, 0, 0, 1, 2, 3, 4];
        for cpuid in [
            vec![],
            vec![leaf(1)],
            vec![leaf(0)],
            [vec![leaf(0)], vec![leaf(1); KVM_MAX_CPUID_ENTRIES]].concat(),
        ] {
            assert!(!adopt(&KvmAnswers { cpuid }));
        }
    }

    #[test]
    fn the_flavour_is_the_loaded_vendor_module() {
        let only = |want: &'static [&'static str]| move |m: &str| want.contains(&m);
        assert_eq!(flavour_from(only(&["kvm", "kvm_amd"])), KvmFlavour::Svm);
        assert_eq!(flavour_from(only(&["kvm", "kvm_intel"])), KvmFlavour::Vmx);
        assert_eq!(flavour_from(only(&["kvm", "kvm_pvm"])), KvmFlavour::Pvm);
        assert_eq!(flavour_from(only(&["kvm"])), KvmFlavour::Unknown);
    }

    #[test]
    fn paging_comes_from_the_vendor_modules_parameter() {
        let params = |npt: Option<&'static str>, ept: Option<&'static str>| {
            move |m: &str, p: &str| match (m, p) {
                ("kvm_amd", "npt") => npt.map(String::from),
                ("kvm_intel", "ept") => ept.map(String::from),
                _ => None,
            }
        };
        let svm = KvmFlavour::Svm;
        assert_eq!(paging_from(svm, params(Some("Y\n"), None)), PagingMode::Npt);
        assert_eq!(
            paging_from(svm, params(Some("N\n"), None)),
            PagingMode::Shadow
        );
        assert_eq!(
            paging_from(svm, params(None, Some("Y"))),
            PagingMode::Unknown
        );
        let vmx = KvmFlavour::Vmx;
        assert_eq!(paging_from(vmx, params(None, Some("Y\n"))), PagingMode::Ept);
        assert_eq!(
            paging_from(vmx, params(Some("Y"), Some("N\n"))),
            PagingMode::Shadow
        );
        assert_eq!(
            paging_from(KvmFlavour::Pvm, params(None, None)),
            PagingMode::Shadow
        );
        assert_eq!(
            paging_from(KvmFlavour::Unknown, params(Some("Y"), Some("Y"))),
            PagingMode::Unknown
        );
    }
}
