//! `hypclear verify`: the verification suite, filtered by routine, variant
//! and size.
use super::{Ctx, Early, progress};
use crate::arch;
use crate::blob::LinkConfig;
use crate::check::checker::Patterns;
use crate::check::suite::{
    self, CheckRecord, Filter, Geometry, Keep, RandomSize, Rows, RunOptions,
};
use crate::cli::{Common, Format, VerifyArgs};
use crate::error::{EXIT_FAILED, Error, Result, RunError};
use crate::kernel::Side;
use crate::report;
use crate::routines::{self, Routine};
use crate::units::format_size;
use crate::vmm::host::HostInfo;
use crate::vmm::{self, GuestFailure, Vm};
use hypclear_abi::PAGE_SIZE;
use serde_json::json;
use std::time::{Duration, Instant};

/// Bytes the ordinary checks may use: from the arena's base to the edge
/// region at the top of RAM (the edge checks' own).
fn arena(mem: u64) -> u64 {
    (arch::RAM_BASE.saturating_add(mem)).saturating_sub(arch::ARENA_BASE + arch::EDGE_REGION)
}

/// Usage errors in the variant filter, found before any VM is created.
fn check_variants(configs: &[Side], f: &Filter) -> Result<()> {
    let selected = |r: &Routine| f.routines.is_empty() || f.routines.contains(r);
    for v in &f.variants {
        let known = configs.iter().any(|c| {
            Routine::ALL.iter().filter(|r| selected(r)).any(|r| {
                routines::variants(*r, c)
                    .iter()
                    .any(|x| routines::is_named(x, v))
            })
        });
        if !known {
            let mut names: Vec<&str> = configs
                .iter()
                .flat_map(|c| {
                    Routine::ALL
                        .iter()
                        .flat_map(move |r| routines::variants(*r, c))
                })
                .map(|x| x.name)
                .collect();
            names.sort();
            names.dedup();
            return Err(Error::Usage(format!(
                "unknown variant `{v}` for the selected routines; known variants: {}",
                names.join(", ")
            )));
        }
    }
    Ok(())
}

/// Usage errors in verify's filters, found before any VM is created.
fn check_filter(configs: &[Side], f: &Filter) -> Result<()> {
    check_variants(configs, f)?;
    for &size in &f.sizes {
        if size > suite::MAX_SIZE {
            return Err(Error::Usage(format!(
                "--size {size} ({}) is larger than the largest guest RAM ({}): no check of it \
                 fits; pick a size up to {}",
                format_size(size),
                format_size(suite::MAX_SIZE),
                format_size(suite::MAX_SIZE)
            )));
        }
        for r in Routine::ALL {
            if !(f.routines.is_empty() || f.routines.contains(&r)) {
                continue;
            }
            if r.page_granular() && (size == 0 || size % PAGE_SIZE != 0) {
                return Err(Error::Usage(format!(
                    "{r} works on whole pages: --size {size} is not a multiple of 4096 \
                     (try {} or pick --routine memset/memcpy)",
                    format_size(size.div_ceil(4096).max(1) * 4096)
                )));
            }
        }
    }
    Ok(())
}

/// A `--mem` too small for the requested sizes, found before any check
/// runs. Only explicit sizes make it an error (built-in sizes that do not
/// fit are skipped with the reason); planning costs milliseconds, so it is
/// skipped otherwise.
fn check_mem_fits(ctx: &Ctx, configs: &[Side], f: &Filter) -> Result<()> {
    if f.sizes.is_empty() {
        return Ok(());
    }
    let pats = Patterns::new(ctx.seed, 0);
    for c in configs {
        let (specs, _) = suite::plan(c, &ctx.caps, f, u64::MAX, &pats);
        let need = specs.iter().map(suite::footprint).max().unwrap_or(0);
        if need > arena(ctx.mem) {
            let mem = suite::round_up(
                suite::sum(&[arch::ARENA_BASE - arch::RAM_BASE, need]),
                arch::RAM_ALIGN,
            );
            return Err(Error::Usage(format!(
                "--mem {} is too small for the requested sizes: they need {} of arena; use --mem {} or more",
                format_size(ctx.mem),
                format_size(need),
                format_size(mem)
            )));
        }
    }
    Ok(())
}

/// What the suite produced over all link configurations.
#[derive(Default)]
struct Outcome {
    /// Every check's record, or with `--geometry full` those that did not
    /// pass (see [`Keep`]).
    records: Vec<CheckRecord>,
    /// Every check, counted per table row.
    rows: Rows,
    geometry: Geometry,
    /// The run's random memset/memcpy sizes (drawn from the seed).
    random_sizes: Vec<RandomSize>,
    failure: Option<GuestFailure>,
    loads: serde_json::Map<String, serde_json::Value>,
    first_hypercall: Option<FirstHypercall>,
    checked_bytes: u64,
    check_time: Duration,
    counter_khz: u64,
    /// SIGINT stopped the run: what is here is partial.
    interrupted: bool,
    /// The kernel alternatives loads, run or SKIP (for the JSON).
    alternatives_loads: Vec<crate::kernel::paths::Load>,
    /// A VMM error that ended the run after work had begun (returned
    /// once the partial report is written).
    error: Option<Error>,
}

/// What one link configuration's VM produced.
struct ConfigRun {
    config: LinkConfig,
    banner: String,
    facts: VmFacts,
    run: suite::SuiteRun,
    skipped: Vec<CheckRecord>,
}

/// A VM that has booted and answered its first hypercall.
struct Booted {
    vm: Vm,
    first_hypercall: FirstHypercall,
}

/// The first hypercall of a run: when, after the process started.
#[derive(Clone, Copy)]
struct FirstHypercall {
    after: Duration,
}

impl FirstHypercall {
    /// The earlier of two configurations' first hypercalls.
    fn earliest(a: Option<Self>, b: Self) -> Option<Self> {
        match a {
            Some(a) if a.after <= b.after => Some(a),
            _ => Some(b),
        }
    }
}

/// Boot one VM of `side` up to its first hypercall.
fn boot(common: &Common, early: &Early, side: &Side) -> Result<Booted> {
    let mut vm = Vm::new(vmm::open_kvm()?, &early.vm_options(common, side)?)?;
    vm.vcpu(0)?.start(early.timeout)?;
    Ok(Booted {
        first_hypercall: FirstHypercall {
            after: early.start.elapsed(),
        },
        vm,
    })
}

/// What every configuration's run shares.
struct Shared<'a> {
    filter: &'a Filter,
    pats: &'a Patterns,
    bars: &'a indicatif::MultiProgress,
    live: &'a Live<'a>,
}

/// How often run/verify rewrite their `--json` while checks complete.
const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// The `partial_reason` of a JSON written while the run goes on.
const IN_PROGRESS: &str = "in progress: written while the run went on; a file that still says \
                           so was left by a process killed without a word (SIGKILL, the OOM \
                           killer, a lost machine) or one that could not write its final result \
                           (its error message says which)";

/// The results so far, rewritten as the `--json` while checks complete, so
/// that a run killed outright keeps what it finished (SIGINT, SIGTERM,
/// SIGHUP and errors write the final, partial report instead).
struct Live<'a> {
    command: &'a str,
    configs: &'a [Side],
    random_sizes: &'a [RandomSize],
    state: std::sync::Mutex<LiveState>,
}

#[derive(Default)]
struct LiveState {
    written: Option<Instant>,
    /// Per configuration, in `configs` order: its last checkpoint.
    runs: Vec<Option<Snapshot>>,
}

/// What a configuration's JSON says of its VM.
#[derive(Clone, Copy)]
struct VmFacts {
    load: u64,
    counter_khz: u64,
    first_hypercall: FirstHypercall,
}

/// One configuration's results at a checkpoint: every record final.
struct Snapshot {
    config: LinkConfig,
    facts: VmFacts,
    run: suite::SuiteRun,
}

impl<'a> Live<'a> {
    fn new(command: &'a str, configs: &'a [Side], random_sizes: &'a [RandomSize]) -> Self {
        let runs = configs.iter().map(|_| None).collect();
        let state = std::sync::Mutex::new(LiveState {
            written: None,
            runs,
        });
        Live {
            command,
            configs,
            random_sizes,
            state,
        }
    }

    /// Save configuration `index`'s results so far (`facts`, `run`) with the
    /// others' last ones, at most every [`CHECKPOINT_EVERY`].
    fn checkpoint(&self, ctx: &Ctx, index: usize, facts: VmFacts, run: &suite::SuiteRun) {
        let Some(path) = &ctx.common.json else {
            return;
        };
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        if st.written.is_some_and(|t| t.elapsed() < CHECKPOINT_EVERY) {
            return;
        }
        let Some(side) = self.configs.get(index) else {
            return;
        };
        let mut run = run.clone();
        relabel_run(side, &mut run);
        let snap = Snapshot {
            config: side.config(),
            facts,
            run,
        };
        if let Some(slot) = st.runs.get_mut(index) {
            *slot = Some(snap);
        }
        let mut o = st.outcome();
        o.random_sizes = self.random_sizes.to_vec();
        let mut doc = json_doc(
            ctx,
            self.command,
            self.configs,
            &o,
            Totals::of(ctx, &o).json(),
        );
        doc.partial = true;
        doc.partial_reason = Some(IN_PROGRESS);
        // A failed checkpoint does not stop the run: the final write
        // reports the error.
        let _ = crate::files::write_json_checkpoint(path, &doc);
        st.written = Some(Instant::now());
    }
}

impl LiveState {
    fn outcome(&self) -> Outcome {
        let mut o = Outcome::default();
        for s in self.runs.iter().flatten() {
            o.add(s.config, s.facts, s.run.clone());
        }
        o
    }
}

impl Outcome {
    /// Fold in one configuration's VM facts and checks; the first guest
    /// failure is the one reported.
    fn add(&mut self, config: LinkConfig, facts: VmFacts, run: suite::SuiteRun) {
        self.loads.insert(config.name().into(), json!(facts.load));
        self.counter_khz = facts.counter_khz;
        self.first_hypercall =
            FirstHypercall::earliest(self.first_hypercall, facts.first_hypercall);
        self.rows.merge(run.rows);
        self.records.extend(run.records);
        self.checked_bytes += run.checked_bytes;
        self.check_time += run.check_time;
        if self.failure.is_none() {
            self.failure = run.failure;
        }
        self.interrupted |= run.interrupted;
    }
}

/// The suite of one link configuration (`index` in the run's) in its
/// booted VM, stopping at the first guest failure.
fn run_config(
    ctx: &Ctx,
    (index, side): (usize, &Side),
    booted: Booted,
    shared: &Shared<'_>,
) -> Result<ConfigRun> {
    let Shared {
        filter,
        pats,
        bars,
        live,
    } = *shared;
    let Booted {
        mut vm,
        first_hypercall,
    } = booted;
    let config = side.config();
    // Sides with nothing to run were dropped before booting.
    let filter = &side_filter(side, filter).unwrap_or_else(|| filter.clone());
    let (specs, mut skipped) = suite::plan(side, &ctx.caps, filter, arena(ctx.mem), pats);
    let banner = banner(ctx, side, &vm);
    let pb = bars.add(progress(specs.len() as u64));
    pb.set_prefix(config.name());
    let opts = RunOptions {
        timeout: ctx.timeout,
        scope: ctx.common.check,
        keep: match filter.geometry {
            Geometry::Quick => Keep::All,
            Geometry::Full => Keep::Failures,
        },
    };
    let facts = VmFacts {
        load: vm.loaded.base,
        counter_khz: vm.counter_khz,
        first_hypercall,
    };
    let mut run = {
        let mut checkpoint = |r: &suite::SuiteRun| live.checkpoint(ctx, index, facts, r);
        let mut watch = suite::Watch {
            bar: &pb,
            checkpoint: Some(&mut checkpoint),
        };
        suite::run(&mut vm, &specs, pats, &opts, &mut watch)?
    };
    pb.finish_and_clear();
    relabel_run(side, &mut run);
    relabel(side, &mut skipped);
    if run.failure.is_none() && !run.interrupted {
        vm.vcpu(0)?.exit(ctx.timeout)?;
    }
    Ok(ConfigRun {
        config,
        banner,
        facts,
        run,
        skipped,
    })
}

/// The line that introduces a configuration's run: its blob, where it
/// was loaded, the guest RAM and counter, and a kernel load's paths.
fn banner(ctx: &Ctx, side: &Side, vm: &Vm) -> String {
    let config = side.config();
    let mut banner = format!(
        "{config:>7} blob: {} aliases, {} relocations, loaded at {:#x} (seed {}), {} {} guest RAM, {} {} kHz",
        vm.blob.aliases.len(),
        vm.blob.relocs.len(),
        vm.loaded.base,
        ctx.seed,
        format_size(ctx.mem),
        ctx.common.backing(),
        arch::COUNTER_NAME,
        vm.counter_khz
    );
    if let Some(load) = side.external().and_then(|e| e.load.as_ref()) {
        let names: Vec<String> = crate::kernel::routines::FAMILIES
            .iter()
            .filter_map(|&f| Some(format!("{f} {}", load.path_name(f)?)))
            .collect();
        banner.push_str(&format!("; paths: {}", names.join(", ")));
    }
    banner
}

/// The filter of a kernel alternatives load: only the routines whose
/// family's path it verifies (`None`: none of the selected ones). Other
/// sides keep `filter`.
fn side_filter(side: &Side, filter: &Filter) -> Option<Filter> {
    let Some(load) = side.external().and_then(|e| e.load.as_ref()) else {
        return Some(filter.clone());
    };
    let config = side.config();
    let routines: Vec<Routine> = Routine::ALL
        .into_iter()
        .filter(|r| filter.routines.is_empty() || filter.routines.contains(r))
        .filter(|r| load.verifies(r.family(config)).is_some())
        .collect();
    (!routines.is_empty()).then(|| Filter {
        routines,
        ..filter.clone()
    })
}

/// Name a kernel alternatives load's rows by the path they verify.
fn relabel(side: &Side, records: &mut [CheckRecord]) {
    if let Some(load) = side.external().and_then(|e| e.load.as_ref()) {
        for r in records {
            r.variant = load.row_name(r.routine.family(r.config), &r.variant);
        }
    }
}

/// [`relabel`] for the per-row counts of a run.
fn relabel_rows(side: &Side, rows: suite::Rows) -> suite::Rows {
    let Some(load) = side.external().and_then(|e| e.load.as_ref()) else {
        return rows;
    };
    let renamed = rows.0.into_iter().map(|(mut k, t)| {
        k.variant = load.row_name(k.routine.family(k.config), &k.variant);
        (k, t)
    });
    suite::Rows(renamed.collect())
}

/// [`relabel`] for a run's records and per-row counts.
fn relabel_run(side: &Side, run: &mut suite::SuiteRun) {
    relabel(side, &mut run.records);
    run.rows = relabel_rows(side, std::mem::take(&mut run.rows));
}

/// The kernel alternatives loads the guest CPU cannot run, with the
/// reason, apart from the others; loads with nothing selected dropped.
fn split_runnable(sides: Vec<Side>, filter: &Filter) -> (Vec<Side>, Vec<(Side, String)>) {
    let mut run = Vec::new();
    let mut skip = Vec::new();
    for side in sides {
        if side_filter(&side, filter).is_none() {
            continue;
        }
        match side
            .external()
            .and_then(|e| e.load.as_ref())
            .map(|l| l.runnable())
        {
            Some(crate::kernel::paths::Runnable::No { reason }) => skip.push((side, reason)),
            _ => run.push(side),
        }
    }
    (run, skip)
}

/// The SKIP rows of the loads the guest CPU cannot run.
fn unrunnable_rows(ctx: &Ctx, skip: &[(Side, String)], filter: &Filter) -> Vec<CheckRecord> {
    let pats = Patterns::new(ctx.seed, 0);
    let mut out = Vec::new();
    for (side, reason) in skip {
        let Some(f) = side_filter(side, filter) else {
            continue;
        };
        let mut rows = suite::skip_all(side, &ctx.caps, &f, &pats, reason);
        relabel(side, &mut rows);
        out.extend(rows);
    }
    out
}

/// Whether the configurations' suites may run side by side: a second
/// core, and guest RAM for all of them within half the host memory this
/// process may use (`host_available`: MemAvailable, cgroup limits;
/// hugetlb pages are reserved per VM, so that backing stays one at a time).
fn concurrent(ctx: &Ctx, configs: &[Side]) -> bool {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let available = crate::vmm::memory::host_available().map_or(0, |(bytes, _)| bytes);
    let need = ctx.mem.saturating_mul(configs.len() as u64);
    configs.len() > 1 && cores > 1 && boots_early(&ctx.common) && need <= available / 2
}

/// Whether the VM of a configuration after the first boots before its
/// turn comes: not when hugetlb-backed (those pages are reserved per VM,
/// so such VMs exist one at a time).
fn boots_early(common: &Common) -> bool {
    common.backing() != crate::vmm::memory::Backing::Hugetlb
}

/// Whether the run stops after this configuration's result when the
/// configurations run one after the other.
fn stops(r: &Result<ConfigRun>) -> bool {
    r.as_ref()
        .map_or(true, |r| r.run.failure.is_some() || r.run.interrupted)
}

/// Boot one VM per configuration, resolve and check the rest (`prepare`:
/// everything that may still refuse the run, and whether the suites run
/// side by side), then run the suites: side by side, or one after the
/// other stopping at the first guest failure. The first configuration's
/// VM boots on this thread before anything else (and alone: two VMs
/// created at once slow each other down): that is the first hypercall.
/// The others then boot on their own threads (see [`boots_early`]) while
/// `prepare` runs, and wait for their turn; when `prepare` refuses the
/// run, they are dropped unused. Results come in configuration order.
fn boot_and_run(
    common: &Common,
    early: &Early,
    live: &Live<'_>,
    filter: &Filter,
    prepare: impl FnOnce() -> Result<(Ctx, bool)>,
) -> Result<(Ctx, Vec<Result<ConfigRun>>)> {
    let configs = live.configs;
    let Some((first, rest)) = configs.split_first() else {
        return Err(RunError::Internal("no link configuration to run".into()).into());
    };
    let (_, pattern) = sizes(filter, early.mem);
    // The copy source (tens of MB) is made when the first copy needs it.
    let pats = &Patterns::new(early.seed, pattern as usize);
    let bars = &super::progress_group();
    let shared = &Shared {
        filter,
        pats,
        bars,
        live,
    };
    let ctx_cell = std::sync::OnceLock::new();
    let ctx_shared = &ctx_cell;
    let runs = std::thread::scope(|s| {
        let booted = boot(common, early, first);
        let others: Vec<_> = rest
            .iter()
            .enumerate()
            .map(|(i, side)| {
                // `true`: run now; `false`, or the sender dropped: stop.
                let (go, turn) = std::sync::mpsc::channel::<bool>();
                let h = s.spawn(move || {
                    let booted = boots_early(common).then(|| boot(common, early, side));
                    if !turn.recv().unwrap_or(false) {
                        return None;
                    }
                    // Set before any `true` is sent.
                    let ctx: &Ctx = ctx_shared.get()?;
                    let booted = booted.unwrap_or_else(|| boot(common, early, side));
                    Some(booted.and_then(|b| run_config(ctx, (i + 1, side), b, shared)))
                });
                (go, h)
            })
            .collect();
        let (ctx, side_by_side) = prepare()?;
        let ctx = ctx_shared.get_or_init(|| ctx);
        if side_by_side {
            for (go, _) in &others {
                let _ = go.send(true);
            }
        }
        let first = booted.and_then(|b| run_config(ctx, (0, first), b, shared));
        Ok::<_, Error>(join_others(first, others, side_by_side))
    })?;
    let ctx = ctx_cell
        .into_inner()
        .ok_or_else(|| RunError::Internal("the run context was never set".into()))?;
    Ok((ctx, runs))
}

/// A configuration's thread: told whether to run (`true`) or stop, it
/// returns its run, or `None` when it stopped without one.
type Other<'scope> = (
    std::sync::mpsc::Sender<bool>,
    std::thread::ScopedJoinHandle<'scope, Option<Result<ConfigRun>>>,
);

/// Every run in configuration order, `first` then the others' as they
/// join. One after the other (not `side_by_side`), each is told to run
/// only while no run before it stopped the whole run.
fn join_others(
    first: Result<ConfigRun>,
    others: Vec<Other<'_>>,
    side_by_side: bool,
) -> Vec<Result<ConfigRun>> {
    let mut stop = stops(&first);
    let mut runs = vec![first];
    for (go, h) in others {
        if !side_by_side {
            let _ = go.send(!stop);
        }
        drop(go);
        match h.join() {
            Ok(Some(r)) => {
                stop |= stops(&r);
                runs.push(r);
            }
            Ok(None) => {}
            Err(_) => runs.push(Err(RunError::Internal(
                "a verification thread panicked; please report this as a hypclear bug".into(),
            )
            .into())),
        }
    }
    runs
}

/// The largest check and the copy source pattern (host) the suite needs
/// in `mem` bytes of guest RAM.
fn sizes(filter: &Filter, mem: u64) -> (u64, u64) {
    let (largest, copy) = suite::largest_sizes(filter, arena(mem));
    (largest, copy.max(4 << 20))
}

/// Check, before any check runs, that the host can hold what the run
/// touches: the largest target and its copy source in guest RAM, plus the
/// host pattern (per link configuration: they may run side by side).
fn check_memory(ctx: &Ctx, configs: &[Side], side_by_side: bool, filter: &Filter) -> Result<()> {
    let (largest, pattern) = sizes(filter, ctx.mem);
    let guest = (arch::ARENA_BASE - arch::RAM_BASE + 2 * largest + (4 << 20)).min(ctx.mem);
    let vms = if side_by_side {
        configs.len() as u64
    } else {
        1
    };
    if ctx.common.backing() != crate::vmm::memory::Backing::Hugetlb {
        crate::vmm::memory::check_host_memory(
            guest * vms + pattern,
            "verify (guest RAM it touches plus the copy pattern)",
        )?;
    }
    Ok(())
}

pub(super) fn verify(
    common: &Common,
    args: &VerifyArgs,
    start: Instant,
    command: &str,
    sides: Vec<Side>,
) -> Result<i32> {
    // From the start: a Ctrl-C while the CPU is probed or a VM boots is a
    // request to stop too, never a silent kill.
    crate::interrupt::install()?;
    let mut filter = Filter {
        routines: args.routine.clone(),
        variants: args.variant.clone(),
        sizes: args.size.clone(),
        geometry: args.run.geometry,
        seed: 0,
    };
    check_filter(&sides, &filter)?;
    let (sides, unrunnable) = split_runnable(super::kernel::every_path(common, sides)?, &filter);
    let early = Early::resolve(common, start, common.mem())?;
    filter.seed = early.seed;
    let random_sizes = match filter.has_byte_routines() {
        true => filter.random_sizes(),
        false => Vec::new(),
    };
    let configs = sides.clone();
    // Everything else is resolved and checked while the VMs boot; no
    // check runs before it has passed.
    let prepare = || {
        let ctx = Ctx::complete(common, &early, sides)?;
        check_mem_fits(&ctx, &configs, &filter)?;
        // Decided once: the memory check and the run must agree on it.
        let side_by_side = concurrent(&ctx, &configs);
        check_memory(&ctx, &configs, side_by_side, &filter)?;
        announce(&ctx, &random_sizes);
        Ok((ctx, side_by_side))
    };
    let live = Live::new(command, &configs, &random_sizes);
    let (ctx, runs) = boot_and_run(common, &early, &live, &filter, prepare)?;
    let mut o = outcome(&ctx, runs)?;
    o.geometry = filter.geometry;
    o.random_sizes = random_sizes.clone();
    let skip = unrunnable_rows(&ctx, &unrunnable, &filter);
    o.rows.merge(suite::Rows::of(&skip));
    o.records.extend(skip);
    o.alternatives_loads = configs
        .iter()
        .chain(unrunnable.iter().map(|(s, _)| s))
        .filter_map(|c| c.external()?.load.clone())
        .collect();
    let error = o.error.take();
    let code = report_outcome(&ctx, &configs, &o, error.as_ref(), command)?;
    error.map_or(Ok(code), Err)
}

/// The run's opening lines: version, host, KVM, privilege, the kernel
/// sides, the random sizes.
fn announce(ctx: &Ctx, random_sizes: &[RandomSize]) {
    let p = &ctx.privilege;
    ctx.say(format_args!(
        "hypclear {}: {} {}, KVM {}, guest at {} ({})",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::ARCH,
        ctx.caps.model,
        arch::kvm_flavour(),
        p.name,
        p.reason
    ));
    for line in super::kernel::summary_lines(&ctx.sides) {
        ctx.say(line);
    }
    if let Some(line) = random_line(ctx.seed, random_sizes) {
        ctx.say(line);
    }
}

/// "random sizes (seed S): 1234, 70001, ...": what `--seed S` repeats
/// (none: no line).
fn random_line(seed: u64, sizes: &[RandomSize]) -> Option<String> {
    let list: Vec<String> = sizes.iter().map(|r| r.size.to_string()).collect();
    (!list.is_empty()).then(|| format!("random sizes (seed {seed}): {}", list.join(", ")))
}

/// Why the results are partial (the JSON's `partial_reason`, KTAP's
/// `# interrupted:` line), if they are: a stop request, an error, a guest
/// failure.
fn partial_reason(o: &Outcome, error: Option<&Error>) -> Option<String> {
    if o.interrupted {
        return Some(crate::interrupt::name().to_string());
    }
    if let Some(e) = error {
        return Some(e.partial_reason());
    }
    o.failure
        .as_ref()
        .map(|f| format!("guest failure ({:?}): {}", f.kind, f.detail))
}

/// Gather the configurations' results, printing each one's banner.
fn outcome(ctx: &Ctx, runs: Vec<Result<ConfigRun>>) -> Result<Outcome> {
    let mut o = Outcome::default();
    for r in runs {
        let r = match r {
            // Ctrl-C while this configuration's VM booted: nothing of it
            // to report, but the others' results (and the table) stand.
            Err(Error::Run(RunError::Interrupted)) => {
                o.interrupted = true;
                continue;
            }
            // A guest that failed before its first check (a watchdog
            // timeout at boot) is reported like one that failed in a check.
            Err(Error::Run(RunError::Guest(f))) => {
                o.failure.get_or_insert(*f);
                continue;
            }
            // Before any work: no report, only the error.
            Err(e) if o.records.is_empty() && o.failure.is_none() => return Err(e),
            Err(e) => {
                o.error.get_or_insert(e);
                continue;
            }
            Ok(r) => r,
        };
        ctx.say(&r.banner);
        o.rows.merge(Rows::of(&r.skipped));
        o.records.extend(r.skipped);
        o.add(r.config, r.facts, r.run);
    }
    Ok(o)
}

/// Print the table (or KTAP), the summary line and the failure, write the
/// JSON report; the exit status of the run.
fn report_outcome(
    ctx: &Ctx,
    configs: &[Side],
    o: &Outcome,
    error: Option<&Error>,
    command: &str,
) -> Result<i32> {
    let cut = partial_reason(o, error);
    print_results(ctx, o, cut.as_deref());
    let totals = Totals::of(ctx, o);
    let Totals {
        passed,
        failed,
        skipped,
        elapsed,
        first_ms,
        checker_gbps,
        ..
    } = totals;
    if let Some(f) = &o.failure {
        crate::errln!("{f}");
    }
    let ok = failed == 0 && o.failure.is_none() && !o.interrupted;
    ctx.say(format_args!(
        "hypclear {command}: {} — {passed} passed, {failed} failed, {skipped} skipped ({}) in {:.2} s; \
         first hypercall after {:.1} ms; checker {:.1} GB/s",
        if o.interrupted {
            "PARTIAL (interrupted)"
        } else if ok {
            "PASS"
        } else {
            "FAIL"
        },
        {
            // One name per link configuration (alternatives loads share one).
            let mut names: Vec<&str> = configs.iter().map(|c| c.config().name()).collect();
            names.dedup();
            names.join(", ")
        },
        elapsed.as_secs_f64(),
        first_ms,
        checker_gbps
    ));
    if let Some(path) = &ctx.common.json {
        let mut doc = json_doc(ctx, command, configs, o, totals.json());
        doc.partial_reason = cut.as_deref();
        doc.partial = cut.is_some();
        crate::files::write_json(path, &doc)?;
    }
    if o.interrupted {
        crate::errln!(
            "hypclear {command}: interrupted ({}); the results above are partial",
            crate::interrupt::name()
        );
        return Ok(crate::interrupt::exit_code());
    }
    Ok(if ok { 0 } else { EXIT_FAILED })
}

/// The summary line's figures (and the JSON's `summary`).
#[derive(Clone, Copy)]
struct Totals {
    passed: u64,
    failed: u64,
    skipped: u64,
    elapsed: Duration,
    first_ms: f64,
    checker_gbps: f64,
    checked_bytes: u64,
}

impl Totals {
    fn of(ctx: &Ctx, o: &Outcome) -> Totals {
        let (passed, failed, skipped) = o.rows.counts();
        Totals {
            passed,
            failed,
            skipped,
            elapsed: ctx.start.elapsed(),
            first_ms: o
                .first_hypercall
                .map_or(0.0, |f| f.after.as_secs_f64() * 1e3),
            checker_gbps: o.checked_bytes as f64 / o.check_time.as_secs_f64().max(1e-9) / 1e9,
            checked_bytes: o.checked_bytes,
        }
    }

    fn json(&self) -> serde_json::Value {
        json!({
            "passed": self.passed,
            "failed": self.failed,
            "skipped": self.skipped,
            "elapsed_s": self.elapsed.as_secs_f64(),
            "first_hypercall_ms": self.first_ms,
            "checker_gb_per_s": self.checker_gbps,
            "checked_bytes": self.checked_bytes,
        })
    }
}

/// The table, or the KTAP document (`cut`: why the run ended early).
fn print_results(ctx: &Ctx, o: &Outcome, cut: Option<&str>) {
    if ctx.common.format == Format::Ktap {
        // The check the run ended in: skipped records (the plan's, an
        // unrunnable path's) are appended after the run's own.
        let last = o
            .records
            .iter()
            .rev()
            .find(|r| r.verdict != suite::Verdict::Skipped);
        let doc = report::checks_ktap(&o.rows, last, o.failure.as_ref(), cut);
        crate::output::print_bytes(doc.render().as_bytes());
    } else {
        ctx.say(report::checks_table(
            &o.rows,
            &ctx.caps,
            ctx.privilege.privilege,
        ));
    }
}

/// One table row in the JSON.
#[derive(serde::Serialize)]
struct RowJson<'a> {
    config: crate::blob::LinkConfig,
    routine: Routine,
    variant: &'a str,
    fill: Option<u8>,
    checks: u64,
    passed: u64,
    failed: u64,
    skipped: u64,
}

impl<'a> RowJson<'a> {
    fn of((k, t): (&'a suite::RowKey, &suite::Totals)) -> RowJson<'a> {
        RowJson {
            config: k.config,
            routine: k.routine,
            variant: &k.variant,
            fill: k.fill,
            checks: t.checks,
            passed: t.passed,
            failed: t.failed,
            skipped: t.skipped,
        }
    }
}

/// The JSON report of run/verify (serialized straight into the file; the
/// records are borrowed, not copied into a `Value`).
#[derive(serde::Serialize)]
struct JsonDoc<'a> {
    tool: &'static str,
    command: &'a str,
    host: HostInfo,
    cpu: &'a arch::CpuCaps,
    guest: serde_json::Value,
    partial: bool,
    /// Why `partial`: the signal, the error or the guest failure.
    partial_reason: Option<&'a str>,
    kernel: Option<&'a serde_json::Value>,
    /// Per family, the built-in variant that follows the kernel blob's
    /// path with the same alternatives decision (the differential check).
    kernel_paths: Option<serde_json::Value>,
    /// `checks` holds every check (`quick`) or those that did not pass
    /// (`full`); `rows` counts every check either way.
    geometry: Geometry,
    /// The run's random memset/memcpy sizes and their offsets (`--seed`
    /// repeats them).
    random_sizes: &'a [RandomSize],
    rows: Vec<RowJson<'a>>,
    /// Every kernel alternatives path verified (run/verify without
    /// `--alternatives`), as the loads that carried them.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    alternatives_loads: &'a [crate::kernel::paths::Load],
    checks: &'a [CheckRecord],
    failure: &'a Option<GuestFailure>,
    summary: serde_json::Value,
}

fn json_doc<'a>(
    ctx: &'a Ctx,
    command: &'a str,
    configs: &[Side],
    o: &'a Outcome,
    summary: serde_json::Value,
) -> JsonDoc<'a> {
    let first_load = configs
        .first()
        .and_then(|c| o.loads.get(c.config().name()))
        .cloned()
        .unwrap_or(serde_json::Value::Null);
    JsonDoc {
        tool: "hypclear",
        command,
        host: HostInfo::collect(&ctx.caps, o.counter_khz),
        cpu: &ctx.caps,
        guest: json!({
            "load_address": first_load,
            "load_addresses": o.loads,
            "privilege": ctx.privilege,
            "mem": ctx.mem,
            "backing": ctx.common.backing(),
            "prefault": ctx.common.prefault,
            "seed": ctx.seed,
        }),
        partial: o.interrupted,
        partial_reason: None,
        kernel: ctx.sides.iter().find_map(Side::external).map(|e| &e.report),
        kernel_paths: ctx
            .sides
            .iter()
            .find_map(Side::external)
            .map(|e| json!(crate::kernel::external::builtin_paths(e))),
        geometry: o.geometry,
        random_sizes: &o.random_sizes,
        rows: o.rows.0.iter().map(RowJson::of).collect(),
        alternatives_loads: &o.alternatives_loads,
        checks: &o.records,
        failure: &o.failure,
        summary,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::Strategy as _;

    proptest::proptest! {
        /// Issue 38: `verify -s 18446744073709551615` passed the fit check
        /// and failed inside the VM (exit 1). Over the whole u64 range of
        /// `-s` and `--mem`: a usage error (exit 2), or a plan whose every
        /// check's footprint covers its bytes and fits the arena.
        #[test]
        fn every_size_and_mem_plans_or_is_a_usage_error(
            size in proptest::prop_oneof![
                proptest::prelude::any::<u64>(),
                (0..4096u64).prop_map(|d| u64::MAX - d),
                (0..1u64 << 24),
            ],
            mem in proptest::prop_oneof![
                proptest::prelude::any::<u64>(),
                (1..64u64).prop_map(|m| m << 26),
            ],
        ) {
            let side = Side::Builtin(LinkConfig::Vanilla);
            let f = Filter {
                routines: vec![Routine::Memset, Routine::Memcpy],
                sizes: vec![size],
                ..Filter::default()
            };
            let checked = check_filter(std::slice::from_ref(&side), &f)
                .and_then(|()| vmm::validate_mem(mem).map_err(Error::from));
            match checked {
                Err(Error::Usage(_)) => {}
                Err(e) if e.exit_code() == 2 => {}
                Err(e) => proptest::prop_assert!(false, "exit {}: {e}", e.exit_code()),
                Ok(()) => {
                    proptest::prop_assert!(size <= suite::MAX_SIZE);
                    let caps = arch::CpuCaps::default();
                    let (specs, _) = suite::plan(&side, &caps, &f, arena(mem), &Patterns::new(1, 0));
                    for s in &specs {
                        let need = suite::footprint(s);
                        proptest::prop_assert!(need >= s.total() && need <= arena(mem), "{s:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn an_unrunnable_path_is_every_check_skipped_with_the_reason() {
        let side = Side::Builtin(LinkConfig::Vanilla);
        let caps = arch::CpuCaps::default();
        let filter = Filter {
            routines: vec![Routine::Memset],
            ..Filter::default()
        };
        let pats = Patterns::new(1, 0);
        let (specs, skipped) = suite::plan(&side, &caps, &filter, u64::MAX, &pats);
        let rows = suite::skip_all(&side, &caps, &filter, &pats, "no FEAT_MOPS");
        assert!(!specs.is_empty());
        assert_eq!(rows.len(), specs.len() + skipped.len());
        assert!(rows.iter().all(|r| r.verdict == suite::Verdict::Skipped
            && r.reason.as_deref() == Some("no FEAT_MOPS")
            && r.routine == Routine::Memset));
        // A side that is no alternatives load keeps the filter and its names.
        assert_eq!(
            side_filter(&side, &filter).map(|f| f.routines),
            Some(vec![Routine::Memset])
        );
        let mut r = rows[..1].to_vec();
        let before = r[0].variant.clone();
        relabel(&side, &mut r);
        assert_eq!(r[0].variant, before);
    }
}
