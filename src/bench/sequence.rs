//! The run sequence of one side (guest or host) of one cell in one session:
//! warm-up runs until the throughput is steady (Mann–Kendall plus a drift
//! tolerance over the last runs, `inference::WarmupController`) or the cap
//! is reached, then the measured runs. Guest and host use the same
//! sequence, so they are measured alike.
use super::plan::Plan;
use super::{Cache, Sample};
use crate::bench::inference::{SteadyConfig, WarmupController, WarmupDecision};
use crate::check::checker::Placement;
use crate::error::{Error, Result};
use crate::vmm::memory::GuestRam;
use serde::{Deserialize, Serialize};

/// The warm-up of one session: how many runs it took, whether it settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Steady {
    pub session: u64,
    pub warmup_used: u64,
    /// `Some(false)`: the cap was reached without a steady state (the cell
    /// is flagged); `None`: a fixed warm-up (`--max-warmup 0`), not judged.
    pub settled: Option<bool>,
}

/// Warm-up and measured samples of one session.
#[derive(Debug, Clone)]
pub struct Sequence {
    pub warmup: Vec<Sample>,
    pub measured: Vec<Sample>,
    pub steady: Steady,
    /// Untimed verification passes run around the sequence.
    pub verified: u64,
}

/// The steady-state parameters of a plan (`None`: fixed warm-up).
pub fn steady_config(plan: &Plan) -> Option<SteadyConfig> {
    (plan.max_warmup > 0).then(|| SteadyConfig {
        max_warmup: plan.max_warmup as usize,
        ..SteadyConfig::default()
    })
}

/// Run `one` (one timed run from the precondition; returns its sample)
/// through the warm-up and then `plan.repeats` times; numbers the runs.
pub fn run(plan: &Plan, session: u64, mut one: impl FnMut() -> Result<Sample>) -> Result<Sequence> {
    let mut warmup = Vec::new();
    let settled = match steady_config(plan) {
        None => {
            for _ in 0..plan.warmup {
                warmup.push(one()?);
            }
            None
        }
        Some(cfg) => {
            let mut ctl = WarmupController::new(cfg, plan.warmup as usize)
                .map_err(|e| Error::Usage(format!("--max-warmup: {e}")))?;
            loop {
                let s = one()?;
                let d = ctl.push(s.bytes_per_sec);
                warmup.push(s);
                match d {
                    WarmupDecision::Continue => {}
                    WarmupDecision::Settled { .. } => break Some(true),
                    WarmupDecision::Capped { .. } => break Some(false),
                }
            }
        }
    };
    let mut measured = Vec::with_capacity(plan.repeats as usize);
    for _ in 0..plan.repeats {
        measured.push(one()?);
    }
    for (i, s) in warmup.iter_mut().enumerate() {
        s.session = session;
        s.run = i as u64;
    }
    for (i, s) in measured.iter_mut().enumerate() {
        s.session = session;
        s.run = i as u64;
    }
    Ok(Sequence {
        steady: Steady {
            session,
            warmup_used: warmup.len() as u64,
            settled,
        },
        warmup,
        measured,
        verified: 0,
    })
}

/// Establish the precondition of one timed pass (outside the timing):
/// demand fill drops the target's pages; a cold cache evicts the target
/// (populated only: flushing a dropped page would fault it back in) and a
/// copy's source.
pub fn precondition(
    ram: &GuestRam,
    places: &[Placement],
    demand: bool,
    cache: Cache,
) -> Result<()> {
    for p in places {
        if demand {
            ram.discard(p.dst, p.len)?;
        } else if cache == Cache::Cold {
            ram.evict(p.dst, p.len)?;
        }
        if let (Some(src), Cache::Cold) = (p.src, cache) {
            ram.evict(src, p.len)?;
        }
    }
    Ok(())
}
