//! Architecture-specific code, behind one documented contract.
//!
//! Pure builders (page tables, descriptor and system-register encodings,
//! exception decoding) compile on every host so their unit tests run
//! anywhere; the parts that talk to KVM exist only for the host
//! architecture. Nothing here imports from the rest of hypclear except the
//! ABI constants (`blob::abi`), the routine [`Family`] (`hypclear_link::catalog`,
//! which build.rs shares) and the error [`Category`]: the VMM hands in plain
//! data ([`Privilege`], [`Loaded`], [`BlobImage`], a [`RamAccess`]) and gets plain data back.
//!
//! THE CONTRACT: every architecture module `<arch>/` provides exactly the
//! names re-exported below (compare Firecracker's `arch/mod.rs`). A new
//! architecture is `crates/arch/src/<arch>/` (layout, paging, registers, vCPU
//! setup, CPU capabilities, exception decoding, blob loader, variant table), `guest/<arch>/`
//! and the `cfg` lines below, plus its name in build.rs.
//!
//! | name | what |
//! |---|---|
//! | `RAM_BASE`, `MIN_RAM`, `MAX_RAM`, `RAM_ALIGN` | guest RAM placement and size limits |
//! | `ARENA_BASE` | first guest-physical byte the checks may use |
//! | `EDGE_REGION`, `edge_hole(ram_size)` | the top of RAM ordinary checks leave alone, and the unmapped page in it that edge checks' buffers end or start against (none where the paging has no 4 KiB pages there) |
//! | `BLOB_WINDOW`, `BLOB_WINDOW_END`, `LOAD_ALIGN` | where the blob may be loaded |
//! | `guest_va(gpa)`, `guest_pa(va)` | the guest-virtual address the guest reaches a guest-physical one at (x86_64: blob and arena far above 4 GiB, as the kernel's text and direct map; aarch64: all of RAM at the hyp VA, as the nVHE hyp's kern_hyp_va), and back |
//! | `mailbox_gpa(vcpu)`, `harness_areas(vcpu)` | each vCPU's mailbox page; what the harness itself writes (mailbox, stacks, page tables) |
//! | `COUNTER_NAME`, `counter_khz(vcpu)` | the guest timestamp counter |
//! | `UNDEFINED_INSTRUCTION_CLASS` | exception class of an undefined instruction |
//! | `load_image(ram, image, base)` | copy a [`BlobImage`] to guest RAM with linux-loader (ELF on x86_64, the arm64 Image on aarch64) |
//! | `setup_vm`, `VmState`, `finish_vm`, `prepare_memory`, `MemoryState`, `setup_vcpu` | VM and vCPU setup (`finish_vm` after the last vCPU: aarch64 initialises the vGIC an EL2 guest needs) |
//! | `hyp_support(kvm)` | whether KVM can start the guest at the hypervisor level ([`Privilege::Hyp`]: EL2 on aarch64), and why (not) |
//! | `pc(vcpu)` | the guest's program counter, as the doorbell's ring-site check reads it at an exit |
//! | `registers(vcpu)`, `reinitialised(vcpu)`, `describe_exception`, `fault_address` | failure reports (`reinitialised`: KVM reset the vCPU, e.g. kvm_amd on shutdown, so its registers are not the guest's) |
//! | `corruptible_areas(loaded, mem, privilege)` | root page table and vectors the guest at `privilege` uses, for `selftest --hostile` |
//! | `cpu_caps`, `cpu_details`, `kvm_flavour`, `kvm_paging`, `privilege_name` | what the CPU and KVM offer (which routine a kernel runs with it is read from that kernel's tree, not here) |
//! | `evict(bytes)` | write back and evict a host range from every cache level (the cold-cache precondition) |
//! | `Error` (as `HostError`) | the architecture's error type (thiserror), each variant with its [`Category`], and `kvm_errno()` (a failed KVM ioctl's errno, so an ioctl cut short by Ctrl-C reads as an interruption); wrapped by [`Error`] here, which `crate::error::Error::Arch` wraps in turn |
//! | `WRITE_XOR_EXECUTE` | whether every guest mapping is W^X (blob text read-only, data execute-never) |
//! | `CALLEE_SAVED`, `RETURN_FLAGS` | the registers a routine must preserve (their canaries' order in `MB_CANARIES`) and the flags it must return clear |
//! | `VARIANTS` | the routine variants of `guest/<arch>/lib`, generated from the alias list and each routine's header (`hypclear_link::catalog`): CPU feature required, kernel code followed |
//! | `FORMER_NAMES` | renamed variants ([`FormerName`]: family, old name, current name), old names still accepted |

// The crates below, under the names the modules use.
use hypclear_process::exit;
#[cfg(target_arch = "aarch64")]
use hypclear_process::watchdog;
// Each architecture's module builds on both hosts (its decoders and
// tables have unit tests), but only its own target calls into it.
#[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
pub mod aarch64;
mod kvm;
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub mod x86_64;

pub use kvm::{KvmFlavour, PagingMode};

use crate::exit::Category;
pub use hypclear_link::catalog::{Family, VariantDef};

/// What the architecture code returns when it fails: the host
/// architecture's own error type, wrapped (compare cloud-hypervisor's
/// `arch/src/lib.rs`). `crate::error::Error::Arch` wraps this in turn.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[cfg(target_arch = "x86_64")]
    #[error(transparent)]
    X86_64(#[from] x86_64::Error),
    #[cfg(target_arch = "aarch64")]
    #[error(transparent)]
    Aarch64(#[from] aarch64::Error),
}

impl Error {
    /// Usage, environment, run or internal failure (decides the exit status).
    pub fn category(&self) -> Category {
        match self {
            #[cfg(target_arch = "x86_64")]
            Error::X86_64(e) => e.category(),
            #[cfg(target_arch = "aarch64")]
            Error::Aarch64(e) => e.category(),
        }
    }
}

/// A guest RAM access through [`RamAccess`] that failed.
#[derive(Debug, thiserror::Error)]
#[error("guest memory access at {gpa:#x} (+{len:#x}) failed: {detail}")]
pub struct RamError {
    pub gpa: u64,
    pub len: u64,
    pub detail: String,
}

/// Privilege the guest code runs at: CPL0/EL1, CPL3/EL0, or (aarch64 with
/// nested virtualization only) EL2 as a non-VHE guest hypervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Privilege {
    Kernel,
    User,
    /// The hypervisor level: aarch64 EL2 with HCR_EL2.E2H = 0, the nVHE
    /// hyp's own translation regime and vectors.
    Hyp,
}

/// Whether KVM can start a guest at [`Privilege::Hyp`], and what decides
/// it (the capabilities, or what the host lacks).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HypSupport {
    pub offered: bool,
    pub detail: String,
}

/// What kind of VM KVM_CREATE_VM makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum VmType {
    /// An ordinary VM: the host can read and write guest RAM at any time.
    #[default]
    Normal,
    /// A pKVM protected VM (arm64, Linux 7.1+, `kvm-arm.mode=protected`):
    /// the hypervisor takes each page the guest touches away from the host
    /// and zeroes it when it reclaims it at teardown.
    Protected,
}

impl VmType {
    pub fn name(self) -> &'static str {
        match self {
            VmType::Normal => "normal",
            VmType::Protected => "protected",
        }
    }
}

/// arm64's DC ZVA as a bench side dimension (`--dc-zva`): whether the
/// guest routines may use it (DCZID_EL0.DZP reads 0) or not (DZP reads
/// 1, so clear_page takes its STNP loop and memset its STP loop).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DcZva {
    On,
    Off,
}

/// The privilege that gives the guest routines DC ZVA state `d`; `None`
/// where the architecture has no DC ZVA (x86_64).
pub fn dc_zva_privilege(d: DcZva) -> Option<Privilege> {
    #[cfg(target_arch = "aarch64")]
    return Some(aarch64::dc_zva_privilege(d));
    #[cfg(not(target_arch = "aarch64"))]
    {
        let _ = d;
        None
    }
}

/// Where the blob landed in guest RAM: its guest-physical `base`, the
/// guest-virtual address `va` the guest runs it at (`guest_va(base)`), and
/// its entry points there.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Loaded {
    pub base: u64,
    pub va: u64,
    pub entry: u64,
    pub vectors: u64,
    /// Its pages by permission, for W^X mappings.
    pub sections: BlobSections,
    /// The hypervisor-level entry and vectors (aarch64: `hyp_el2_init`,
    /// `hyp_el2_vectors`), if the blob has them (older blob files do not).
    pub hyp: Option<HypEntry>,
}

/// A blob's pages by what they may do, as page-aligned byte offsets from
/// its base: `[0, text_end)` text (read-only, executable), `[text_end,
/// data_start)` read-only data, `[data_start, end)` writable data and
/// .bss, never executable (the hyp's W^X).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct BlobSections {
    pub text_end: u64,
    pub data_start: u64,
    pub end: u64,
}

/// Where a guest at [`Privilege::Hyp`] starts and takes its exceptions.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct HypEntry {
    pub entry: u64,
    pub vectors: u64,
}

/// A linked blob as the architecture's loader takes it (plain data from
/// `blob::Blob`): the ELF, the flat image where the loader needs one, and
/// the size from the base to the end of .bss.
#[derive(Debug, Clone, Copy)]
pub struct BlobImage<'a> {
    pub elf: &'a [u8],
    pub flat: Option<&'a [u8]>,
    pub size: u64,
}

/// A renamed variant whose former name is still accepted.
#[derive(Debug, Clone, Copy)]
pub struct FormerName {
    pub family: Family,
    pub old: &'static str,
    pub new: &'static str,
}

/// What architecture setup needs of guest RAM.
pub trait RamAccess {
    /// Guest-physical address of the first byte.
    fn base(&self) -> u64;
    /// Size in bytes.
    fn size(&self) -> u64;
    /// Copy `bytes` to guest-physical `gpa`.
    fn write_bytes(&self, gpa: u64, bytes: &[u8]) -> Result<(), RamError>;
    /// Copy `words` (page-table entries, descriptors) to guest-physical
    /// `gpa`, little-endian, in one write.
    fn write_words(&self, gpa: u64, words: &[u64]) -> Result<(), RamError> {
        let mut bytes = Vec::with_capacity(words.len() * 8);
        for w in words {
            bytes.extend_from_slice(&w.to_le_bytes());
        }
        self.write_bytes(gpa, &bytes)
    }
    /// The vm-memory view (for linux-loader and typed accesses).
    fn mem(&self) -> &vm_memory::GuestMemoryMmap;
}
/// CPU model and the features routines depend on (named as in the
/// architecture's `VARIANTS[].requires`), as the guest sees them. An emulated
/// CPU says so in `model`: its results are functional only.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct CpuCaps {
    pub model: String,
    pub features: Vec<(String, bool)>,
    /// x86: the vendor whose CPU-setup code the kernel runs (`None`
    /// elsewhere, or for a vendor Linux has no setup code for).
    pub x86_vendor: Option<x86_64::kernel::Vendor>,
}

impl CpuCaps {
    pub fn has(&self, f: &str) -> bool {
        self.features.iter().any(|(n, v)| n == f && *v)
    }

    /// The capabilities a guest with DC ZVA state `d` sees: without it,
    /// no `dczva` (a kernel routine's path is decided as on a DZP=1 CPU).
    pub fn with_dc_zva(&self, d: DcZva) -> CpuCaps {
        let mut c = self.clone();
        if d == DcZva::Off {
            for (name, on) in &mut c.features {
                if name == "dczva" {
                    *on = false;
                }
            }
        }
        c
    }
}

/// This build's architecture: the one re-export list below names the
/// contract (the table above) for whichever it is.
#[cfg(target_arch = "aarch64")]
use self::aarch64 as native;
#[cfg(target_arch = "x86_64")]
use self::x86_64 as native;

pub use self::aarch64::protected::{KvmArmMode, kvm_arm_mode};
pub use native::cache::evict;
pub use native::host::{
    ARENA_BASE, BLOB_WINDOW, BLOB_WINDOW_END, COUNTER_NAME, EDGE_REGION, KvmAnswers, LOAD_ALIGN,
    MAX_RAM, MIN_RAM, MemoryState, RAM_ALIGN, RAM_BASE, UNDEFINED_INSTRUCTION_CLASS, VmState,
    adopt, corruptible_areas, counter_khz, cpu_caps, cpu_details, create_vm, describe_exception,
    edge_hole, fault_address, finish_vm, guest_pa, guest_va, harness_areas, hyp_support,
    kvm_answers, kvm_flavour, kvm_paging, mailbox_gpa, pc, prepare_memory, privilege_name,
    registers, reinitialised, setup_vcpu, setup_vm,
};
pub use native::loader::load_image;
pub use native::{
    CALLEE_SAVED, Error as HostError, FORMER_NAMES, RETURN_FLAGS, VARIANTS, WRITE_XOR_EXECUTE,
};

/// The path a routine takes for a check, where its fill decides it and
/// the architecture makes it knowable (arm64 memset: DC ZVA for zero).
pub fn path_note(
    family: Family,
    variant: &str,
    fill: Option<u8>,
    caps: &CpuCaps,
    privilege: Privilege,
) -> Option<&'static str> {
    #[cfg(target_arch = "aarch64")]
    return aarch64::path_note(family, variant, fill, caps.has("dczva"), privilege);
    #[cfg(not(target_arch = "aarch64"))]
    {
        let _ = (family, variant, fill, caps, privilege);
        None
    }
}
