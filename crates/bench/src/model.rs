//! The data model of `hypclear bench`: a run's axes and cells, their
//! samples and summaries, the sides and the result document (the JSON). The
//! run code (`run`) fills it; reports, compare and explain read it.
use crate::arch::{self, Privilege};
use crate::blob::LinkConfig;
use crate::inference;
use crate::kernel::side::SideKind;
use crate::routines::Routine;
use crate::stats::{PairedRatio, SessionRatio, Summary};
use crate::vmm::host::HostInfo;
use crate::vmm::memory::Backing;
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
    /// Passes whose memory was checked: per session the untimed
    /// verification pass before the timed runs, and what the timed runs
    /// left after them.
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
    pub precision: Option<Outcome>,
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
    /// spread ([`Reproducibility`]); `None` in older files and
    /// with too few measured sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reproducibility: Option<Reproducibility>,
    /// The first kernel side's identity (as files of one kernel tree had
    /// it), `null` for built-ins only.
    #[serde(default)]
    pub kernel: Option<serde_json::Value>,
    pub cells: Vec<Cell>,
    /// `--explain`: the attribution of every guest/host gap (empty
    /// without it, and in older files).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub explain: Vec<Explanation>,
    /// `--ab`: the pairs measured A/B in one guest (empty without it, and
    /// in older files); `cells` is then empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ab: Vec<AbRow>,
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

/// One cause isolated: the cell again with one setting changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cause", content = "setting", rename_all = "kebab-case")]
pub enum Variant {
    /// Guest RAM and host buffer backing: anon (4 KB pages), thp, hugetlb
    /// (2 MB pages), hence the page size of guest and host mappings.
    Backing(Backing),
    /// Guest RAM populated on the host before the guest starts, or not:
    /// the host's first-touch (shadow or stage-2) faults out of or in the
    /// runs (the KVM fault counters say how many each run took).
    Prefault(bool),
    /// The precondition of every timed pass, guest and host.
    Cache(Cache),
    /// The guest privilege (`--cpl 0` / `3`; x86 only: on arm64 it is the
    /// DC ZVA state, a side of its own).
    Cpl(Privilege),
}

/// The settings a cell runs with, each of which a [`Variant`] changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    pub backing: Backing,
    pub prefault: bool,
    pub cache: Cache,
    pub privilege: Privilege,
}

/// What a variant does to guest/host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Effect {
    /// The two intervals do not overlap and the change is at least
    /// [`ExplainOptions::min_delta`].
    MovesIt,
    /// The intervals overlap, or the change is too small to matter.
    NoEffect,
    /// Fewer than 2 paired sessions on one side: no interval to judge by.
    CannotTell,
    /// No ratio (the variant could not run here, or had no host runs).
    NotMeasured,
}

/// One row of an explanation: a variant (`None`: the base settings
/// measured again) and what it did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    pub variant: Option<Variant>,
    pub settings: Settings,
    pub guest_host: Option<PairedRatio>,
    /// Change of the estimate against the base row's, percent.
    pub delta_pct: Option<f64>,
    /// Mean KVM page-fault counters (`pf_*`) per measured guest run.
    pub kvm_faults_per_run: Option<f64>,
    /// The least share of the resident guest RAM and host buffer on huge
    /// pages over the sessions (what the backing granted).
    pub huge_share: HugeShares,
    pub verdict: Effect,
    /// Why it was not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The attribution of one cell's gap.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Explanation {
    /// The cell, as the table names it, and its side.
    pub cell: String,
    pub side: String,
    /// guest/host of the cell in the bench itself.
    pub bench_guest_host: PairedRatio,
    /// The base settings again, then each variant.
    pub rows: Vec<Row>,
    /// The variants that move it.
    pub moved_by: Vec<String>,
}

/// What an A/B row concluded.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AbVerdict {
    /// B is slower (the interval excludes 0).
    Slower,
    Faster,
    /// The interval lies inside +-margin.
    Equivalent,
    /// Neither, when the budget was spent (or without `--detect`).
    Unresolved,
}

/// The host copies' B against A, by the estimator of the guest's change.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HostChange {
    /// Throughput change of B against A, percent (B slower: negative).
    pub change_pct: f64,
    pub interval_pct: [f64; 2],
    pub blocks: u64,
    pub guests: u64,
}

/// One pair of cells measured A/B in one guest.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AbRow {
    /// A's cell (B's differs in side or variant).
    pub axes: Axes,
    pub a: String,
    pub b: String,
    /// Median ns per call of each side over the kept blocks.
    pub a_ns: f64,
    pub b_ns: f64,
    /// Throughput change of B against A, percent, with its interval at
    /// `level` (B slower: negative).
    pub change_pct: f64,
    pub interval_pct: [f64; 2],
    pub level: f64,
    /// Minimum detectable throughput change (power 0.8 at `level`), percent.
    pub mde_pct: f64,
    pub verdict: AbVerdict,
    /// `--detect`'s margin (fraction).
    pub margin: Option<f64>,
    pub blocks: u64,
    pub dropped_blocks: u64,
    pub dropped_batches: u64,
    /// Calls of the routine per timed slot (a small one-call pass repeats).
    pub calls_per_slot: u64,
    pub looks: u64,
    /// Guests (fresh VMs, the images at other addresses, main and beside
    /// swapped every other one) and each one's shift (log time).
    pub guests: u64,
    pub guest_shifts: Vec<f64>,
    pub wall_s: f64,
    /// A's and B's guest/host: the same calls by the host copies on each
    /// guest's buffer (the vCPU waiting), paired by guest; `None` where a
    /// side has no host copy (a kernel blob), with `--no-host` and in
    /// older files.
    #[serde(default)]
    pub guest_host: [Option<PairedRatio>; 2],
    /// B against A as the host copies measured it on the same buffers:
    /// what host user space (perf bench's context) would have said.
    /// `None` without a host baseline, or with too few host blocks.
    #[serde(default)]
    pub host_change: Option<HostChange>,
    /// Per kept block, ln(B time / A time).
    pub block_log_ratios: Vec<f64>,
}

/// How many sessions it would take to trust a change of `margin_pct`
/// (alpha 0.05, power 0.8), from the spread this bench saw (median over
/// the measured cells): the figure to read before believing one run.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Reproducibility {
    pub margin_pct: f64,
    /// Guest between-session relative SD (Kalibera & Jones T2), percent.
    pub between_session_cv_pct: f64,
    /// Guest within-session relative SD (T1), percent.
    pub within_session_cv_pct: f64,
    /// Runs per session the figures assume (this bench's).
    pub runs_per_session: f64,
    /// Sessions per side for two sides interleaved in one invocation
    /// (`compare FILE`, paired: a pair's log ratio has twice a session
    /// mean's variance when the sides share nothing of the session,
    /// the worst case); `None`: more than 1000.
    pub sessions_in_one_invocation: Option<usize>,
    /// Session-to-session relative SD of guest/host, percent: what is
    /// left between invocations once the host normalizes a drift of the
    /// machine away.
    pub guest_host_session_cv_pct: Option<f64>,
    /// Sessions per invocation for two separate invocations compared on
    /// guest/host (Welch on the session ratios); `None`: more than 1000,
    /// or no host baseline. A drift that hits the guest alone is not
    /// seen by one invocation: this is a lower bound.
    pub sessions_per_invocation: Option<usize>,
}

/// How the precision rule ended, in the JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub target_pct: f64,
    pub planned_sessions: u64,
    pub max_sessions: u64,
    /// Sessions run.
    pub sessions: u64,
    /// Every measured cell's interval within the target.
    pub reached: bool,
    /// The cell furthest from it; `None` without a measured cell.
    pub widest: Option<Widest>,
    /// Wall seconds the sessions took (setup and reporting aside).
    #[serde(default)]
    pub seconds: f64,
    /// `--max-seconds`: sessions are added while the next pair fits.
    #[serde(default)]
    pub budget_s: f64,
    /// What ended the run short of the target; `None` when it was reached
    /// (or the run is still going, in a checkpoint).
    #[serde(default)]
    pub limited_by: Option<Limit>,
}

/// The cap that ended a run short of its `--precision` target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// `--max-sessions`.
    Sessions,
    /// `--max-seconds`: the next pair of sessions would not have fitted.
    Seconds,
}

/// The widest interval of a run, relative to its estimate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Widest {
    /// The cell, as the reports name it.
    pub cell: String,
    pub judged: Judged,
    /// Relative half-width, percent; `None`: no interval (one session).
    pub half_width_pct: Option<f64>,
}

/// The warm-up of one session: how many runs it took, whether it settled;
/// and its measured runs under the sample rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Steady {
    pub session: u64,
    pub warmup_used: u64,
    /// `Some(false)`: the cap was reached without a steady state (the cell
    /// is flagged); `None`: a fixed warm-up (`--max-warmup 0`), not judged.
    pub settled: Option<bool>,
}

/// Which interval a cell is judged on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Judged {
    GuestHost,
    Guest,
}
