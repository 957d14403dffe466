//! The run sequence of one side (guest or host) of one cell in one session:
//! warm-up runs until the throughput is steady (Mann–Kendall plus a drift
//! tolerance over the last runs, `inference::WarmupController`) or the cap
//! is reached, then the measured runs. Guest and host use the same
//! sequence, so they are measured alike.
use super::plan::Plan;
use super::{Cache, Sample};
use crate::check::checker::Placement;
use crate::error::{Error, Result};
use crate::inference::{SteadyConfig, WarmupController, WarmupDecision};
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
pub(crate) struct Sequence {
    pub warmup: Vec<Sample>,
    pub measured: Vec<Sample>,
    pub steady: Steady,
    /// Untimed verification passes run around the sequence.
    pub verified: u64,
}

/// The steady-state parameters of a plan (`None`: fixed warm-up).
pub(crate) fn steady_config(plan: &Plan) -> Option<SteadyConfig> {
    (plan.max_warmup > 0).then(|| SteadyConfig {
        max_warmup: plan.max_warmup as usize,
        ..SteadyConfig::default()
    })
}

/// Run `one` (one timed run from the precondition; returns its sample)
/// through the warm-up and then `plan.repeats` times; numbers the runs.
pub(crate) fn run(
    plan: &Plan,
    session: u64,
    mut one: impl FnMut() -> Result<Sample>,
) -> Result<Sequence> {
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
pub(crate) fn precondition(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blob::LinkConfig;
    use crate::plan::Variants;
    use crate::routines::Routine;
    use crate::vmm::memory::Backing;
    use crate::{Fill, Order};

    fn plan(warmup: u64, max_warmup: u64) -> Plan {
        Plan {
            routine: Routine::ClearPages,
            size: 1 << 20,
            chunks: vec![1 << 20],
            variants: Variants::All,
            loops: 1,
            orders: vec![Order::Forward],
            fills: vec![Fill::Populate],
            backings: vec![Backing::Anon],
            sides: vec![LinkConfig::Vanilla.into()],
            warmup,
            max_warmup,
            repeats: 3,
            sessions: 1,
            vcpus: 1,
            cache: Cache::Cold,
            host_baseline: true,
            prefault: false,
            timeout: std::time::Duration::from_secs(1),
        }
    }

    fn sample(bps: f64) -> Sample {
        Sample {
            session: 99,
            run: 99,
            bytes: 1,
            ns: 1.0,
            bytes_per_sec: bps,
            ticks_per_byte: 1.0,
            verified: false,
            disturbed: false,
            preempted: 0,
            per_vcpu_bytes_per_sec: vec![],
            kvm_stats: Default::default(),
        }
    }

    #[test]
    fn warm_up_lasts_until_the_ramp_is_over() {
        // A ramp (the LLC filling) for 6 runs, then flat.
        let seq = [
            9.0, 12.0, 15.0, 18.0, 21.0, 24.0, 25.0, 25.1, 24.9, 25.0, 25.05, 24.95,
        ];
        let mut i = 0;
        let s = run(&plan(1, 20), 7, || {
            let v = seq[i.min(seq.len() - 1)];
            i += 1;
            Ok(sample(v))
        })
        .unwrap();
        assert_eq!(s.steady.settled, Some(true), "{s:?}");
        assert!(s.steady.warmup_used >= 7, "{s:?}");
        assert_eq!(s.warmup.len() as u64, s.steady.warmup_used);
        assert_eq!(s.measured.len(), 3);
        assert!(s.measured.iter().all(|m| m.bytes_per_sec >= 24.0), "{s:?}");
        assert_eq!(
            s.measured
                .iter()
                .map(|m| (m.session, m.run))
                .collect::<Vec<_>>(),
            vec![(7, 0), (7, 1), (7, 2)]
        );
    }

    #[test]
    fn capped_and_fixed_warm_ups() {
        let mut x = 1.0;
        let s = run(&plan(1, 6), 0, || {
            x *= 1.2;
            Ok(sample(x))
        })
        .unwrap();
        assert_eq!((s.steady.warmup_used, s.steady.settled), (6, Some(false)));
        let s = run(&plan(2, 0), 0, || Ok(sample(1.0))).unwrap();
        assert_eq!((s.steady.warmup_used, s.steady.settled), (2, None));
        assert_eq!(s.measured.len(), 3);
    }

    #[test]
    fn eviction_keeps_the_contents() {
        let ram = GuestRam::new(0, 2 << 20, crate::vmm::memory::Backing::Anon, false).unwrap();
        ram.write_bytes(4096, &[0x5a; 8192]).unwrap();
        let p = Placement::new(4096, 8192, Some(0), 0);
        precondition(&ram, &[p], false, Cache::Cold).unwrap();
        let mut buf = vec![0u8; 8192];
        ram.read_into(4096, &mut buf).unwrap();
        assert!(buf.iter().all(|b| *b == 0x5a));
        // Demand fill drops the target instead.
        precondition(&ram, &[p], true, Cache::Cold).unwrap();
        ram.read_into(4096, &mut buf).unwrap();
        assert!(buf.iter().all(|b| *b == 0));
    }
}
