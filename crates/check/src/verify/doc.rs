//! The JSON document of run/verify ([`Doc`]: its keys, their order and
//! values are a schema that tests/ and readers of the file rely on) and
//! the summary line's figures.
use super::outcome::{Outcome, Report};
use super::plan::Plan;
use crate::arch::CpuCaps;
use crate::blob::LinkConfig;
use crate::kernel::Side;
use crate::routines::Routine;
use crate::suite::{self, CheckRecord, Geometry, RandomSize};
use crate::vmm::GuestFailure;
use crate::vmm::host::HostInfo;
use serde_json::json;
use std::time::{Duration, Instant};

/// The `partial_reason` of a JSON written while the run goes on.
pub(crate) const IN_PROGRESS: &str = "in progress: written while the run went on; a file that still says \
                               so was left by a process killed without a word (SIGKILL, the OOM \
                               killer, a lost machine) or one that could not write its final result \
                               (its error message says which)";

/// The summary line's figures (and the JSON's `summary`).
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    pub passed: u64,
    pub failed: u64,
    pub skipped: u64,
    /// Since the process started.
    pub elapsed: Duration,
    /// The first hypercall, in ms after the process started (0: none).
    pub first_ms: f64,
    pub checker_gbps: f64,
    pub checked_bytes: u64,
}

impl Summary {
    /// `o`'s figures, the time counted from `start` until now.
    pub(crate) fn of(start: Instant, o: &Outcome) -> Summary {
        let (passed, failed, skipped) = o.rows.counts();
        Summary {
            passed,
            failed,
            skipped,
            elapsed: start.elapsed(),
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

/// One table row in the JSON.
#[derive(serde::Serialize)]
struct RowJson<'a> {
    config: LinkConfig,
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
pub struct Doc<'a> {
    tool: &'static str,
    command: &'a str,
    host: HostInfo,
    cpu: &'a CpuCaps,
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

impl<'a> Doc<'a> {
    /// The document of `o`, marked partial for `cut` (why the results
    /// are partial), if any.
    pub(crate) fn of(
        plan: &'a Plan,
        caps: &'a CpuCaps,
        o: &'a Outcome,
        summary: &Summary,
        cut: Option<&'a str>,
    ) -> Doc<'a> {
        let boot = &plan.boot;
        let first_load = plan
            .sides
            .first()
            .and_then(|c| o.loads.get(c.config().name()))
            .cloned()
            .unwrap_or(serde_json::Value::Null);
        Doc {
            tool: "hypclear",
            command: plan.command,
            host: HostInfo::collect(caps, o.counter_khz),
            cpu: caps,
            guest: json!({
                "load_address": first_load,
                "load_addresses": o.loads,
                "privilege": boot.privilege,
                "mem": boot.mem,
                "backing": boot.backing,
                "prefault": boot.prefault,
                "seed": boot.seed,
            }),
            partial: cut.is_some(),
            partial_reason: cut,
            kernel: plan
                .sides
                .iter()
                .find_map(Side::external)
                .map(|e| &e.report),
            kernel_paths: plan
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
            summary: summary.json(),
        }
    }
}

impl Report {
    /// The summary line's figures, the time counted until now.
    pub fn summary(&self, plan: &Plan) -> Summary {
        Summary::of(plan.boot.start, &self.outcome)
    }

    /// The final JSON document: `summary` as the summary line gave it,
    /// partial for `cut` (see [`Report::partial_reason`]).
    pub fn doc<'a>(&'a self, plan: &'a Plan, summary: &Summary, cut: Option<&'a str>) -> Doc<'a> {
        Doc::of(plan, &self.caps, &self.outcome, summary, cut)
    }
}
