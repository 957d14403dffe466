//! The lines bench prints around its tables: the headline, the unit line,
//! and `--ab`'s headline and legend.
use crate::arch;
use crate::bench::{self, BenchResult};
use crate::routines::privilege::PrivilegeChoice;
use std::time::Duration;

/// The run's first line: routine, CPU, cells, sessions, runs, privilege.
pub(crate) fn headline(
    plan: &bench::Plan,
    model: &str,
    cells: usize,
    p: &PrivilegeChoice,
) -> String {
    format!(
        "hypclear bench {} on {}: {} cell(s) x {} session(s) x ({}), guest at {} ({})",
        plan.routine,
        model,
        cells,
        match plan.precision {
            Some(p) => format!(
                "{}..{} (until +-{}%, at most {} s)",
                plan.sessions,
                p.max_sessions,
                bench::precision::pct_text(p.half_width * 100.0),
                p.max_seconds.as_secs_f64()
            ),
            None => plan.sessions.to_string(),
        },
        runs(plan),
        p.name,
        p.reason
    )
}

/// A session's runs a side: a fixed warm-up and the measured runs, or runs
/// until the last few are steady, the last `--repeats` of them measured.
fn runs(plan: &bench::Plan) -> String {
    match plan.session_runs() {
        bench::SessionRuns::Fixed { warmup, measured } => {
            format!("{warmup} warm-up + {measured} measured")
        }
        bench::SessionRuns::UntilSteady {
            min,
            max,
            window,
            adopted,
            more,
        } => {
            let more = match more {
                0 => String::new(),
                n => format!(" + {n} more"),
            };
            format!(
                "{min}..{max} runs until the last {window} are steady, their last {adopted} measured{more}"
            )
        }
    }
}

/// The line under the table: what the figures are (`unit`: the table's
/// `--unit`) and how long the run took.
pub(crate) fn unit_line(result: &BenchResult, unit: &str, elapsed: Duration) -> String {
    format!(
        "bytes/sec from guest {} ticks at {} kHz; GB/sec = 2^30 bytes/sec, as perf bench prints it \
         (the table: {}, --unit); \
         guest/host = per session, mean guest over mean host of the same object on the \
         guest's own pages (the vCPU stopped), runs taking turns; their geometric mean [95% paired t interval]; \
         {:.1} seconds",
        arch::COUNTER_NAME,
        result.host.counter_khz,
        unit,
        elapsed.as_secs_f64()
    )
}

/// `--ab`'s first line: the pairs and how long each is measured.
pub(crate) fn ab_headline(pairs: usize, opts: &bench::ab::AbOptions) -> String {
    format!(
        "bench A/B in one guest: {} pair(s), per call on the same buffer, randomised ABBA \
         blocks; {}",
        pairs,
        match opts.detect {
            Some(d) => format!(
                "until flagged or equivalent within +-{}%, at most {:.0} s a pair",
                d * 100.0,
                opts.budget.as_secs_f64()
            ),
            None => format!("{:.0} s a pair", opts.budget.as_secs_f64()),
        }
    )
}

/// The line under `--ab`'s table: what its columns are.
pub(crate) fn ab_legend(elapsed: Duration) -> String {
    format!(
        "change = throughput of B against A: per guest the Hodges-Lehmann shift of its \
         blocks' ln(B time / A time), their mean over the guests (fresh VMs, both images \
         moved, main and beside swapped every other one) with its t interval at the level \
         shown (--detect spends 5% over its looks); MDE = the change this n detects with \
         power 0.8; a block with a call over {}x its side's median, or in a batch that lost \
         time to other tasks, is dropped whole; {:.1} seconds",
        bench::ab::OUTLIER,
        elapsed.as_secs_f64()
    )
}
