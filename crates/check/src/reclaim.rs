//! `hypclear reclaim`: pKVM's promise that "reclaimed memory is zeroed by
//! the hypervisor", checked from userspace, with a control that shows the
//! check can fail.
//!
//! One run: a VM of `mem` bytes whose guest writes a seeded pattern over
//! the arena (guest RAM from `arch::ARENA_BASE` to the edge region: every
//! page but the harness's first 16 MiB of page tables, mailboxes, stacks
//! and blob window, and the last 2 MiB, where the edge checks' hole is
//! unmapped) with the blob's own `__pi_memset` (one call per page, the byte
//! stepping per page), timed by the guest counter and reported over the
//! doorbell (`vmm::Vcpu::sealed_call`: the host must not read a protected
//! guest's RAM while it lives), then powers off. The host closes the vCPU
//! and VM fds (timed: the hypervisor reclaims the guest's pages in there)
//! and reads every arena page, plus two pages it wrote before the start
//! and the guest used (the vCPU's mailbox page and the blob's entry code
//! page). A protected VM must leave all of them zero; the control, the
//! same run as an ordinary VM, must leave the pattern.
//!
//! No fork while a protected VM lives (a fork copies the pinned pages and
//! so makes the hypervisor reclaim them under the guest): nothing between
//! `Vm::new` and `Vm::destroy` here spawns a process or a thread, and the
//! VMM marks the protected guest's RAM `MADV_DONTFORK`.
use crate::arch;
use crate::blob::Blob;
use crate::error::{Error, Result};
use crate::ktap::{Document, Outcome, Test};
use crate::vmm::memory::{Backing, GuestRam};
use crate::vmm::{Args, Command, Privilege, Vm, VmOptions, VmType};
use hypclear_abi as abi;
use rand_core::{Rng, SeedableRng};
use serde::Serialize;
use std::time::Duration;

const PAGE: u64 = abi::PAGE_SIZE;

/// What one `hypclear reclaim` does.
#[derive(Debug, Clone)]
pub struct ReclaimOptions {
    pub mem: u64,
    pub seed: u64,
    pub backing: Backing,
    /// Watchdog for the guest's fill (the boot included).
    pub timeout: Duration,
    /// Run the control (an ordinary VM) after the protected one.
    pub control: bool,
}

/// The seeded pattern: page `i` of the arena is filled with byte
/// `first + i * step` (mod 256). `first` is odd and `step` even, so no
/// page's byte is zero. It is memset's second argument stepped per call
/// (`Args::a1_step`), memset using its low byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Pattern {
    pub first: u8,
    pub step: u8,
}

impl Pattern {
    pub(crate) fn from_seed(seed: u64) -> Pattern {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x0072_6563_6c61_696d);
        let r = rng.next_u64();
        Pattern {
            first: (r as u8) | 1,
            step: ((r >> 8) as u8 & 0xfe).max(2),
        }
    }

    /// The byte of arena page `page`.
    pub(crate) fn byte(self, page: u64) -> u8 {
        self.first
            .wrapping_add((page as u8).wrapping_mul(self.step))
    }

    /// memset(va + i * PAGE, byte(i), PAGE) for i in 0..pages.
    pub(crate) fn args(self, va: u64, pages: u64) -> Args {
        Args {
            a0: va,
            a0_step: PAGE,
            a1: u64::from(self.first),
            a1_step: u64::from(self.step),
            a2: PAGE,
            count: pages,
        }
    }
}

/// The first byte of a page that is not what it should be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Mismatch {
    /// Guest-physical address of the page.
    pub page: u64,
    pub offset: u64,
    pub found: u8,
    pub wanted: u8,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "page {:#x} offset {:#x} reads {:#04x} (expected {:#04x})",
            self.page, self.offset, self.found, self.wanted
        )
    }
}

/// Index of the first byte of `buf` that is not `want`.
pub(crate) fn first_not(buf: &[u8], want: u8) -> Option<usize> {
    // Word at a time; the byte search only inside the word that differs.
    let word = u64::from_ne_bytes([want; 8]);
    let (head, words, _) = {
        // SAFETY: u64 has no invalid bit patterns; align_to only splits.
        unsafe { buf.align_to::<u64>() }
    };
    if let Some(i) = head.iter().position(|&b| b != want) {
        return Some(i);
    }
    let w = words.iter().position(|&w| w != word).unwrap_or(words.len());
    let from = head.len() + w * 8;
    buf[from..]
        .iter()
        .position(|&b| b != want)
        .map(|i| from + i)
}

/// What the host read back over a run of arena pages.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Scan {
    pub pages: u64,
    /// Pages that read all zero.
    pub zero_pages: u64,
    /// Pages that hold their pattern byte throughout.
    pub pattern_pages: u64,
    pub first_nonzero: Option<Mismatch>,
    pub first_unpatterned: Option<Mismatch>,
}

impl Scan {
    /// Add the pages of `buf` (whole pages), the first being arena page
    /// `index` at guest-physical `gpa`.
    pub(crate) fn add(&mut self, buf: &[u8], gpa: u64, index: u64, pattern: Pattern) {
        for (i, page) in buf.chunks(PAGE as usize).enumerate() {
            let (n, at) = (index + i as u64, gpa + i as u64 * PAGE);
            let want = pattern.byte(n);
            self.pages += 1;
            let mismatch = |off: usize, wanted| Mismatch {
                page: at,
                offset: off as u64,
                found: page[off],
                wanted,
            };
            match first_not(page, 0) {
                None => self.zero_pages += 1,
                Some(off) if self.first_nonzero.is_none() => {
                    self.first_nonzero = Some(mismatch(off, 0));
                }
                Some(_) => {}
            }
            match first_not(page, want) {
                None => self.pattern_pages += 1,
                Some(off) if self.first_unpatterned.is_none() => {
                    self.first_unpatterned = Some(mismatch(off, want));
                }
                Some(_) => {}
            }
        }
    }
}

/// A page the host wrote before the start and the guest used.
#[derive(Debug, Clone, Serialize)]
pub struct HostPage {
    pub name: &'static str,
    pub gpa: u64,
    pub first_nonzero: Option<Mismatch>,
}

/// One check of a run, and what the VM type makes of it.
#[derive(Debug, Clone, Serialize)]
pub struct Expectation {
    /// "reads zero" or "pattern kept".
    pub check: &'static str,
    pub expected: bool,
    pub observed: bool,
    pub detail: String,
}

impl Expectation {
    pub fn passed(&self) -> bool {
        self.expected == self.observed
    }
}

/// One VM's run: the fill, the teardown, what the host read back.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub vm_type: VmType,
    pub mem: u64,
    /// The arena the guest filled: first page and bytes.
    pub fill_gpa: u64,
    pub fill_bytes: u64,
    pub fill_ticks: u64,
    pub fill_seconds: f64,
    pub fill_mb_s: f64,
    /// Closing the vCPU and VM fds (the hypervisor's reclaim).
    pub teardown_seconds: f64,
    /// `fill_bytes` (about the pages the guest owned) over the teardown.
    pub teardown_mb_s: f64,
    pub arena: Scan,
    pub host_pages: Vec<HostPage>,
    pub expectations: Vec<Expectation>,
}

/// MB (2^20 bytes, as --mem counts) per second.
pub(crate) fn mb_per_s(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 / f64::from(1u32 << 20) / seconds
    } else {
        0.0
    }
}

impl RunReport {
    pub fn passed(&self) -> bool {
        self.expectations.iter().all(Expectation::passed)
    }
}

/// The two checks of a run, given what the host read: a protected VM must
/// read zero and have lost the pattern, an ordinary one the reverse.
pub(crate) fn expectations(
    vm_type: VmType,
    arena: &Scan,
    host_pages: &[HostPage],
) -> Vec<Expectation> {
    let protected = vm_type == VmType::Protected;
    let host_dirty = host_pages.iter().find(|p| p.first_nonzero.is_some());
    let zero = arena.zero_pages == arena.pages && host_dirty.is_none();
    let zero_detail = match (arena.first_nonzero, host_dirty) {
        (Some(m), _) => format!(
            "{}/{} arena pages zero; first non-zero: {m}",
            arena.zero_pages, arena.pages
        ),
        (None, Some(p)) => format!(
            "arena zero, but the {} is not: {}",
            p.name,
            p.first_nonzero.map_or(String::new(), |m| m.to_string())
        ),
        (None, None) => format!(
            "{}/{} arena pages and the {} zero",
            arena.zero_pages,
            arena.pages,
            host_pages
                .iter()
                .map(|p| p.name)
                .collect::<Vec<_>>()
                .join(" and ")
        ),
    };
    let kept = arena.pattern_pages == arena.pages;
    let kept_detail = match arena.first_unpatterned {
        Some(m) => format!(
            "{}/{} pages hold their byte; first that does not: {m}",
            arena.pattern_pages, arena.pages
        ),
        None => format!(
            "{}/{} pages hold their byte",
            arena.pattern_pages, arena.pages
        ),
    };
    vec![
        Expectation {
            check: "reads zero",
            expected: protected,
            observed: zero,
            detail: zero_detail,
        },
        Expectation {
            check: "pattern kept",
            expected: !protected,
            observed: kept,
            detail: kept_detail,
        },
    ]
}

/// The host's kernel and KVM mode, as the report names them.
#[derive(Debug, Clone, Serialize)]
pub struct HostKernel {
    pub release: String,
    pub kvm_arm_mode: Option<arch::KvmArmMode>,
}

impl HostKernel {
    pub(crate) fn collect() -> HostKernel {
        HostKernel {
            release: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into()),
            kvm_arm_mode: arch::kvm_arm_mode(),
        }
    }
}

impl std::fmt::Display for HostKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Linux {}, ", self.release)?;
        match &self.kvm_arm_mode {
            Some(m) => write!(f, "kvm-arm.mode={} (from {})", m.mode, m.source),
            None => write!(f, "kvm-arm.mode not set"),
        }
    }
}

/// What `hypclear reclaim` found.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Found {
    /// Protected VMs are not offered here: why.
    Skipped(String),
    /// The protected run and its control.
    Ran(Vec<RunReport>),
}

/// The whole result.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub host: HostKernel,
    pub pattern: Pattern,
    pub seed: u64,
    pub outcome: Found,
}

/// Whether KVM makes protected VMs here; the reason when it does not.
fn protected_offered(host: &HostKernel) -> Result<std::result::Result<(), String>> {
    if !cfg!(target_arch = "aarch64") {
        return Ok(Err(format!(
            "protected VMs are pKVM's (arm64, Linux 7.1+, kvm-arm.mode=protected); this host is {} \
             (Linux {})",
            std::env::consts::ARCH,
            host.release
        )));
    }
    let kvm = crate::vmm::open_kvm()?;
    Ok(arch::create_vm(&kvm, VmType::Protected)
        .map(drop)
        .map_err(|e| format!("{e} (this host: {host})")))
}

/// Run the protected VM and its control, or say why it cannot run here.
pub fn run(opts: &ReclaimOptions) -> Result<Report> {
    crate::vmm::validate_mem(opts.mem)?;
    let host = HostKernel::collect();
    let pattern = Pattern::from_seed(opts.seed);
    let report = |outcome| Report {
        host: host.clone(),
        pattern,
        seed: opts.seed,
        outcome,
    };
    if let Err(why) = protected_offered(&host)? {
        return Ok(report(Found::Skipped(why)));
    }
    let blob = Blob::get(crate::blob::LinkConfig::Vanilla)?;
    let mut runs = Vec::new();
    let types: &[VmType] = if opts.control {
        &[VmType::Protected, VmType::Normal]
    } else {
        &[VmType::Protected]
    };
    for &vm_type in types {
        runs.push(run_one(opts, &blob, pattern, vm_type)?);
    }
    Ok(report(Found::Ran(runs)))
}

/// One VM: fill, power off, destroy, read back.
fn run_one(
    opts: &ReclaimOptions,
    blob: &Blob,
    pattern: Pattern,
    vm_type: VmType,
) -> Result<RunReport> {
    let memset = blob.alias_index("memset_generic").ok_or(Error::NoAlias {
        alias: "memset_generic",
    })?;
    let mut vm = reclaim_vm(opts, blob, vm_type)?;
    let fill_gpa = arch::ARENA_BASE;
    // Not the edge region: a store into its hole faults.
    let fill_bytes = vm.ram.end() - arch::EDGE_REGION - fill_gpa;
    let cmd = Command {
        table: abi::TABLE_ALIAS,
        index: memset,
        args: pattern.args(arch::guest_va(fill_gpa), fill_bytes / PAGE),
        returns: crate::vmm::Returns::Dst,
    };
    let host_pages = [
        ("mailbox page", arch::mailbox_gpa(0)),
        (
            "blob entry page",
            (vm.loaded.base + (vm.loaded.entry - vm.loaded.va)) & !(PAGE - 1),
        ),
    ];
    // From here to destroy(): no fork, no thread, no guest RAM access.
    let sealed = vm.vcpu(0)?.sealed_call(&cmd, opts.timeout)?;
    let khz = vm.counter_khz.max(1);
    let (ram, took) = vm.destroy();
    contract_kept(sealed.breach)?;
    let fill_seconds = sealed.ticks() as f64 / (khz as f64 * 1000.0);
    let arena = scan(&ram, fill_gpa, fill_bytes, pattern)?;
    let host_pages = read_host_pages(&ram, host_pages)?;
    Ok(RunReport {
        vm_type,
        mem: opts.mem,
        fill_gpa,
        fill_bytes,
        fill_ticks: sealed.ticks(),
        fill_seconds,
        fill_mb_s: mb_per_s(fill_bytes, fill_seconds),
        teardown_seconds: took.as_secs_f64(),
        teardown_mb_s: mb_per_s(fill_bytes, took.as_secs_f64()),
        expectations: expectations(vm_type, &arena, &host_pages),
        arena,
        host_pages,
    })
}

/// The one-vCPU VM of one run, of `vm_type`.
fn reclaim_vm(opts: &ReclaimOptions, blob: &Blob, vm_type: VmType) -> Result<Vm> {
    let vm = Vm::new(
        crate::vmm::open_kvm()?,
        &VmOptions {
            mem: opts.mem,
            backing: opts.backing,
            prefault: false,
            // EL1: the guest powers off with HVC.
            privilege: Privilege::Kernel,
            blob: blob.clone(),
            vcpus: 1,
            seed: opts.seed,
            vm_type,
        },
    )?;
    Ok(vm)
}

/// Read back the pages the host wrote (name, guest-physical address):
/// where each first holds a byte other than zero.
fn read_host_pages(ram: &GuestRam, pages: [(&'static str, u64); 2]) -> Result<Vec<HostPage>> {
    pages
        .into_iter()
        .map(|(name, gpa)| {
            let mut page = vec![0u8; PAGE as usize];
            ram.read_into(gpa, &mut page)?;
            Ok(HostPage {
                name,
                gpa,
                first_nonzero: first_not(&page, 0).map(|off| Mismatch {
                    page: gpa,
                    offset: off as u64,
                    found: page[off],
                    wanted: 0,
                }),
            })
        })
        .collect()
}

/// The fill's call contract: a breach stopped the fill at that call, so
/// what the host reads back would say nothing about the reclaim.
fn contract_kept(breach: Option<crate::vmm::Breach>) -> Result<()> {
    match breach {
        None => Ok(()),
        Some(breach) => Err(Error::ReclaimUnchecked { breach }),
    }
}

/// Read `[gpa, gpa + len)` back in 1 MiB pieces.
fn scan(ram: &GuestRam, gpa: u64, len: u64, pattern: Pattern) -> Result<Scan> {
    const PIECE: u64 = 1 << 20;
    let mut s = Scan::default();
    let mut buf = vec![0u8; PIECE as usize];
    let mut off = 0;
    while off < len {
        let n = PIECE.min(len - off);
        let piece = &mut buf[..n as usize];
        ram.read_into(gpa + off, piece)?;
        s.add(piece, gpa + off, off / PAGE, pattern);
        off += n;
    }
    Ok(s)
}

/// The KTAP document: one test per VM, a leaf per check (`ok` when the
/// check came out as that VM type expects), or the skip.
pub fn ktap(report: &Report) -> Document {
    let runs = match &report.outcome {
        Found::Skipped(why) => return Document::SkipAll(why.clone()),
        Found::Ran(runs) => runs,
    };
    let yes = |b: bool| if b { "yes" } else { "no" };
    let tests = runs
        .iter()
        .map(|r| {
            let leaves = r
                .expectations
                .iter()
                .map(|e| {
                    Test::leaf(
                        format!("{} (expected: {})", e.check, yes(e.expected)),
                        Outcome::of(e.passed()),
                    )
                    .with_diagnostics([format!(
                        "{}: {} ({})",
                        e.check,
                        yes(e.observed),
                        e.detail
                    )])
                })
                .collect();
            Test::parent(run_name(r.vm_type), leaves).with_diagnostics([format!(
                "{}: fill {:.1} MB/s, teardown {:.3} s ({:.1} MB/s)",
                run_name(r.vm_type),
                r.fill_mb_s,
                r.teardown_seconds,
                r.teardown_mb_s
            )])
        })
        .collect();
    Document::Tests(vec![Test::parent("reclaim", tests)])
}

/// How a run is named in the tables.
pub fn run_name(t: VmType) -> &'static str {
    match t {
        VmType::Protected => "protected",
        VmType::Normal => "control (normal VM)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pattern_is_seeded_and_never_zero() {
        let p = Pattern::from_seed(1);
        assert_eq!(p, Pattern::from_seed(1));
        assert_ne!(p, Pattern::from_seed(2));
        for seed in 0..64 {
            let p = Pattern::from_seed(seed);
            assert!((0..1024).all(|i| p.byte(i) != 0), "{p:?}");
        }
        // The guest steps memset's byte argument; its low byte is ours.
        let a = p.args(0x4100_0000, 300);
        for i in [0u64, 1, 255, 299] {
            assert_eq!((a.a1 + i * a.a1_step) as u8, p.byte(i));
        }
        assert_eq!((a.a0_step, a.a2, a.count), (PAGE, PAGE, 300));
    }

    #[test]
    fn first_not_finds_the_first_odd_byte_anywhere() {
        let mut b = vec![0u8; 4096 + 3];
        assert_eq!(first_not(&b, 0), None);
        for at in [0, 1, 7, 8, 9, 4095, 4097, 4098] {
            b[at] = 1;
            assert_eq!(first_not(&b, 0), Some(at), "{at}");
            assert_eq!(first_not(&b[1..], 0), at.checked_sub(1), "{at}");
            b[at] = 0;
        }
        assert_eq!(first_not(&[], 0), None);
        assert_eq!(first_not(&[5u8; 17], 5), None);
    }

    fn filled(p: Pattern, pages: u64) -> Vec<u8> {
        (0..pages)
            .flat_map(|i| vec![p.byte(i); PAGE as usize])
            .collect()
    }

    #[test]
    fn a_scan_counts_zero_and_pattern_pages_and_names_the_first_bad_one() {
        let p = Pattern::from_seed(7);
        let mut s = Scan::default();
        s.add(&vec![0u8; 3 * PAGE as usize], 0x4100_0000, 0, p);
        assert_eq!((s.pages, s.zero_pages, s.pattern_pages), (3, 3, 0));
        let m = s.first_unpatterned.unwrap();
        assert_eq!(
            (m.page, m.offset, m.found, m.wanted),
            (0x4100_0000, 0, 0, p.byte(0))
        );
        let mut buf = filled(p, 4);
        buf[2 * PAGE as usize + 100] ^= 0xff;
        let mut s = Scan::default();
        s.add(&buf, 0x4100_0000, 0, p);
        assert_eq!((s.zero_pages, s.pattern_pages), (0, 3));
        let m = s.first_unpatterned.unwrap();
        assert_eq!((m.page, m.offset), (0x4100_2000, 100));
        // A later piece carries on the page numbering.
        let mut s = Scan::default();
        s.add(&filled(p, 8)[4 * PAGE as usize..], 0x4100_4000, 4, p);
        assert_eq!(s.pattern_pages, 4);
    }

    #[test]
    fn a_fill_that_broke_the_contract_judges_no_reclaim() {
        assert!(contract_kept(None).is_ok());
        let b = crate::vmm::contract::decode(abi::BREACH_RETURN, 1, 2, 1).unwrap();
        let e = contract_kept(b).unwrap_err().to_string();
        assert!(e.contains("returned 0x1, want dst 0x2"), "{e}");
    }

    #[test]
    fn the_expectations_flip_with_the_vm_type() {
        let p = Pattern::from_seed(3);
        let (mut zero, mut kept) = (Scan::default(), Scan::default());
        zero.add(&vec![0u8; 2 * PAGE as usize], 0x4100_0000, 0, p);
        kept.add(&filled(p, 2), 0x4100_0000, 0, p);
        let clean = [HostPage {
            name: "mailbox page",
            gpa: 0x4010_0000,
            first_nonzero: None,
        }];
        let pass = |t, s: &Scan, h: &[HostPage]| {
            expectations(t, s, h)
                .iter()
                .map(Expectation::passed)
                .collect::<Vec<_>>()
        };
        assert_eq!(pass(VmType::Protected, &zero, &clean), [true, true]);
        assert_eq!(pass(VmType::Normal, &kept, &clean), [true, true]);
        // The mutation the control is: a VM that keeps its memory fails
        // "reads zero" as a protected VM, and zeroed memory fails the control.
        assert_eq!(pass(VmType::Protected, &kept, &clean), [false, false]);
        assert_eq!(pass(VmType::Normal, &zero, &clean), [false, false]);
        let e = &expectations(VmType::Protected, &kept, &clean)[0];
        assert!(
            e.detail
                .contains("first non-zero: page 0x41000000 offset 0x0"),
            "{}",
            e.detail
        );
        // A host-written page left behind fails "reads zero" alone.
        let dirty = [HostPage {
            first_nonzero: Some(Mismatch {
                page: 0x4010_0000,
                offset: 0,
                found: 0x72,
                wanted: 0,
            }),
            ..clean[0].clone()
        }];
        let e = expectations(VmType::Protected, &zero, &dirty);
        assert!(!e[0].passed() && e[1].passed());
        assert!(
            e[0].detail.contains("mailbox page is not"),
            "{}",
            e[0].detail
        );
    }

    #[test]
    fn ktap_has_a_leaf_per_check_and_skips_with_the_reason() {
        let r = Report {
            host: HostKernel {
                release: "6.12".into(),
                kvm_arm_mode: None,
            },
            pattern: Pattern::from_seed(1),
            seed: 1,
            outcome: Found::Skipped("no pKVM here".into()),
        };
        assert_eq!(
            ktap(&r).render(),
            "KTAP version 1\n1..0 # SKIP no pKVM here\n"
        );
        let p = Pattern::from_seed(1);
        let mut zero = Scan::default();
        zero.add(&vec![0u8; PAGE as usize], 0x4100_0000, 0, p);
        let run = RunReport {
            vm_type: VmType::Normal,
            mem: 32 << 20,
            fill_gpa: 0x4100_0000,
            fill_bytes: PAGE,
            fill_ticks: 10,
            fill_seconds: 0.1,
            fill_mb_s: 0.04,
            teardown_seconds: 1.0,
            teardown_mb_s: 0.004,
            expectations: expectations(VmType::Normal, &zero, &[]),
            arena: zero,
            host_pages: vec![],
        };
        let text = ktap(&Report {
            outcome: Found::Ran(vec![run]),
            ..r
        })
        .render();
        assert!(
            text.contains("not ok 1 reads zero (expected: no)"),
            "{text}"
        );
        assert!(
            text.contains("not ok 2 pattern kept (expected: yes)"),
            "{text}"
        );
        assert!(text.contains("not ok 1 control (normal VM)"), "{text}");
    }
}
