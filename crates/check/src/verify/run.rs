//! Running a run/verify plan: one VM per side, booted early (the first
//! one alone, on the calling thread: that is the first hypercall), each
//! side's suite side by side or one after the other, the JSON handed to
//! a checkpoint while checks complete.
use super::doc::{Doc, IN_PROGRESS, Summary};
use super::outcome::{ConfigRun, FirstHypercall, Outcome, Report, VmFacts};
use super::plan::{self, Admitted, Plan, relabel, relabel_run, side_filter};
use crate::blob::LinkConfig;
use crate::checker::Patterns;
use crate::error::{Error, Result};
use crate::kernel::Side;
use crate::suite::{self, Geometry, Keep, Rows, RunOptions};
use crate::units::format_size;
use crate::vmm::{self, Vm};
use std::sync::{Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

/// Where the results so far go while checks complete (the binary writes
/// them as the `--json` file); a failed checkpoint does not stop the run,
/// the final write reports the error.
pub type Checkpoint<'a> = &'a mut (dyn FnMut(&Doc<'_>) -> Result<()> + Send);

/// The progress bars: one per side, added to `group` (drawn where it
/// draws), each made by `bar` for a number of checks.
pub struct Bars<'a> {
    pub group: &'a indicatif::MultiProgress,
    pub bar: fn(u64) -> indicatif::ProgressBar,
}

/// How often the checkpoint gets the results while checks complete: at
/// most every second, and never more than 1/[`CHECKPOINT_SHARE`] of the
/// run's time (each rewrites the whole document: tens of ms for a default
/// `run`, which took 0.14 s longer with a checkpoint every second).
const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);
const CHECKPOINT_SHARE: u32 = 50;

/// The least time from a checkpoint that took `cost` to the next one.
fn checkpoint_gap(cost: Duration) -> Duration {
    CHECKPOINT_EVERY.max(cost.saturating_mul(CHECKPOINT_SHARE))
}

/// A VM that has booted and answered its first hypercall.
struct Booted {
    vm: Vm,
    first_hypercall: FirstHypercall,
}

/// Boot one VM of `side` up to its first hypercall.
fn boot(plan: &Plan, side: &Side) -> Result<Booted> {
    let b = &plan.boot;
    let mut vm = Vm::new(vmm::open_kvm()?, &b.vm_options(side)?)?;
    vm.vcpu(0)?.start(b.timeout)?;
    Ok(Booted {
        first_hypercall: FirstHypercall {
            after: b.start.elapsed(),
        },
        vm,
    })
}

/// What every side's run shares.
struct Shared<'a, 'c> {
    plan: &'a Plan,
    pats: &'a Patterns,
    bars: &'a Bars<'a>,
    live: &'a Live<'a, 'c>,
}

/// The results so far, handed to the checkpoint at most every
/// [`CHECKPOINT_EVERY`] while checks complete, so that a run killed
/// outright keeps what it finished (a stop request and errors write the
/// final, partial report instead).
struct Live<'a, 'c> {
    plan: &'a Plan,
    state: Mutex<LiveState<'c>>,
}

struct LiveState<'c> {
    sink: Option<Checkpoint<'c>>,
    /// When the next checkpoint is due (None: at the first results).
    due: Option<Instant>,
    /// Per side, in the plan's order: its last checkpoint.
    runs: Vec<Option<Snapshot>>,
}

/// One side's results at a checkpoint: every record final.
struct Snapshot {
    config: LinkConfig,
    facts: VmFacts,
    run: suite::SuiteRun,
}

impl<'a, 'c> Live<'a, 'c> {
    fn new(plan: &'a Plan, sink: Option<Checkpoint<'c>>) -> Self {
        let runs = plan.sides.iter().map(|_| None).collect();
        let state = Mutex::new(LiveState {
            sink,
            due: None,
            runs,
        });
        Live { plan, state }
    }

    /// Save side `index`'s results so far (`facts`, `run`) with the
    /// others' last ones.
    fn checkpoint(&self, a: &Admitted, index: usize, facts: VmFacts, run: &suite::SuiteRun) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        let LiveState {
            sink: Some(sink),
            due,
            runs,
        } = &mut *st
        else {
            return;
        };
        if due.is_some_and(|t| Instant::now() < t) {
            return;
        }
        let began = Instant::now();
        let Some(side) = self.plan.sides.get(index) else {
            return;
        };
        let mut run = run.clone();
        relabel_run(side, &mut run);
        if let Some(slot) = runs.get_mut(index) {
            *slot = Some(Snapshot {
                config: side.config(),
                facts,
                run,
            });
        }
        let mut o = Outcome::default();
        for s in runs.iter().flatten() {
            o.add(s.config, s.facts, s.run.clone());
        }
        o.random_sizes = self.plan.random_sizes.clone();
        let summary = Summary::of(self.plan.boot.start, &o);
        let doc = Doc::of(self.plan, &a.caps, &o, &summary, Some(IN_PROGRESS));
        // A failed checkpoint does not stop the run: the final write
        // reports the error.
        let _ = sink(&doc);
        *due = Some(Instant::now() + checkpoint_gap(began.elapsed()));
    }
}

/// The suite of side `index` in its booted VM, stopping at the first
/// guest failure.
fn run_config(
    a: &Admitted,
    (index, side): (usize, &Side),
    booted: Booted,
    shared: &Shared<'_, '_>,
) -> Result<ConfigRun> {
    let Shared {
        plan,
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
    let filter = &side_filter(side, &plan.filter).unwrap_or_else(|| plan.filter.clone());
    let (specs, mut skipped) = suite::plan(side, &a.caps, filter, plan::arena(plan.boot.mem), pats);
    let banner = banner(plan, side, &vm);
    let pb = bars.group.add((bars.bar)(specs.len() as u64));
    pb.set_prefix(config.name());
    let opts = RunOptions {
        timeout: plan.boot.timeout,
        scope: plan.scope,
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
        let mut checkpoint = |r: &suite::SuiteRun| live.checkpoint(a, index, facts, r);
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
        vm.vcpu(0)?.exit(plan.boot.timeout)?;
    }
    Ok(ConfigRun {
        config,
        banner,
        facts,
        run,
        skipped,
    })
}

/// The line that introduces a side's run: its blob, where it was
/// loaded, the guest RAM and counter, and a kernel load's paths.
fn banner(plan: &Plan, side: &Side, vm: &Vm) -> String {
    let config = side.config();
    let b = &plan.boot;
    let mut banner = format!(
        "{config:>7} blob: {} aliases, {} relocations, loaded at {:#x} (seed {}), {} {} guest RAM, {} {} kHz",
        vm.blob.aliases.len(),
        vm.blob.relocs.len(),
        vm.loaded.base,
        b.seed,
        format_size(b.mem),
        b.backing,
        crate::arch::COUNTER_NAME,
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

/// Whether the run stops after this side's result when the sides run one
/// after the other.
fn stops(r: &Result<ConfigRun>) -> bool {
    r.as_ref()
        .map_or(true, |r| r.run.failure.is_some() || r.run.interrupted)
}

/// A side's thread: told whether to run (`true`) or stop, it returns its
/// run, or `None` when it stopped without one.
type Other<'scope> = (
    mpsc::Sender<bool>,
    std::thread::ScopedJoinHandle<'scope, Option<Result<ConfigRun>>>,
);

/// Spawn the thread of side `index` (after the first): it boots its VM
/// early (see [`Plan::boots_early`]) and waits for its turn, which comes
/// once `admitted` is set.
fn spawn_other<'scope, 'env: 'scope, 'x: 'env, 'c: 'env>(
    s: &'scope std::thread::Scope<'scope, 'env>,
    (index, side): (usize, &'env Side),
    shared: &'env Shared<'x, 'c>,
    admitted: &'env OnceLock<Admitted>,
) -> Other<'scope> {
    // `true`: run now; `false`, or the sender dropped: stop.
    let (go, turn) = mpsc::channel::<bool>();
    let plan = shared.plan;
    let h = s.spawn(move || {
        let booted = plan.boots_early().then(|| boot(plan, side));
        if !turn.recv().unwrap_or(false) {
            return None;
        }
        // Set before any `true` is sent.
        let a = admitted.get()?;
        let booted = booted.unwrap_or_else(|| boot(plan, side));
        Some(booted.and_then(|b| run_config(a, (index, side), b, shared)))
    });
    (go, h)
}

/// Every run in side order, `first` then the others' as they join. One
/// after the other (not `side_by_side`), each is told to run only while
/// no run before it stopped the whole run.
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
            Err(_) => runs.push(Err(Error::internal(
                "a verification thread panicked; please report this as a hypclear bug",
            ))),
        }
    }
    runs
}

/// Boot one VM per side, run `prepare` (everything that may still refuse
/// the run), then the suites: side by side, or one after the other
/// stopping at the first guest failure. The first side's VM boots on
/// this thread before anything else (and alone: two VMs created at once
/// slow each other down). The others then boot on their own threads
/// while `prepare` runs, and wait for their turn; when `prepare` refuses
/// the run, they are dropped unused. Results come in side order.
fn boot_and_run<E: From<Error>>(
    shared: &Shared<'_, '_>,
    prepare: impl FnOnce() -> std::result::Result<Admitted, E>,
) -> std::result::Result<(Admitted, Vec<Result<ConfigRun>>), E> {
    let Some((first, rest)) = shared.plan.sides.split_first() else {
        return Err(Error::internal("no link configuration to run").into());
    };
    let cell = OnceLock::new();
    let runs = std::thread::scope(|s| {
        let booted = boot(shared.plan, first);
        let others: Vec<_> = (1..)
            .zip(rest)
            .map(|(i, side)| spawn_other(s, (i, side), shared, &cell))
            .collect();
        // Refused: the others are told to stop (their senders dropped).
        let admitted = prepare()?;
        let a = cell.get_or_init(|| admitted);
        if a.side_by_side {
            for (go, _) in &others {
                let _ = go.send(true);
            }
        }
        let first = booted.and_then(|b| run_config(a, (0, first), b, shared));
        Ok::<_, E>(join_others(first, others, a.side_by_side))
    })?;
    let a = cell
        .into_inner()
        .ok_or_else(|| Error::internal("the run context was never set"))?;
    Ok((a, runs))
}

/// Run `plan`: boot its VMs, `prepare` while they boot (the go-ahead, or
/// why the run cannot go on), run every side's suite and fold the
/// results. `checkpoint` (when given) gets the results so far, marked
/// partial, at most every second while checks complete, so a run killed
/// outright still leaves what it finished. An error before any work is
/// the result; one after it is in the [`Report`].
pub fn run<E: From<Error>>(
    plan: &Plan,
    bars: &Bars<'_>,
    prepare: impl FnOnce() -> std::result::Result<Admitted, E>,
    checkpoint: Option<Checkpoint<'_>>,
) -> std::result::Result<Report, E> {
    // The copy source (tens of MB) is made when the first copy needs it.
    let (_, pattern) = plan::sizes(&plan.filter, plan.boot.mem);
    let pats = &Patterns::new(plan.boot.seed, pattern as usize);
    let live = &Live::new(plan, checkpoint);
    let shared = &Shared {
        plan,
        pats,
        bars,
        live,
    };
    let (a, runs) = boot_and_run(shared, prepare)?;
    let (mut o, banners) = Outcome::gather(runs)?;
    o.geometry = plan.filter.geometry;
    o.random_sizes = plan.random_sizes.clone();
    let skip = plan.unrunnable_rows(&a.caps);
    o.rows.merge(Rows::of(&skip));
    o.records.extend(skip);
    o.alternatives_loads = plan
        .sides
        .iter()
        .chain(plan.unrunnable.iter().map(|(s, _)| s))
        .filter_map(|c| c.external()?.load.clone())
        .collect();
    let error = o.error.take();
    Ok(Report {
        outcome: o,
        banners,
        error,
        caps: a.caps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoints_come_every_second_at_most_and_take_at_most_a_fiftieth() {
        let ms = Duration::from_millis;
        assert_eq!(checkpoint_gap(ms(0)), ms(1000));
        assert_eq!(checkpoint_gap(ms(20)), ms(1000));
        assert_eq!(checkpoint_gap(ms(60)), ms(3000));
        assert_eq!(checkpoint_gap(Duration::MAX), Duration::MAX);
    }
}
