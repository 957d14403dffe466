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
pub mod compare;
pub mod guest;
pub mod host;
pub mod inference;
pub mod plan;
pub mod report;
pub mod sequence;
pub mod stats;

pub use plan::{CellSpec, Plan};
pub use sequence::Steady;

use crate::arch::CpuCaps;
use crate::bench::stats::Summary;
use crate::check::checker::Patterns;
use crate::error::Result;
use crate::routines::Kind;
use crate::vmm::host::HostInfo;
use crate::vmm::privilege::PrivilegeChoice;
use crate::vmm::{Vm, VmOptions};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// One call over the whole size.
    Oneshot,
    /// Chunk by chunk, ascending addresses.
    Forward,
    /// Chunk by chunk, descending addresses.
    Reverse,
}

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Fill {
    /// First touch inside the measurement: the pages are dropped before
    /// every pass (MADV_DONTNEED), so KVM and the host fault them back in.
    Demand,
    /// Pre-faulted: the memory is warm from the warm-up runs.
    Populate,
}

/// The state every timed pass starts from (`--cache`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
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

/// The axes of one benchmark cell (each a column in the output).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Axes {
    pub routine: String,
    pub variant: String,
    pub config: String,
    pub chunk: u64,
    pub order: Order,
    pub fill: Fill,
    pub backing: String,
    pub size: u64,
    pub loops: u64,
    pub vcpus: u64,
}

impl Axes {
    /// One-line name, like a perf bench benchmark name.
    pub fn label(&self) -> String {
        let mut parts = vec![self.routine.clone(), self.variant.clone()];
        if !self.config.is_empty() {
            parts.push(self.config.clone());
        }
        parts.push(format!(
            "-s {} -k {}",
            crate::units::format_size(self.size),
            crate::units::format_size(self.chunk)
        ));
        if self.loops > 1 {
            parts.push(format!("-l {}", self.loops));
        }
        parts.push(format!("{:?}", self.order).to_lowercase());
        parts.push(format!("{:?}", self.fill).to_lowercase());
        parts.push(self.backing.clone());
        if self.vcpus > 1 {
            parts.push(format!("x{} vCPUs", self.vcpus));
        }
        parts.join(" ")
    }
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
    pub disturbed: bool,
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
    /// median guest bytes/s / median host bytes/s
    pub guest_host_ratio: Option<f64>,
    pub disturbed_runs: u64,
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
}

impl Cell {
    /// A cell with samples and no summaries yet (see [`summarize`]).
    pub fn new(axes: Axes, guest: Vec<Sample>, host: Vec<Sample>) -> Cell {
        Cell {
            axes,
            guest,
            host,
            guest_bytes_per_sec: None,
            guest_ticks_per_byte: None,
            host_bytes_per_sec: None,
            guest_host_ratio: None,
            disturbed_runs: 0,
            verified_runs: 0,
            guest_warmup: vec![],
            host_warmup: vec![],
            guest_steady: vec![],
            host_steady: vec![],
        }
    }
}

/// Runs grouped by session (sessions in order, runs in order), for the
/// session-level statistics of `inference`.
pub fn by_session(samples: &[&Sample]) -> Vec<inference::Session> {
    let mut m: BTreeMap<u64, Vec<(u64, f64)>> = BTreeMap::new();
    for s in samples {
        m.entry(s.session)
            .or_default()
            .push((s.run, s.bytes_per_sec));
    }
    m.into_values()
        .map(|mut v| {
            v.sort_by_key(|x| x.0);
            inference::Session::new(v.into_iter().map(|x| x.1).collect())
        })
        .collect()
}

impl Cell {
    /// The guest runs the statistics use: undisturbed ones (all of them if
    /// every run was disturbed), as in [`summarize`].
    pub fn guest_used(&self) -> Vec<&Sample> {
        let clean: Vec<&Sample> = self.guest.iter().filter(|s| !s.disturbed).collect();
        if clean.is_empty() {
            self.guest.iter().collect()
        } else {
            clean
        }
    }

    /// Guest sessions (see [`Cell::guest_used`]).
    pub fn guest_sessions(&self) -> Vec<inference::Session> {
        by_session(&self.guest_used())
    }

    pub fn host_sessions(&self) -> Vec<inference::Session> {
        by_session(&self.host.iter().collect::<Vec<_>>())
    }

    /// Sessions whose warm-up hit the cap without settling, guest and host.
    pub fn unsettled(&self) -> (usize, usize) {
        let n = |v: &[Steady]| v.iter().filter(|s| s.settled == Some(false)).count();
        (n(&self.guest_steady), n(&self.host_steady))
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
    pub sessions: u64,
    /// Not a finished run: written while it was running (after every
    /// finished cell), or SIGINT stopped it. The cells hold the samples
    /// taken so far.
    #[serde(default)]
    pub partial: bool,
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
    pub cells: Vec<Cell>,
}

/// Summaries over the undisturbed samples (all of them if every run was disturbed).
pub fn summarize(cell: &mut Cell) {
    let use_ = cell.guest_used();
    let bps = Summary::of(&use_.iter().map(|s| s.bytes_per_sec).collect::<Vec<_>>());
    let tpb = Summary::of(&use_.iter().map(|s| s.ticks_per_byte).collect::<Vec<_>>());
    cell.guest_bytes_per_sec = bps;
    cell.guest_ticks_per_byte = tpb;
    cell.host_bytes_per_sec = Summary::of(
        &cell
            .host
            .iter()
            .map(|s| s.bytes_per_sec)
            .collect::<Vec<_>>(),
    );
    cell.disturbed_runs = cell.guest.iter().filter(|s| s.disturbed).count() as u64;
    cell.guest_host_ratio = match (&cell.guest_bytes_per_sec, &cell.host_bytes_per_sec) {
        (Some(g), Some(h)) if h.median > 0.0 => Some(g.median / h.median),
        _ => None,
    };
}

/// Run the cells `idx` of `specs` (one backing and link configuration) on
/// `vm` in session `cx.2`, guest then host, adding their samples to
/// `cells`, and hands all cells to `after_cell` after each one (the
/// checkpoint). `Ok(false)` when SIGINT stopped a guest cell.
fn run_cells(
    vm: &mut Vm,
    idx: &[usize],
    specs: &[CellSpec],
    (plan, pats, session): (&Plan, &Patterns, u64),
    cells: &mut [Cell],
    progress: &indicatif::ProgressBar,
    after_cell: &mut dyn FnMut(&[Cell]) -> Result<()>,
) -> Result<bool> {
    for &i in idx {
        let g = match guest::run_cell(vm, &specs[i], plan, pats, session) {
            Err(crate::error::Error::Interrupted) => return Ok(false),
            other => other?,
        };
        let c = &mut cells[i];
        c.verified_runs += g.verified;
        c.guest.extend(g.measured);
        c.guest_warmup.extend(g.warmup);
        c.guest_steady.push(g.steady);
        if plan.host_baseline
            && let Some(h) = host::run_cell(&specs[i], plan, pats, session, vm.counter_khz)?
        {
            c.host.extend(h.measured);
            c.host_warmup.extend(h.warmup);
            c.host_steady.push(h.steady);
        }
        progress.inc(1);
        after_cell(cells)?;
    }
    Ok(true)
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
        plan.size as usize
    } else {
        0
    };
    let pats = Patterns::new(seed, copy_len);
    let mut cells: Vec<Cell> = specs
        .iter()
        .map(|s| Cell::new(s.axes.clone(), vec![], vec![]))
        .collect();
    let mut counter_khz = 0;
    let mut partial = false;
    let mut setup = Vec::new();
    let result = |cells: &[Cell], counter_khz: u64, partial: bool, setup: &[f64]| {
        let mut cells = cells.to_vec();
        for c in &mut cells {
            summarize(c);
        }
        BenchResult {
            tool: "hypclear".into(),
            command: "bench".into(),
            host: HostInfo::collect(caps, counter_khz),
            privilege: privilege.name.into(),
            warmup: plan.warmup,
            repeats: plan.repeats,
            sessions: plan.sessions,
            partial,
            cache: Some(plan.cache),
            max_warmup: plan.max_warmup,
            session_setup_seconds: inference::mean_of(setup),
            cells,
        }
    };
    'sessions: for session in 0..plan.sessions {
        for &backing in &plan.backings {
            // ABBA: the link configurations alternate their order from
            // session to session, so a drift hits both sides alike.
            let mut configs = plan.configs.clone();
            if session % 2 == 1 {
                configs.reverse();
            }
            for &config in &configs {
                let idx: Vec<usize> = (0..specs.len())
                    .filter(|&i| specs[i].backing == backing && specs[i].config == config)
                    .collect();
                if idx.is_empty() {
                    continue;
                }
                let opts = VmOptions {
                    mem: plan.mem_needed(),
                    backing,
                    prefault: plan.prefault,
                    privilege: privilege.privilege,
                    config,
                    vcpus: plan.vcpus,
                    seed: seed.wrapping_add(session),
                };
                if crate::vmm::interrupt::requested() {
                    partial = true;
                    break 'sessions;
                }
                let t = std::time::Instant::now();
                let mut vm = Vm::new(crate::vmm::open_kvm()?, &opts)?;
                setup.push(t.elapsed().as_secs_f64());
                counter_khz = vm.counter_khz;
                let cx = (plan, &pats, session);
                let mut after_cell =
                    |cells: &[Cell]| checkpoint(&result(cells, counter_khz, true, &setup));
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
        }
    }
    Ok(result(&cells, counter_khz, partial, &setup))
}
