//! What the sides' runs produced, folded into one [`Outcome`], and the
//! [`Report`] run/verify hand back.
use crate::arch::CpuCaps;
use crate::blob::LinkConfig;
use crate::error::{Error, Failure, Result, VmmError};
use crate::suite::{self, CheckRecord, Geometry, RandomSize, Rows};
use crate::vmm::GuestFailure;
use serde_json::json;
use std::time::Duration;

/// What the suite produced over all sides.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Every check's record, or with `--geometry full` those that did not
    /// pass (see [`suite::Keep`]).
    pub records: Vec<CheckRecord>,
    /// Every check, counted per table row.
    pub rows: Rows,
    pub geometry: Geometry,
    /// The run's random memset/memcpy sizes (drawn from the seed).
    pub random_sizes: Vec<RandomSize>,
    pub failure: Option<GuestFailure>,
    pub(crate) loads: serde_json::Map<String, serde_json::Value>,
    pub(crate) first_hypercall: Option<FirstHypercall>,
    pub(crate) checked_bytes: u64,
    pub(crate) check_time: Duration,
    pub(crate) counter_khz: u64,
    /// A stop request (SIGINT, SIGTERM, SIGHUP) ended the run: what is
    /// here is partial.
    pub interrupted: bool,
    /// The kernel alternatives loads, run or SKIP (for the JSON).
    pub(crate) alternatives_loads: Vec<crate::kernel::paths::Load>,
    /// A VMM error that ended the run after work had begun (handed back
    /// in the [`Report`], to be returned once it is written).
    pub(crate) error: Option<Error>,
}

/// What one side's VM produced.
pub(crate) struct ConfigRun {
    pub(crate) config: LinkConfig,
    pub(crate) banner: String,
    pub(crate) facts: VmFacts,
    pub(crate) run: suite::SuiteRun,
    pub(crate) skipped: Vec<CheckRecord>,
}

/// The first hypercall of a run: when, after the process started.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FirstHypercall {
    pub(crate) after: Duration,
}

impl FirstHypercall {
    /// The earlier of two sides' first hypercalls.
    fn earliest(a: Option<Self>, b: Self) -> Option<Self> {
        match a {
            Some(a) if a.after <= b.after => Some(a),
            _ => Some(b),
        }
    }
}

/// What a side's JSON says of its VM.
#[derive(Clone, Copy)]
pub(crate) struct VmFacts {
    pub(crate) load: u64,
    pub(crate) counter_khz: u64,
    pub(crate) first_hypercall: FirstHypercall,
}

impl Outcome {
    /// Fold in one side's VM facts and checks; the first guest failure is
    /// the one reported.
    pub(crate) fn add(&mut self, config: LinkConfig, facts: VmFacts, run: suite::SuiteRun) {
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

    /// Gather the sides' results, in order, and the banner of each that
    /// ran. An error before any work is the result; one after is kept in
    /// [`Outcome::error`].
    pub(crate) fn gather(runs: Vec<Result<ConfigRun>>) -> Result<(Outcome, Vec<String>)> {
        let mut o = Outcome::default();
        let mut banners = Vec::new();
        for r in runs {
            let r = match r {
                // A stop request while this side's VM booted: nothing of
                // it to report, but the others' results (and the table)
                // stand.
                Err(Error::Vmm(VmmError::Interrupted)) => {
                    o.interrupted = true;
                    continue;
                }
                // A guest that failed before its first check (a watchdog
                // timeout at boot) is reported like one that failed in a
                // check.
                Err(Error::Vmm(VmmError::Guest(f))) => {
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
            banners.push(r.banner);
            o.rows.merge(Rows::of(&r.skipped));
            o.records.extend(r.skipped);
            o.add(r.config, r.facts, r.run);
        }
        Ok((o, banners))
    }
}

/// What a run/verify hands back: the outcome, each side's banner, and the
/// error that ended it after work had begun.
#[derive(Debug)]
pub struct Report {
    pub outcome: Outcome,
    /// Per side that ran, in order: the line that introduces it (its
    /// blob, where it was loaded, the guest RAM and counter, a kernel
    /// load's paths).
    pub banners: Vec<String>,
    /// A VMM error that ended the run after work had begun: the results
    /// are partial; return it once they are out.
    pub error: Option<Error>,
    pub(crate) caps: CpuCaps,
}

impl Report {
    /// Why the results are partial (the JSON's `partial_reason`, KTAP's
    /// `# interrupted:` line), if they are: a stop request, an error, a
    /// guest failure.
    pub fn partial_reason(&self) -> Option<String> {
        let o = &self.outcome;
        if o.interrupted {
            return Some(crate::interrupt::name().to_string());
        }
        if let Some(e) = &self.error {
            return Some(e.partial_reason());
        }
        o.failure
            .as_ref()
            .map(|f| format!("guest failure ({:?}): {}", f.kind, f.detail))
    }
}
