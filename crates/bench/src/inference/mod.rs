//! Session-aware inference for benchmark comparisons (issue 10).
//!
//! A cell's measurements form two levels (Kalibera & Jones, "Rigorous
//! Benchmarking in Reasonable Time", ISMM 2013): *sessions* (fresh VMs,
//! their "executions") and *runs* within a session (their "iterations").
//! Runs of one session share that session's state (placement, page tables,
//! host scheduling), so they are not independent: the session is the unit
//! of replication. Everything here therefore reduces a session to one
//! number, the logarithm of its mean throughput, before testing; changes are
//! relative (log ratios), so they are reported as percentages.
//!
//! * [`steady`]: warm-up detection within a session (Mann–Kendall trend
//!   test plus a practical-drift tolerance), online and offline.
//! * [`components`]: the two variance components and the optimal number of
//!   runs per session (Kalibera & Jones), printable.
//! * [`compare`]: the session-level comparison (paired t on per-pair log
//!   ratios for interleaved sessions, Welch t on log session means for
//!   separate ones, both from `bench::stats`), the change with its
//!   confidence interval, the
//!   equivalence verdict against a margin, Benjamini–Hochberg q values and
//!   the minimal detectable effect.
//! * [`drift`]: whether the host baseline moved between two invocations,
//!   and the guest/host-normalized comparison.
//!
//! The module is pure: no I/O, no clock.
pub(crate) mod blocks;
pub(crate) mod compare;
pub(crate) mod components;
pub(crate) mod drift;
pub(crate) mod steady;

#[cfg(test)]
mod sim;

pub(crate) use compare::{Comparison, Config, Design, Method, compare, decide_rows};
pub(crate) use components::{Costs, Limits, VarianceComponents, sessions_to_see};
pub(crate) use drift::host_drift;
pub(crate) use steady::{SteadyConfig, WarmupController, WarmupDecision};

pub(crate) use crate::stats::{mean, variance};
use serde::{Deserialize, Serialize};

/// What went wrong with the input of an inference routine.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum Error {
    /// Not enough sessions to estimate a between-session variance.
    #[error(
        "side {side} has {have} usable session(s), the comparison needs at least {need}; \
         run the bench with more --sessions"
    )]
    TooFewSessions {
        side: &'static str,
        have: usize,
        need: usize,
    },
    /// A throughput that is zero, negative, NaN or infinite.
    #[error(
        "side {side}, session {session}: throughput {value} is not a positive finite number; \
         the measurement is broken (re-run the bench)"
    )]
    BadSample {
        side: &'static str,
        session: usize,
        value: f64,
    },
    /// A paired comparison with sides that do not pair up.
    #[error(
        "a paired (interleaved) comparison needs as many A sessions as B sessions \
         (A has {a}, B has {b}); compare them as independent sessions instead"
    )]
    Unpaired { a: usize, b: usize },
    /// A parameter outside its range.
    #[error("{0}")]
    Parameter(String),
}

/// The measured runs of one session (throughput, higher is better), in the
/// order they ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Session {
    pub runs: Vec<f64>,
}

impl Session {
    pub(crate) fn new(runs: Vec<f64>) -> Session {
        Session { runs }
    }

    /// Arithmetic mean of the runs; `None` when there are none.
    pub(crate) fn mean(&self) -> Option<f64> {
        (!self.runs.is_empty()).then(|| mean(&self.runs))
    }
}

/// Validate a side: every run positive and finite; sessions without runs
/// are dropped. Returns the sessions' log means.
pub(crate) fn log_session_means(side: &'static str, s: &[Session]) -> Result<Vec<f64>, Error> {
    let mut out = Vec::with_capacity(s.len());
    for (i, sess) in s.iter().enumerate() {
        if let Some(&value) = sess.runs.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
            return Err(Error::BadSample {
                side,
                session: i,
                value,
            });
        }
        if let Some(m) = sess.mean() {
            out.push(m.ln());
        }
    }
    Ok(out)
}

/// Relative change in percent from a log ratio.
pub(crate) fn pct(log_ratio: f64) -> f64 {
    log_ratio.exp_m1() * 100.0
}
