//! `hypclear bench`: perf-bench-style throughput of the blob's routines
//! inside the guest, side by side with the same objects on the host.
//!
//! Method (as in the seed discussion, made rigorous after Kalibera & Jones):
//! in each of `--sessions` fresh VMs, at least `--warmup` unmeasured runs,
//! extended until the throughput is steady (up to `--max-warmup`), then
//! `--repeats` measured runs; every timed pass starts from the `--cache`
//! precondition, guest and host alike. Link configurations alternate their
//! order by session (ABBA). Guest
//! timestamps come from the guest counter around the call loop and are
//! converted with the vCPU's counter frequency. An untimed verification
//! pass before and after every session's runs checks the routine, so a fast
//! but wrong routine never produces a number (and no timed run starts from
//! a state the check left behind); each run carries its KVM binary-stats deltas and runs disturbed
//! by instruction emulation are flagged and left out of the statistics.

// The crates below, under the names the modules use.
use hypclear_arch as arch;
use hypclear_check as check;
use hypclear_format::{ktap, table, text, units};
use hypclear_kernel as kernel;
use hypclear_process::{files, interrupt};
use hypclear_routines as routines;
use hypclear_vmm as vmm;
use hypclear_vmm::{blob, error};
pub mod ab;
pub mod compare;
pub mod explain;
/// Fuzz harnesses of `compare`'s input and the KTAP/rst writers: for
/// `fuzz/` (feature `fuzzing`) and the corpus replay tests.
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz;
pub(crate) mod guest;
pub(crate) mod host;
pub(crate) mod inference;
pub mod plan;
pub mod precision;
pub mod report;
pub(crate) mod sched;
pub mod sequence;
pub mod sides;
pub mod stats;

pub use plan::{CellSpec, Plan, PlanSide};

pub use sequence::Steady;

use crate::arch::CpuCaps;
use crate::blob::LinkConfig;
use crate::check::checker::Patterns;
use crate::error::Result;
use crate::kernel::side::SideKind;
use crate::routines::privilege::PrivilegeChoice;
use crate::routines::{Kind, Routine};
use crate::stats::{PairedRatio, SessionRatio, Summary};
use crate::vmm::host::HostInfo;
use crate::vmm::memory::Backing;
use crate::vmm::{Vm, VmOptions};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// One call over the whole size.
    Oneshot,
    /// Chunk by chunk, ascending addresses.
    Forward,
    /// Chunk by chunk, descending addresses.
    Reverse,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum PageState {
    /// First touch inside the measurement: the pages are dropped before
    /// every pass (MADV_DONTNEED), so KVM and the host fault them back in.
    Demand,
    /// Pre-faulted: the memory is warm from the warm-up runs.
    Populate,
}

/// How the timed threads are scheduled (`--priority`): a busy machine
/// preempts a normal thread in the middle of a pass, and such a run is
/// repeated (the sample rule); the higher the priority, the fewer repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    /// SCHED_FIFO (priority 1) during every timed pass, guest and host
    /// alike, and nice -10 around them; needs root or CAP_SYS_NICE, else
    /// falls back to `nice`, then `normal`
    Fifo,
    /// nice -10 for the whole run (root, CAP_SYS_NICE or RLIMIT_NICE)
    Nice,
    /// As the process was started.
    Normal,
}

/// The state every timed pass starts from (`--cache`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Cache {
    /// The target (and a copy's source) written back and evicted from every
    /// cache level before each timed pass, guest and host alike (the
    /// kernel clears pages that are not in the cache).
    Cold,
    /// No eviction: the steady state of the routine running back to back.
    Warm,
}

impl Cache {
    /// How the precondition reads in a table header.
    pub fn describe(self) -> &'static str {
        match self {
            Cache::Cold => "cold cache (target evicted before every timed pass, guest and host)",
            Cache::Warm => "warm cache (passes back to back, no eviction)",
        }
    }
}

/// The axes of one benchmark cell (each a column in the output). The
/// JSON spells them as before they were typed (`"routine": "memset"`,
/// `"config": "vanilla"`, `"backing": "anon"`), so old files load.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Axes {
    pub routine: Routine,
    /// A variant name of the side's blob (built-in or kernel).
    pub variant: String,
    /// Index into [`BenchResult::sides`]; files written before sides have
    /// none, and [`BenchResult::upgrade`] derives it from `config`.
    #[serde(default)]
    pub side: usize,
    pub config: LinkConfig,
    pub chunk: u64,
    pub order: Order,
    pub fill: PageState,
    pub backing: Backing,
    /// The plan's size, passes per run and vCPUs (JSON: `size`, `loops`,
    /// `vcpus` beside the other axes, as before).
    #[serde(flatten)]
    pub shape: Shape,
}

/// What a bench's passes are made of, the same for every cell: bytes per
/// pass (`-s`), passes per run (`-l`), vCPUs at once (`--vcpus`). One
/// place for [`Plan`] and every cell's [`Axes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Shape {
    pub size: u64,
    pub loops: u64,
    pub vcpus: u64,
}

impl Axes {
    /// A 1 MB `memset erms` cell of `config` at `chunk` (the unit tests'
    /// usual cell).
    #[cfg(test)]
    pub(crate) fn test_memset(config: LinkConfig, chunk: u64) -> Axes {
        Axes {
            routine: Routine::Memset,
            variant: "erms".into(),
            side: 0,
            config,
            chunk,
            order: Order::Forward,
            fill: PageState::Populate,
            backing: Backing::Anon,
            shape: Shape {
                size: 1 << 20,
                loops: 1,
                vcpus: 1,
            },
        }
    }

    /// One-line name, like a perf bench benchmark name (without the side).
    pub(crate) fn label(&self) -> String {
        self.label_with(true)
    }

    /// The name with or without the link configuration.
    pub(crate) fn label_with(&self, config: bool) -> String {
        let mut parts = vec![self.routine.name().to_string(), self.variant.clone()];
        if config {
            parts.push(self.config.name().to_string());
        }
        parts.push(format!(
            "-s {} -k {}",
            crate::units::format_size(self.shape.size),
            crate::units::format_size(self.chunk)
        ));
        if self.shape.loops > 1 {
            parts.push(format!("-l {}", self.shape.loops));
        }
        parts.push(format!("{:?}", self.order).to_lowercase());
        parts.push(format!("{:?}", self.fill).to_lowercase());
        parts.push(self.backing.to_string());
        if self.shape.vcpus > 1 {
            parts.push(format!("x{} vCPUs", self.shape.vcpus));
        }
        parts.join(" ")
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn is_zero_f(v: &f64) -> bool {
    *v == 0.0
}

fn is_false(v: &bool) -> bool {
    !*v
}

/// One measured (or warm-up) run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sample {
    pub session: u64,
    pub run: u64,
    pub bytes: u64,
    pub ns: f64,
    pub bytes_per_sec: f64,
    /// Counter ticks (TSC / CNTVCT) per byte.
    pub ticks_per_byte: f64,
    pub verified: bool,
    /// Left out of the statistics and repeated (the sample rule,
    /// [`plan::SampleRule`]): the run lost time to other tasks
    /// (`lost_time`), or ran emulated code where the session's other runs
    /// did not.
    pub disturbed: bool,
    /// The guest run executed emulated code (`insn_emulation` beyond the
    /// doorbells); older files: not recorded.
    #[serde(default, skip_serializing_if = "is_false")]
    pub emulated: bool,
    /// Involuntary context switches of the running thread(s) during the
    /// timed passes (see [`sched`]); 0 in older files.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub preempted: u64,
    /// Time the running thread(s) spent off the CPU during the timed
    /// passes, ns.
    #[serde(default, skip_serializing_if = "is_zero_f")]
    pub off_cpu_ns: f64,
    /// Preempted for more than [`sched::OFF_CPU_TOLERANCE`] of the pass.
    #[serde(default, skip_serializing_if = "is_false")]
    pub lost_time: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_vcpu_bytes_per_sec: Vec<f64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kvm_stats: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cell {
    pub axes: Axes,
    pub guest: Vec<Sample>,
    pub host: Vec<Sample>,
    pub guest_bytes_per_sec: Option<Summary>,
    pub guest_ticks_per_byte: Option<Summary>,
    pub host_bytes_per_sec: Option<Summary>,
    /// guest/host: the estimate of [`Cell::guest_host`] (files before it:
    /// median guest bytes/s / median host bytes/s).
    pub guest_host_ratio: Option<f64>,
    /// guest/host as a paired per-session estimate with its interval
    /// ([`PairedRatio`]); `None` without a host baseline and in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_host: Option<PairedRatio>,
    pub disturbed_runs: u64,
    /// Whether the cell has figures: the summaries and guest/host are
    /// `None` unless it is [`CellState::Measured`].
    #[serde(default)]
    pub state: CellState,
    /// Untimed verification passes (one before and one after the timed
    /// runs of every session).
    pub verified_runs: u64,
    /// The warm-up runs (unmeasured), in order; empty in older files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guest_warmup: Vec<Sample>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_warmup: Vec<Sample>,
    /// Warm-up used and whether the runs settled, per session.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guest_steady: Vec<Steady>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_steady: Vec<Steady>,
    /// Share of guest RAM and of the host buffer on huge pages after each
    /// session's runs (what THP granted); empty in older files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub huge_share: Vec<HugeShare>,
}

/// Share (0..=1) of memory on huge pages in one session, guest RAM and
/// host buffer; `None` where /proc/self/smaps did not say.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HugeShare {
    pub session: u64,
    pub guest: Option<f64>,
    pub host: Option<f64>,
}

/// The least share of the resident guest RAM and host buffer on huge
/// pages over a cell's sessions (`None`: not known, e.g. no smaps or no
/// host baseline).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct HugeShares {
    pub guest: Option<f64>,
    pub host: Option<f64>,
}

impl HugeShares {
    pub(crate) fn of(c: &Cell) -> HugeShares {
        let least = |side: fn(&crate::HugeShare) -> Option<f64>| {
            c.huge_share.iter().filter_map(side).min_by(f64::total_cmp)
        };
        HugeShares {
            guest: least(|s| s.guest),
            host: least(|s| s.host),
        }
    }

    /// "97%/100%": guest, then host.
    pub(crate) fn text(self) -> String {
        format!("{}/{}", share_pct(self.guest), share_pct(self.host))
    }
}

/// "97%", or "?" when not known.
pub(crate) fn share_pct(v: Option<f64>) -> String {
    v.map_or("?".into(), |v| format!("{:.0}%", v * 100.0))
}

impl Cell {
    /// A cell with samples and no summaries yet (see [`summarize`]).
    pub(crate) fn new(axes: Axes, guest: Vec<Sample>, host: Vec<Sample>) -> Cell {
        Cell {
            axes,
            guest,
            host,
            guest_bytes_per_sec: None,
            guest_ticks_per_byte: None,
            host_bytes_per_sec: None,
            guest_host_ratio: None,
            guest_host: None,
            disturbed_runs: 0,
            state: CellState::Measured,
            verified_runs: 0,
            guest_warmup: vec![],
            host_warmup: vec![],
            guest_steady: vec![],
            host_steady: vec![],
            huge_share: vec![],
        }
    }
}

/// The undisturbed samples: the same rule on both sides, nothing kept
/// on one side that the other drops.
fn undisturbed(samples: &[Sample]) -> Vec<&Sample> {
    samples.iter().filter(|s| !s.disturbed).collect()
}

/// The runs of one side of a cell under the sample rule, over its sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCounts {
    pub sessions: u64,
    /// Sessions short of `--repeats` undisturbed runs: they reached
    /// `--max-runs` first.
    pub short_sessions: u64,
    /// Undisturbed measured runs (what the statistics would use).
    pub undisturbed: u64,
    /// Measured runs made, disturbed ones included.
    pub attempted: u64,
    /// `--repeats` x sessions.
    pub wanted: u64,
}

impl RunCounts {
    /// The counts of `samples` (measured runs of one side) with `repeats`
    /// wanted per session; `None` without samples.
    pub(crate) fn of(samples: &[Sample], repeats: u64) -> Option<RunCounts> {
        let mut per: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        for s in samples {
            let e = per.entry(s.session).or_default();
            e.0 += u64::from(!s.disturbed);
            e.1 += 1;
        }
        (!per.is_empty()).then(|| RunCounts {
            sessions: per.len() as u64,
            short_sessions: per.values().filter(|(u, _)| *u < repeats).count() as u64,
            undisturbed: per.values().map(|v| v.0).sum(),
            attempted: per.values().map(|v| v.1).sum(),
            wanted: repeats * per.len() as u64,
        })
    }

    /// `"5/12 undisturbed in 48 runs, 2/4 sessions short"`.
    pub fn text(&self) -> String {
        format!(
            "{}/{} undisturbed in {} runs, {}/{} sessions short",
            self.undisturbed, self.wanted, self.attempted, self.short_sessions, self.sessions
        )
    }
}

/// The fewest undisturbed runs a side may be reported with.
pub(crate) const MIN_RUNS: u64 = 3;

/// Whether a cell has figures (issue 26). Only a measured cell has
/// summaries and a guest/host; the others say why not, with the counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum CellState {
    /// Every session has `--repeats` undisturbed runs on each side, and
    /// each side at least [`MIN_RUNS`] (files before the sample rule load
    /// as measured).
    #[default]
    Measured,
    /// A session reached `--max-runs` short of `--repeats` undisturbed
    /// runs: the machine was too busy to measure the cell.
    UnmeasurableUnderLoad {
        guest: RunCounts,
        host: Option<RunCounts>,
    },
    /// Fewer than [`MIN_RUNS`] undisturbed runs a side by design
    /// (`--sessions` x `--repeats`).
    TooFewRuns {
        guest: RunCounts,
        host: Option<RunCounts>,
    },
    /// No session of the cell finished (interrupted before it).
    NotRun,
}

impl CellState {
    /// The state of a cell's measured `guest` and `host` runs.
    pub(crate) fn of(guest: &[Sample], host: &[Sample], repeats: u64) -> CellState {
        let Some(g) = RunCounts::of(guest, repeats) else {
            return CellState::NotRun;
        };
        let h = RunCounts::of(host, repeats);
        let sides = || std::iter::once(g).chain(h);
        if sides().any(|c| c.short_sessions > 0) {
            CellState::UnmeasurableUnderLoad { guest: g, host: h }
        } else if sides().any(|c| c.undisturbed < MIN_RUNS) {
            CellState::TooFewRuns { guest: g, host: h }
        } else {
            CellState::Measured
        }
    }

    pub fn is_measured(&self) -> bool {
        *self == CellState::Measured
    }

    /// Why there are no figures (empty for a measured cell).
    pub fn text(&self) -> String {
        let counts = |g: &RunCounts, h: &Option<RunCounts>| {
            let mut t = format!("guest {}", g.text());
            if let Some(h) = h {
                t.push_str(&format!("; host {}", h.text()));
            }
            t
        };
        match self {
            CellState::Measured => String::new(),
            CellState::UnmeasurableUnderLoad { guest, host } => {
                format!("unmeasurable under load ({})", counts(guest, host))
            }
            CellState::TooFewRuns { guest, host } => format!(
                "too few runs to report: at least {MIN_RUNS} a side (--sessions x --repeats; {})",
                counts(guest, host)
            ),
            CellState::NotRun => "not run (interrupted before the cell)".into(),
        }
    }
}

/// Runs grouped by session (sessions in order, runs in order), for the
/// session-level statistics of `inference`.
fn by_session_map(samples: &[&Sample]) -> BTreeMap<u64, inference::Session> {
    let mut m: BTreeMap<u64, Vec<(u64, f64)>> = BTreeMap::new();
    for s in samples {
        m.entry(s.session)
            .or_default()
            .push((s.run, s.bytes_per_sec));
    }
    m.into_iter()
        .map(|(k, mut v)| {
            v.sort_by_key(|x| x.0);
            (
                k,
                inference::Session::new(v.into_iter().map(|x| x.1).collect()),
            )
        })
        .collect()
}

/// The sessions of `all` in order, with the runs of `used` (empty where a
/// session has none left).
fn keep_sessions(
    all: &[Sample],
    mut used: BTreeMap<u64, inference::Session>,
) -> Vec<inference::Session> {
    let ids: std::collections::BTreeSet<u64> = all.iter().map(|s| s.session).collect();
    ids.into_iter()
        .map(|k| {
            used.remove(&k)
                .unwrap_or_else(|| inference::Session::new(vec![]))
        })
        .collect()
}

impl Cell {
    /// The guest runs the statistics use: the undisturbed ones of a
    /// measured cell (none otherwise), as in [`summarize`].
    pub(crate) fn guest_used(&self) -> Vec<&Sample> {
        match self.state.is_measured() {
            true => undisturbed(&self.guest),
            false => vec![],
        }
    }

    /// The host runs the statistics use, by the same rule.
    pub(crate) fn host_used(&self) -> Vec<&Sample> {
        match self.state.is_measured() {
            true => undisturbed(&self.host),
            false => vec![],
        }
    }

    /// Guest sessions (see [`Cell::guest_used`]); a session whose runs
    /// were all left out stays, empty, so interleaved pairs keep their
    /// partners.
    pub(crate) fn guest_sessions(&self) -> Vec<inference::Session> {
        keep_sessions(&self.guest, by_session_map(&self.guest_used()))
    }

    /// Host sessions (see [`Cell::host_used`]), empty ones kept.
    pub(crate) fn host_sessions(&self) -> Vec<inference::Session> {
        keep_sessions(&self.host, by_session_map(&self.host_used()))
    }

    /// guest/host per session (sessions with used runs on both sides), in
    /// session order, and their paired estimate at 95%.
    pub(crate) fn paired_ratio(&self) -> Option<PairedRatio> {
        let guest = by_session_map(&self.guest_used());
        let host = by_session_map(&self.host_used());
        let pairs: Vec<SessionRatio> = guest
            .iter()
            .filter_map(|(&session, g)| {
                let (g, h) = (g.mean()?, host.get(&session)?.mean()?);
                Some(SessionRatio {
                    session,
                    guest: g,
                    host: h,
                    ratio: g / h,
                })
            })
            .collect();
        PairedRatio::of(&pairs, 0.05)
    }

    /// Sessions whose warm-up hit the cap without settling, guest and host.
    pub(crate) fn unsettled(&self) -> (usize, usize) {
        let n = |v: &[Steady]| v.iter().filter(|s| s.settled == Some(false)).count();
        (n(&self.guest_steady), n(&self.host_steady))
    }
}

/// One side of a bench (a built-in link configuration or a kernel blob),
/// as the JSON records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideInfo {
    /// Column name: `vanilla`, `memset`, or the tree directory / blob file.
    pub name: String,
    /// `builtin`, `kernel-tree` or `blob`.
    pub kind: SideKind,
    pub config: LinkConfig,
    /// One line: `built-in vanilla`, `kernel 6.12.57 (/src/linux)`.
    pub label: String,
    /// A kernel side's identity (tree, kernelversion, git HEAD, config
    /// hash, alternatives taken), as the single-tree JSON's `kernel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<serde_json::Value>,
    /// A kernel side's path per routine family, as the built-in variant
    /// that follows it (e.g. memset -> orig): how compare lines a kernel
    /// row up with a built-in one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kernel_paths: BTreeMap<String, String>,
    /// arm64 `--dc-zva`: whether this side's routines could use DC ZVA
    /// (absent: as the privilege gave it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dc_zva: Option<arch::DcZva>,
}

impl SideInfo {
    /// The record of `side`; a kernel side's paths are the built-ins that
    /// run what its alternatives took (arm64 DC ZVA is decided inside the
    /// routine on both sides alike).
    pub fn of(side: &PlanSide) -> SideInfo {
        let mut kernel_paths = BTreeMap::new();
        if let Some(e) = side.external() {
            for fam in crate::kernel::routines::FAMILIES {
                let p = crate::kernel::picks::equivalent(
                    e.arch,
                    fam,
                    &e.applied,
                    e.clear_page_choice.as_ref(),
                    &e.features,
                );
                if let crate::kernel::picks::Equivalent::Builtin { variant, .. } = p {
                    kernel_paths.insert(fam.to_string(), variant.to_string());
                }
            }
        }
        SideInfo {
            name: side.name(),
            kind: side.kind(),
            config: side.config(),
            label: side.describe(),
            kernel: side.external().map(|e| e.report.clone()),
            kernel_paths,
            dc_zva: side.dc_zva,
        }
    }

    pub(crate) fn is_builtin(&self) -> bool {
        self.kind == SideKind::Builtin
    }

    /// The kernel path a cell of this side follows, named as a built-in
    /// variant: a built-in's own variant; a kernel routine's equivalent
    /// (its `kernel` variant) or its own name (x86 clear_page erms/rep/orig
    /// are the kernel's three routines).
    pub(crate) fn path_of(&self, a: &Axes) -> String {
        let fam = a.routine.family(a.config);
        match self.kernel_paths.get(fam.name()) {
            Some(p) if !self.is_builtin() && a.variant == "kernel" => p.clone(),
            _ => a.variant.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchResult {
    pub tool: String,
    pub command: String,
    pub host: HostInfo,
    pub privilege: String,
    pub warmup: u64,
    pub repeats: u64,
    /// Measured runs per session and side at most (the sample rule's
    /// cap); 0 in files before it.
    #[serde(default)]
    pub max_runs: u64,
    /// How the timed threads ran (`--priority`, or what was left when it
    /// was refused) and their niceness; `None` in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<Priority>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nice: Option<i32>,
    /// Sessions run.
    pub sessions: u64,
    /// `--precision`: the target, the sessions it took and the widest
    /// interval; `None` without it and in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<precision::Outcome>,
    /// Not a finished run: written while it was running (after every
    /// finished cell), or SIGINT stopped it. The cells hold the samples
    /// taken so far.
    #[serde(default)]
    pub partial: bool,
    /// Why `partial` once the run has ended early (the signal, the error
    /// or the guest failure); `None` while it runs and in older files.
    #[serde(default)]
    pub partial_reason: Option<String>,
    /// The precondition of every timed pass; `None` in files written before
    /// it was stated.
    #[serde(default)]
    pub cache: Option<Cache>,
    /// Cap of the adaptive warm-up (0: exactly `warmup` runs); 0 in older files.
    #[serde(default)]
    pub max_warmup: u64,
    /// Mean seconds to create a session's VM (the fixed cost of a session
    /// beyond its runs); 0 in older files.
    #[serde(default)]
    pub session_setup_seconds: f64,
    /// The sides, in the order of `Axes::side` (empty in files written
    /// before sides: see [`BenchResult::upgrade`]).
    #[serde(default)]
    pub sides: Vec<SideInfo>,
    /// Sessions it would take to trust a 2% change, from this bench's
    /// spread ([`report::Reproducibility`]); `None` in older files and
    /// with too few measured sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reproducibility: Option<report::Reproducibility>,
    /// The first kernel side's identity (as files of one kernel tree had
    /// it), `null` for built-ins only.
    #[serde(default)]
    pub kernel: Option<serde_json::Value>,
    pub cells: Vec<Cell>,
    /// `--explain`: the attribution of every guest/host gap (empty
    /// without it, and in older files).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub explain: Vec<explain::Explanation>,
    /// `--ab`: the pairs measured A/B in one guest (empty without it, and
    /// in older files); `cells` is then empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ab: Vec<ab::AbRow>,
}

/// A kernel side's paths from a file before sides, as [`SideInfo::of`]
/// decides them from its `applied` sites (x86; arm64 files of that age
/// lack what its paths need). Such files have no site address or jump
/// target: a routine is one site, and the target is read from the
/// summary that file wrote (`fallback memset_orig (no FSRS)`,
/// `ERMS alternative (memset_erms)`).
fn old_kernel_paths(k: &serde_json::Value) -> BTreeMap<String, String> {
    use crate::kernel::{alternatives::Applied, picks};
    let arch = match k["arch"].as_str() {
        Some("X86_64") | Some("x86_64") => crate::kernel::tree::Arch::X86_64,
        _ => return BTreeMap::new(),
    };
    let present: std::collections::BTreeSet<String> = k["features_present"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let mut routines: Vec<String> = Vec::new();
    let applied: Vec<Applied> = k["applied"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| {
            let routine = a["routine"].as_str()?.to_string();
            let summary = a["summary"].as_str().unwrap_or("").to_string();
            let target = summary
                .split_once("fallback ")
                .map(|(_, t)| t)
                .or_else(|| summary.split_once("alternative (").map(|(_, t)| t))
                .and_then(|t| t.split([' ', ')']).next())
                .map(str::to_string);
            if !routines.contains(&routine) {
                routines.push(routine.clone());
            }
            Some(Applied {
                site: routines.iter().position(|r| *r == routine)? as u64,
                routine,
                feature: a["feature"].as_str()?.to_string(),
                taken: a["taken"].as_bool()?,
                target,
                summary,
            })
        })
        .collect();
    crate::kernel::routines::FAMILIES
        .iter()
        .filter_map(
            |&fam| match picks::equivalent(arch, fam, &applied, None, &present) {
                picks::Equivalent::Builtin { variant, .. } => {
                    Some((fam.to_string(), variant.to_string()))
                }
                picks::Equivalent::Unknown { .. } => None,
            },
        )
        .collect()
}

impl BenchResult {
    /// A file from before sides: one side per link configuration in the
    /// order they appear (a kernel side when the file has `kernel`), and
    /// each cell's side from its configuration. Files with sides are kept.
    pub(crate) fn upgrade(&mut self) {
        if !self.sides.is_empty() {
            return;
        }
        for c in &mut self.cells {
            let config = c.axes.config;
            let at = match self.sides.iter().position(|s| s.config == config) {
                Some(i) => i,
                None => {
                    let (kind, name, label) = match &self.kernel {
                        Some(k) => (
                            SideKind::KernelTree,
                            k["tree"]["path"]
                                .as_str()
                                .and_then(|p| std::path::Path::new(p).file_name())
                                .map_or("kernel".into(), |n| n.to_string_lossy().into_owned()),
                            format!(
                                "kernel {} ({})",
                                k["tree"]["kernelversion"].as_str().unwrap_or("?"),
                                k["tree"]["path"].as_str().unwrap_or("?")
                            ),
                        ),
                        None => (
                            SideKind::Builtin,
                            config.name().into(),
                            format!("built-in {config}"),
                        ),
                    };
                    self.sides.push(SideInfo {
                        name,
                        kind,
                        config,
                        label,
                        kernel: self.kernel.clone(),
                        kernel_paths: self
                            .kernel
                            .as_ref()
                            .map(old_kernel_paths)
                            .unwrap_or_default(),
                        dc_zva: None,
                    });
                    self.sides.len() - 1
                }
            };
            c.axes.side = at;
        }
    }

    /// The side record of a cell (a placeholder if the file is damaged).
    pub(crate) fn side_of(&self, c: &Cell) -> SideInfo {
        self.sides
            .get(c.axes.side)
            .cloned()
            .unwrap_or_else(|| SideInfo {
                name: format!("side {}", c.axes.side),
                kind: SideKind::Builtin,
                config: c.axes.config,
                label: format!("side {}", c.axes.side),
                kernel: None,
                kernel_paths: BTreeMap::new(),
                dc_zva: None,
            })
    }
}

/// The cell's state under the sample rule (`repeats` undisturbed runs
/// wanted per session), then the summaries over the undisturbed samples
/// of a measured cell.
pub(crate) fn summarize(cell: &mut Cell, repeats: u64) {
    cell.state = CellState::of(&cell.guest, &cell.host, repeats);
    let use_ = cell.guest_used();
    let bps = Summary::of(&use_.iter().map(|s| s.bytes_per_sec).collect::<Vec<_>>());
    let tpb = Summary::of(&use_.iter().map(|s| s.ticks_per_byte).collect::<Vec<_>>());
    cell.guest_bytes_per_sec = bps;
    cell.guest_ticks_per_byte = tpb;
    cell.host_bytes_per_sec = Summary::of(
        &cell
            .host_used()
            .iter()
            .map(|s| s.bytes_per_sec)
            .collect::<Vec<_>>(),
    );
    cell.disturbed_runs = cell.guest.iter().filter(|s| s.disturbed).count() as u64;
    cell.guest_host = cell.paired_ratio();
    cell.guest_host_ratio = cell.guest_host.as_ref().map(|r| r.estimate);
}

/// One cell in `session` on `vm`: the guest (verified before and after)
/// and, for a built-in side with a host baseline, the host, run by turns
/// (host first in odd sessions), into `c`.
fn run_cell(vm: &mut Vm, spec: &CellSpec, cx: (&Plan, &Patterns, u64), c: &mut Cell) -> Result<()> {
    let (plan, _, session) = cx;
    let khz = vm.counter_khz;
    // A kernel blob's routines exist only in the guest image: no host.
    let mut h = match plan.host_baseline && plan.sides[spec.side].is_builtin() {
        true => host::HostCell::new(spec, cx, khz)?,
        false => None,
    };
    let mut g = guest::GuestCell::new(vm, spec, cx)?;
    let (gs, hs) = sequence::run_pair(
        plan,
        session,
        session % 2 == 1,
        || g.one(),
        h.as_mut().map(|h| move || h.one()),
    )?;
    g.verify()?;
    c.verified_runs += 2;
    c.huge_share.push(HugeShare {
        session,
        guest: vm.ram.huge_share(),
        host: h.as_ref().and_then(|h| h.huge_share()),
    });
    c.guest.extend(gs.measured);
    c.guest_warmup.extend(gs.warmup);
    c.guest_steady.push(gs.steady);
    if let Some(hs) = hs {
        c.host.extend(hs.measured);
        c.host_warmup.extend(hs.warmup);
        c.host_steady.push(hs.steady);
    }
    Ok(())
}

/// Run the cells `idx` of `specs` (one backing and link configuration) on
/// `vm` in session `cx.2`, adding their samples to `cells`, and hands all
/// cells to `after_cell` after each one (the checkpoint). `Ok(false)`
/// when SIGINT stopped a guest cell.
fn run_cells(
    vm: &mut Vm,
    idx: &[usize],
    specs: &[CellSpec],
    cx: (&Plan, &Patterns, u64),
    cells: &mut [Cell],
    progress: &indicatif::ProgressBar,
    after_cell: &mut dyn FnMut(&[Cell]) -> Result<()>,
) -> Result<bool> {
    for &i in idx {
        match run_cell(vm, &specs[i], cx, &mut cells[i]) {
            Err(crate::error::Error::Interrupted) => return Ok(false),
            other => other?,
        }
        progress.inc(1);
        after_cell(cells)?;
    }
    Ok(true)
}

/// The plan with the priority this process may take (`fifo` tried on
/// this thread, then nice -10), said on stderr when refused; sets this
/// thread's niceness (the run's other threads inherit it). The niceness.
fn with_priority(plan: &Plan) -> (Plan, i32) {
    let want = plan.priority;
    let fifo = want == Priority::Fifo && sched::set_fifo(true) && sched::set_fifo(false);
    let (nice, refused) = match want {
        Priority::Normal => (sched::nice(), false),
        _ => sched::set_nice(-10),
    };
    let got = match (want, fifo, refused) {
        (Priority::Fifo, true, _) => Priority::Fifo,
        (Priority::Normal, ..) => Priority::Normal,
        (_, _, false) => Priority::Nice,
        _ => Priority::Normal,
    };
    if got != want {
        hypclear_process::errln!(
            "hypclear bench: --priority {want:?} refused (needs root or CAP_SYS_NICE); the timed \
             threads run as {got:?} at nice {nice}, where a busy machine preempts them more \
             (those runs are repeated)"
        );
    }
    (
        Plan {
            priority: got,
            ..plan.clone()
        },
        nice,
    )
}

/// Puts this thread's niceness back when the run ends, however it ends.
struct RestoreNice(i32);

impl Drop for RestoreNice {
    fn drop(&mut self) {
        sched::set_nice(self.0);
    }
}

/// `cells` with their summaries ([`summarize`]).
fn summarized(cells: &[Cell], repeats: u64) -> Vec<Cell> {
    let mut cells = cells.to_vec();
    for c in &mut cells {
        summarize(c, repeats);
    }
    cells
}

/// The `partial_reason` of a result so far (a checkpoint); the end of the
/// run replaces it with the signal or the error.
pub const IN_PROGRESS: &str = "in progress: written after each finished cell while the run went \
                               on; a file that still says so was left by a process killed without \
                               a word (SIGKILL, the OOM killer, a lost machine) or one that could \
                               not write its final result (its error message says which)";

/// The result so far: the cells summarized, with the plan and the host.
fn snapshot(
    (plan, nice): (&Plan, i32),
    privilege: &PrivilegeChoice,
    caps: &CpuCaps,
    cells: &[Cell],
    counter_khz: u64,
    (partial, sessions): (bool, u64),
    setup: &[f64],
) -> BenchResult {
    let cells = summarized(cells, plan.repeats);
    let precision = plan
        .precision
        .map(|p| precision::outcome(&cells, p, plan.sessions, sessions));
    let mut r = BenchResult {
        tool: "hypclear".into(),
        command: "bench".into(),
        host: HostInfo::collect(caps, counter_khz),
        privilege: privilege.name.into(),
        warmup: plan.warmup,
        repeats: plan.repeats,
        max_runs: plan.max_runs,
        priority: Some(plan.priority),
        nice: Some(nice),
        sessions,
        precision,
        partial,
        partial_reason: partial.then(|| IN_PROGRESS.to_string()),
        cache: Some(plan.cache),
        max_warmup: plan.max_warmup,
        session_setup_seconds: stats::mean(setup),
        sides: plan.sides.iter().map(SideInfo::of).collect(),
        kernel: plan
            .sides
            .iter()
            .find_map(|s| s.external())
            .map(|e| e.report.clone()),
        reproducibility: None,
        cells,
        explain: Vec::new(),
        ab: Vec::new(),
    };
    r.reproducibility = report::Reproducibility::of(&r, 0.02);
    r
}

/// `--ab`: every pair of `pairs` (cell indices of `specs`) measured A/B in
/// one guest ([`ab`]), as a result with no session cells.
pub fn run_ab(
    plan: &Plan,
    specs: &[CellSpec],
    pairs: &[(usize, usize)],
    (seed, privilege, caps): (u64, &PrivilegeChoice, &CpuCaps),
    opts: ab::AbOptions,
) -> Result<BenchResult> {
    let _restore = RestoreNice(sched::nice());
    let (plan, nice) = &with_priority(plan);
    let (rows, khz) = ab::run(plan, specs, pairs, (privilege, seed), opts)?;
    let partial = crate::interrupt::requested() || rows.len() < pairs.len();
    let mut r = snapshot((plan, *nice), privilege, caps, &[], khz, (partial, 1), &[]);
    r.ab = rows;
    Ok(r)
}

/// One session's VMs in order: (backing, side, the indices of its cells in
/// `specs`). ABBA: the sides (link configurations, kernel trees) alternate
/// their order from session to session (AB BA, or ABC CBA), so a drift
/// hits every side alike.
fn session_steps(
    plan: &Plan,
    specs: &[CellSpec],
    session: u64,
) -> Vec<(Backing, usize, Vec<usize>)> {
    let mut out = Vec::new();
    for &backing in &plan.backings {
        let mut order: Vec<usize> = (0..plan.sides.len()).collect();
        if session % 2 == 1 {
            order.reverse();
        }
        for side in order {
            let idx: Vec<usize> = (0..specs.len())
                .filter(|&i| specs[i].backing == backing && specs[i].side == side)
                .collect();
            if !idx.is_empty() {
                out.push((backing, side, idx));
            }
        }
    }
    out
}

/// The VM of one step of a session (see [`session_steps`]).
fn session_vm(
    plan: &Plan,
    (backing, side): (Backing, usize),
    privilege: &PrivilegeChoice,
    seed: u64,
) -> Result<VmOptions> {
    Ok(VmOptions {
        mem: plan.mem_needed(),
        backing,
        prefault: plan.prefault,
        privilege: plan.sides[side].privilege(privilege.privilege),
        blob: plan.sides[side].blob()?,
        vcpus: plan.shape.vcpus,
        seed,
        vm_type: hypclear_vmm::VmType::Normal,
    })
}

/// Run the whole plan: every session boots one VM per backing and link
/// configuration and runs its cells, guest then host. `seed` seeds the
/// patterns and (plus the session) each VM's load address. After every
/// finished cell of a session `checkpoint` gets the results so far (marked
/// partial), so a run killed outright still leaves what it finished.
pub fn run(
    plan: &Plan,
    specs: &[CellSpec],
    seed: u64,
    privilege: &PrivilegeChoice,
    caps: &CpuCaps,
    progress: &indicatif::ProgressBar,
    checkpoint: &mut dyn FnMut(&BenchResult) -> Result<()>,
) -> Result<BenchResult> {
    let copy_len = if plan.routine.kind() == Kind::Copy {
        plan.shape.size as usize
    } else {
        0
    };
    let pats = Patterns::new(seed, copy_len);
    // The run's threads at --nice, and back afterwards (this thread goes
    // on to print and write).
    let _restore = RestoreNice(sched::nice());
    let (plan, nice) = &with_priority(plan);
    let nice = *nice;
    let mut cells: Vec<Cell> = specs
        .iter()
        .map(|s| Cell::new(s.axes.clone(), vec![], vec![]))
        .collect();
    let mut counter_khz = 0;
    let mut partial = false;
    let mut setup = Vec::new();
    let result = |cells: &[Cell], counter_khz: u64, end: (bool, u64), setup: &[f64]| {
        snapshot(
            (plan, nice),
            privilege,
            caps,
            cells,
            counter_khz,
            end,
            setup,
        )
    };
    let mut seen = 0;
    'sessions: for session in 0..plan.max_sessions() {
        if session >= plan.sessions {
            progress.inc_length(specs.len() as u64);
        }
        seen = session + 1;
        for (backing, side, idx) in session_steps(plan, specs, session) {
            let opts = session_vm(plan, (backing, side), privilege, seed.wrapping_add(session))?;
            if crate::interrupt::requested() {
                partial = true;
                break 'sessions;
            }
            let t = std::time::Instant::now();
            let mut vm = Vm::new(crate::vmm::open_kvm()?, &opts)?;
            setup.push(t.elapsed().as_secs_f64());
            counter_khz = vm.counter_khz;
            let cx = (plan, &pats, session);
            let mut after_cell =
                |cells: &[Cell]| checkpoint(&result(cells, counter_khz, (true, seen), &setup));
            if !run_cells(
                &mut vm,
                &idx,
                specs,
                cx,
                &mut cells,
                progress,
                &mut after_cell,
            )? {
                partial = true;
                break 'sessions;
            }
        }
        let so_far = || summarized(&cells, plan.repeats);
        if precision::stop_after(seen, plan.sessions, plan.precision, &so_far) {
            break;
        }
    }
    Ok(result(&cells, counter_khz, (partial, seen), &setup))
}
