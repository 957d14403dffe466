//! The VM: guest RAM, the loaded blob, vCPUs and the hypercall loop.
//!
//! Everything here is architecture neutral; `crate::arch` provides the
//! layout, register setup and exception decoding.

mod backing;
pub mod blob;
pub mod contract;
mod dirty;
pub mod error;
/// The protocol's fuzz harness: for `fuzz/` (feature `fuzzing`) and the
/// corpus replay test.
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz;

// The crates below, under the names the modules use.
use hypclear_arch as arch;
use hypclear_format::{text, units};
use hypclear_process::{errln, interrupt, watchdog};

pub mod host;
pub mod kvmstats;
pub mod memory;
pub mod protocol;
pub mod vcpu;
use crate::blob::{Blob, Loaded};
use crate::error::{Error, Result};
use crate::memory::{Backing, GuestRam};
use hypclear_abi as abi;
use kvm_bindings::kvm_userspace_memory_region;
use kvm_ioctls::{Kvm, VmFd};
use rand_core::{Rng, SeedableRng};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

pub use crate::arch::{Privilege, VmType};
pub use crate::contract::{Breach, BreachKind, Returns};
pub use crate::error::{FailureKind, GuestFailure, Rule};
pub use vcpu::{Exit, Vcpu};

#[derive(Debug, Clone)]
pub struct VmOptions {
    pub mem: u64,
    pub backing: Backing,
    pub prefault: bool,
    pub privilege: Privilege,
    /// The blob to load (a built-in link configuration's or a kernel blob).
    pub blob: Blob,
    pub vcpus: u64,
    pub seed: u64,
    /// Ordinary or pKVM protected (whose RAM the host must not touch
    /// while it lives: only [`Vcpu::sealed_call`] runs it).
    pub vm_type: VmType,
}

/// The KVM device hypclear opens: /dev/kvm, or `$HYPCLEAR_KVM_DEVICE`.
pub fn kvm_device_path() -> String {
    std::env::var("HYPCLEAR_KVM_DEVICE").unwrap_or_else(|_| "/dev/kvm".into())
}

/// Open [`kvm_device_path`], with an error that says how to fix it.
pub fn open_kvm() -> Result<Kvm> {
    let path = kvm_device_path();
    let cpath = std::ffi::CString::new(path.clone())
        .map_err(|_| Error::Usage(format!("HYPCLEAR_KVM_DEVICE={path:?} is not a path")))?;
    let kvm = Kvm::new_with_path(&cpath).map_err(|e| Error::KvmUnavailable {
        path: path.clone().into(),
        why: e.to_string(),
    })?;
    let v = kvm.get_api_version();
    if v < 0 {
        return Err(Error::KvmUnavailable {
            path: path.into(),
            why: format!(
                "not a KVM device (KVM_GET_API_VERSION failed: {})",
                std::io::Error::last_os_error()
            ),
        });
    }
    if v != 12 {
        return Err(Error::Unsupported {
            what: "the stable KVM API",
            detail: format!("KVM_GET_API_VERSION returned {v}, expected 12"),
        });
    }
    Ok(kvm)
}

/// Check a guest RAM size before any VM exists.
pub fn validate_mem(mem: u64) -> Result<()> {
    if !(arch::MIN_RAM..=arch::MAX_RAM).contains(&mem) || !mem.is_multiple_of(arch::RAM_ALIGN) {
        return Err(Error::Usage(format!(
            "--mem {} is not usable: guest RAM must be a multiple of {} between {} and {}",
            crate::units::format_size(mem),
            crate::units::format_size(arch::RAM_ALIGN),
            crate::units::format_size(arch::MIN_RAM),
            crate::units::format_size(arch::MAX_RAM)
        )));
    }
    Ok(())
}

/// Check options that can be checked without creating a VM.
pub fn validate(opts: &VmOptions) -> Result<()> {
    validate_mem(opts.mem)?;
    if opts.vcpus == 0 || opts.vcpus > abi::MAX_VCPUS {
        return Err(Error::Usage(format!(
            "--vcpus {} is out of range: use 1 to {}",
            opts.vcpus,
            abi::MAX_VCPUS
        )));
    }
    Ok(())
}

/// Resolves guest addresses to `symbol+offset` inside the blob. Its table
/// is built on first use: only a failure report needs it, and building it
/// before the first hypercall would delay every boot.
#[derive(Debug)]
pub(crate) struct Symbolizer {
    blob: Arc<Blob>,
    base: u64,
    syms: std::sync::OnceLock<Vec<(u64, String)>>,
}

impl Symbolizer {
    pub(crate) fn new(blob: Arc<Blob>, base: u64) -> Symbolizer {
        Symbolizer {
            blob,
            base,
            syms: std::sync::OnceLock::new(),
        }
    }

    fn syms(&self) -> &[(u64, String)] {
        self.syms.get_or_init(|| {
            // Only symbols inside the image name addresses: absolute
            // assembler symbols (e.g. `__hypclear_vector`, a constant) and
            // markers past the end would otherwise name far-away addresses.
            let blob = &self.blob;
            let mut syms: Vec<(u64, String)> = blob
                .symbols
                .iter()
                .filter(|(_, a)| **a < blob.size)
                .map(|(n, a)| (*a + self.base, n.clone()))
                .filter(|(_, n)| !blob.absolute.contains(n))
                .collect();
            syms.sort();
            syms
        })
    }

    /// The name of row `index` of command table `table` (None past the
    /// table's end or for an unknown table).
    pub(crate) fn row_name(&self, table: u64, index: u64) -> Option<String> {
        let rows = match table {
            hypclear_abi::TABLE_ALIAS => &self.blob.aliases,
            hypclear_abi::TABLE_SELFTEST => &self.blob.selftests,
            _ => return None,
        };
        let row = rows.get(usize::try_from(index).ok()?)?;
        Some(row.name.clone())
    }

    /// `symbol+offset` for an address inside the blob image, otherwise
    /// "outside the blob".
    pub(crate) fn name(&self, addr: u64) -> String {
        if addr < self.base || addr >= self.base.saturating_add(self.blob.size) {
            return "outside the blob".into();
        }
        match self.syms().iter().rev().find(|(a, _)| *a <= addr) {
            Some((a, n)) => format!("{n}+{:#x}", addr - a),
            None => "outside the blob".into(),
        }
    }
}

/// The dispatcher's argument block: call a routine `count` times as
/// `fn(a0 + i*a0_step, a1 + i*a1_step, a2)`. Declared once: the guest
/// [`Command`] and the host baseline's lowered calls
/// (`routines::Lowered`) both carry it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Args {
    pub a0: u64,
    pub a0_step: u64,
    pub a1: u64,
    pub a1_step: u64,
    pub a2: u64,
    pub count: u64,
}

/// One command for the guest dispatcher: call `table[index]` with `args`.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Command {
    pub table: u64,
    pub index: u64,
    #[serde(flatten)]
    pub args: Args,
    /// What each call must return (the rest of the contract is the same
    /// for every routine).
    pub returns: Returns,
}

#[derive(Debug, Clone, Serialize)]
pub struct CallResult {
    pub t0: u64,
    pub t1: u64,
    pub ret: u64,
    /// The first call that broke the contract, if one did (its calls
    /// after it did not run).
    pub breach: Option<Breach>,
    /// KVM binary-stats deltas of this vCPU across the command (empty
    /// unless run with `Vcpu::call_with_stats`).
    pub stats: BTreeMap<String, u64>,
}

impl CallResult {
    /// Ticks of the command (the protocol guarantees `t0 <= t1`).
    pub fn ticks(&self) -> u64 {
        self.t1.saturating_sub(self.t0)
    }
}

/// A created VM with its blob loaded and vCPUs ready to start.
pub struct Vm {
    pub kvm: Kvm,
    pub fd: VmFd,
    pub ram: Arc<GuestRam>,
    pub blob: Arc<Blob>,
    pub loaded: Loaded,
    /// What the page-table setup produced (the roots per privilege).
    pub mem_state: arch::MemoryState,
    /// The level the vCPUs run the guest at.
    pub privilege: Privilege,
    /// In-kernel devices the architecture made for the VM (kept with it).
    pub vm_state: arch::VmState,
    pub vcpus: Vec<Vcpu>,
    pub counter_khz: u64,
    /// KVM's dirty-page log, once [`Vm::log_dirty_pages`] turned it on.
    dirty: Option<dirty::DirtyLog>,
    /// A second blob loaded beside the first ([`Vm::with_beside`]), reached
    /// through `abi::TABLE_BESIDE`.
    pub beside: Option<(Arc<Blob>, Loaded)>,
}

/// Clear vCPU `id`'s mailbox page and write its magic, vCPU number, the
/// run's callee-saved canaries and the edge checks' hole; returns its
/// guest-physical address.
fn init_mailbox(ram: &GuestRam, id: u64, seed: u64) -> Result<u64> {
    let mailbox = arch::mailbox_gpa(id);
    ram.write_bytes(mailbox, &[0u8; abi::PAGE_SIZE as usize])?;
    let hole = arch::edge_hole(ram.size()).map_or(0, arch::guest_va);
    ram.write_u64(mailbox + abi::MB_HOLE, hole)?;
    ram.write_u64(mailbox + abi::MB_MAGIC, abi::MAILBOX_MAGIC)?;
    ram.write_u64(mailbox + abi::MB_VCPU, id)?;
    for (i, c) in contract::canaries(seed ^ id).iter().enumerate() {
        ram.write_u64(mailbox + abi::MB_CANARIES + 8 * i as u64, *c)?;
    }
    Ok(mailbox)
}

/// Guest RAM as KVM's memslot 0.
fn memory_region(ram: &GuestRam) -> kvm_userspace_memory_region {
    kvm_userspace_memory_region {
        slot: 0,
        flags: 0,
        guest_phys_addr: ram.base(),
        memory_size: ram.size(),
        userspace_addr: ram.host_addr(),
    }
}

/// Load `beside` (if any) after the first blob, which is `first` bytes
/// long at `base`.
fn load_beside(
    ram: &GuestRam,
    base: u64,
    first: u64,
    beside: Option<&Blob>,
) -> Result<Option<(Arc<Blob>, Loaded)>> {
    match beside {
        Some(b) => {
            let at = beside_address(base, first, b.size)?;
            Ok(Some((Arc::new(b.clone()), b.load(ram, at)?)))
        }
        None => Ok(None),
    }
}

/// Give the vCPU whose mailbox is at `mailbox` the alias table of the
/// blob loaded beside (if any).
fn write_beside_table(
    ram: &GuestRam,
    mailbox: u64,
    beside: Option<&(Arc<Blob>, Loaded)>,
) -> Result<()> {
    if let Some((b, l)) = beside {
        // The guest reads the table at its guest-virtual address.
        let table = |name: &str| b.symbol(name).map(|a| l.va + a);
        ram.write_u64(mailbox + abi::MB_BESIDE_START, table("alias_table_start")?)?;
        ram.write_u64(mailbox + abi::MB_BESIDE_END, table("alias_table_end")?)?;
    }
    Ok(())
}

/// The guest counter's frequency as the first vCPU reads it (0 without
/// vCPUs).
fn first_counter_khz(vcpus: &[Vcpu]) -> Result<u64> {
    match vcpus.first() {
        Some(v) => Ok(arch::counter_khz(&v.fd)?),
        None => Ok(0),
    }
}

impl Vm {
    /// Map guest RAM, load the blob and write the page tables, then create
    /// the VM and register RAM as its memslot, and set up the vCPUs.
    pub fn new(kvm: Kvm, opts: &VmOptions) -> Result<Vm> {
        Vm::with_beside(kvm, opts, None)
    }

    /// [`Vm::new`] with `beside` loaded too, at its own address in the
    /// blob window, its relocated alias table given to every vCPU's
    /// mailbox (`MB_BESIDE_*`): two sides in one guest, on the same RAM.
    pub fn with_beside(kvm: Kvm, opts: &VmOptions, beside: Option<&Blob>) -> Result<Vm> {
        validate(opts)?;
        let ram = Arc::new(GuestRam::new(
            arch::RAM_BASE,
            opts.mem,
            opts.backing,
            opts.prefault,
        )?);
        let blob = Arc::new(opts.blob.clone());
        let base = load_address(opts.seed, blob.size)?;
        let loaded = blob.load(ram.as_ref(), base)?;
        let beside = load_beside(&ram, base, blob.size, beside)?;
        let blobs: Vec<Loaded> = std::iter::once(loaded)
            .chain(beside.iter().map(|b| b.1))
            .collect();
        let mem_state = arch::prepare_memory(ram.as_ref(), opts.vcpus, &blobs)?;
        let sym = Arc::new(Symbolizer::new(blob.clone(), loaded.va));
        let rings = protocol::RingSites::new(loaded.va, &blob.rings);
        if opts.vm_type == VmType::Protected {
            // A fork would copy the pinned pages and so make the
            // hypervisor reclaim them under the running guest.
            ram.dont_fork()?;
        }
        let fd = arch::create_vm(&kvm, opts.vm_type)?;
        let vm_state = arch::setup_vm(&fd, opts.privilege)?;
        // SAFETY: the region is a live mapping owned by `ram`, which the
        // Vm keeps alive for as long as the VM fd exists.
        unsafe { fd.set_user_memory_region(memory_region(&ram)) }
            .map_err(Error::kvm("KVM_SET_USER_MEMORY_REGION"))?;

        let mut vcpus = Vec::new();
        for id in 0..opts.vcpus {
            let vfd = fd.create_vcpu(id).map_err(Error::kvm("KVM_CREATE_VCPU"))?;
            arch::setup_vcpu(&kvm, &fd, &vfd, id, &loaded, &mem_state, opts.privilege)?;
            let mailbox = init_mailbox(&ram, id, opts.seed)?;
            write_beside_table(&ram, mailbox, beside.as_ref())?;
            let mut vcpu = Vcpu::new(vfd, id, mailbox, ram.clone(), sym.clone(), rings.clone());
            vcpu.vm_type = opts.vm_type;
            vcpus.push(vcpu);
        }
        arch::finish_vm(&vm_state)?;
        let counter_khz = first_counter_khz(&vcpus)?;
        Ok(Vm {
            kvm,
            fd,
            ram,
            blob,
            loaded,
            mem_state,
            privilege: opts.privilege,
            vm_state,
            vcpus,
            counter_khz,
            dirty: None,
            beside,
        })
    }

    /// Close the VM's fds (vCPUs, the VM): KVM destroys the VM (under pKVM
    /// the hypervisor reclaims, and zeroes, every page a protected guest
    /// owned) before the last close returns. Returns guest RAM, still
    /// mapped and now the host's alone, and how long the closes took.
    pub fn destroy(self) -> (Arc<GuestRam>, std::time::Duration) {
        let ram = self.ram.clone();
        let t = std::time::Instant::now();
        // All of it, so that any fd holding the VM (vCPUs, devices) is
        // closed inside the timed part.
        drop(self);
        (ram, t.elapsed())
    }

    pub fn vcpu(&mut self, i: usize) -> Result<&mut Vcpu> {
        self.vcpus
            .get_mut(i)
            .ok_or_else(|| Error::Internal(format!("no vCPU {i}")))
    }

    /// Turn on KVM's dirty-page log for guest RAM, with manual
    /// re-protection (see `dirty`): from here on [`Vm::writes_outside`]
    /// names every page the guest wrote outside what the last
    /// [`Vm::watch_writes`] allowed. The host's own writes through its
    /// mapping are not logged. Where KVM lacks manual re-protection
    /// (before Linux 5.8) nothing is logged, and this returns false.
    pub fn log_dirty_pages(&mut self) -> Result<bool> {
        if self.dirty.is_some() {
            return Ok(true);
        }
        // A protected VM's pages are the hypervisor's: it logs none.
        if self.vcpus.iter().any(|v| v.vm_type == VmType::Protected) {
            return Ok(false);
        }
        if let Err(why) = self.start_dirty_log() {
            errln!(
                "hypclear: note: no dirty-page log ({why}): stray writes outside the checks' \
                 windows are not looked for (--check whole compares all of RAM)"
            );
            return Ok(false);
        }
        Ok(true)
    }

    /// [`Vm::log_dirty_pages`]'s KVM part.
    fn start_dirty_log(&mut self) -> Result<()> {
        if !dirty::enable_manual_protect(&self.fd)? {
            return Err(Error::Unsupported {
                what: "KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2",
                detail: "KVM cannot leave logged pages writable (Linux 5.8+)".into(),
            });
        }
        let region = kvm_userspace_memory_region {
            slot: 0,
            flags: kvm_bindings::KVM_MEM_LOG_DIRTY_PAGES,
            guest_phys_addr: self.ram.base(),
            memory_size: self.ram.size(),
            userspace_addr: self.ram.host_addr(),
        };
        // SAFETY: the same live mapping `Vm::new` registered, owned by
        // `self.ram` for as long as the VM fd exists.
        unsafe { self.fd.set_user_memory_region(region) }.map_err(Error::kvm(
            "KVM_SET_USER_MEMORY_REGION (KVM_MEM_LOG_DIRTY_PAGES)",
        ))?;
        self.dirty = Some(dirty::DirtyLog::new(self.ram.base(), self.ram.size()));
        Ok(())
    }

    /// Before a command: the guest may write `allowed` (`[start, end)`
    /// ranges, page granular); every other page is watched.
    pub fn watch_writes(&mut self, allowed: &[(u64, u64)]) -> Result<()> {
        match self.dirty.as_mut() {
            Some(d) => d.watch(&self.fd, allowed),
            None => Ok(()),
        }
    }

    /// After it: the watched pages the guest wrote (empty without a log).
    pub fn writes_outside(&mut self) -> Result<Vec<u64>> {
        match self.dirty.as_mut() {
            Some(d) => d.written(&self.fd),
            None => Ok(Vec::new()),
        }
    }
}

/// A page-aligned (`arch::LOAD_ALIGN`) load address in the blob window,
/// derived from `seed`.
pub fn load_address(seed: u64, size: u64) -> Result<u64> {
    let room = arch::BLOB_WINDOW_END
        .checked_sub(arch::BLOB_WINDOW)
        .and_then(|r| r.checked_sub(size.next_multiple_of(abi::PAGE_SIZE)))
        .ok_or_else(|| Error::Blob(format!("blob of {size} bytes does not fit the load window")))?;
    // Page aligned on x86_64; 2 MiB aligned where linux-loader's arm64
    // Image loader insists on it.
    let slots = room / arch::LOAD_ALIGN + 1;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x6c6f_6164);
    Ok(arch::BLOB_WINDOW + (rng.next_u64() % slots) * arch::LOAD_ALIGN)
}

/// Where a second blob of `size` bytes goes beside the first (at `base`,
/// `first` bytes long): the first aligned address past it, else the last
/// one below it, inside the window.
fn beside_address(base: u64, first: u64, size: u64) -> Result<u64> {
    let len = |n: u64| n.next_multiple_of(arch::LOAD_ALIGN);
    let above = base.checked_add(len(first));
    if let Some(a) = above.filter(|a| a.saturating_add(len(size)) <= arch::BLOB_WINDOW_END) {
        return Ok(a);
    }
    base.checked_sub(len(size))
        .filter(|a| *a >= arch::BLOB_WINDOW)
        .ok_or_else(|| {
            Error::Blob(format!(
                "blobs of {first} and {size} bytes do not fit the load window together"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_blob_beside_never_overlaps_the_first() {
        for seed in 0..64 {
            let (first, size) = (5 * abi::PAGE_SIZE + 3, 7 * abi::PAGE_SIZE);
            let base = load_address(seed, first).unwrap();
            let at = beside_address(base, first, size).unwrap();
            assert!(at >= arch::BLOB_WINDOW && at + size <= arch::BLOB_WINDOW_END);
            assert!(at >= base + first || at + size <= base, "{base:#x} {at:#x}");
            assert_eq!(at % arch::LOAD_ALIGN, 0);
        }
    }

    #[test]
    fn load_address_is_aligned_inside_the_window_and_seeded() {
        let size = 3 * abi::PAGE_SIZE + 5;
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..64 {
            let a = load_address(seed, size).unwrap();
            assert_eq!(a % arch::LOAD_ALIGN, 0);
            assert!(a >= arch::BLOB_WINDOW);
            assert!(a + size <= arch::BLOB_WINDOW_END);
            assert_eq!(
                a,
                load_address(seed, size).unwrap(),
                "same seed, same address"
            );
            seen.insert(a);
        }
        assert!(seen.len() > 1, "the seed must move the blob");
        assert!(load_address(1, arch::BLOB_WINDOW_END).is_err());
    }

    #[test]
    fn symbolizer_names_the_enclosing_symbol() {
        let blob = Arc::new(Blob::get(crate::blob::LinkConfig::Vanilla).unwrap());
        let base = 0x40_0000;
        let s = Symbolizer::new(blob.clone(), base);
        let f = blob.symbol("selftest_fault").unwrap();
        assert_eq!(s.name(base + f), "selftest_fault+0x0");
        assert_eq!(s.name(base - 1), "outside the blob");
        // Past the image, and absolute symbols, name nothing.
        assert_eq!(s.name(base + blob.size), "outside the blob");
        assert_eq!(s.name(base + (1 << 40)), "outside the blob");
        for abs in &blob.absolute {
            let a = blob.symbols[abs];
            if a < blob.size {
                assert!(!s.name(base + a).starts_with(&format!("{abs}+")), "{abs}");
            }
        }
    }

    #[test]
    fn table_rows_are_named_by_table_and_index() {
        use hypclear_abi::{TABLE_ALIAS, TABLE_SELFTEST};
        let blob = Arc::new(Blob::get(crate::blob::LinkConfig::Vanilla).unwrap());
        let s = Symbolizer::new(blob.clone(), 0x40_0000);
        let row = blob.selftest_index("hostile_scribble").unwrap();
        assert_eq!(
            s.row_name(TABLE_SELFTEST, row).as_deref(),
            Some("hostile_scribble")
        );
        assert_eq!(
            s.row_name(TABLE_ALIAS, 0),
            Some(blob.aliases[0].name.clone())
        );
        let past = blob.selftests.len() as u64;
        assert_eq!(s.row_name(TABLE_SELFTEST, past), None);
        assert_eq!(s.row_name(TABLE_SELFTEST, u64::MAX), None);
        assert_eq!(s.row_name(7, 0), None);
    }

    #[test]
    fn options_are_validated_before_any_vm() {
        let mut o = VmOptions {
            mem: 256 << 20,
            backing: Backing::Anon,
            prefault: false,
            privilege: Privilege::User,
            blob: crate::blob::Blob::get(crate::blob::LinkConfig::Vanilla).unwrap(),
            vcpus: 1,
            seed: 0,
            vm_type: VmType::Normal,
        };
        assert!(validate(&o).is_ok());
        o.mem = (256 << 20) + 4096;
        assert!(matches!(validate(&o), Err(Error::Usage(_))));
        o.mem = 256 << 20;
        o.vcpus = abi::MAX_VCPUS + 1;
        assert!(matches!(validate(&o), Err(Error::Usage(_))));
    }
}
