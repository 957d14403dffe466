//! The run sequence of one side (guest or host) of one cell in one session:
//! warm-up runs until the throughput is steady (Mann–Kendall plus a drift
//! tolerance over the last runs, `inference::WarmupController`) or the cap
//! is reached, then the measured runs. The window that shows the steady
//! state is in it: its last `--repeats` runs are the first measured ones
//! (a 256 MB session warmed up 5 runs a side and then measured 3 more).
//! Guest and host use the same sequence, so they are measured alike.
use super::plan::{Plan, SampleRule};
use super::{Cache, Sample};
use crate::check::checker::Placement;
use crate::error::{Error, Result};
use crate::inference::{SteadyConfig, WarmupController, WarmupDecision};
pub use crate::model::Steady;
use crate::vmm::memory::GuestRam;

/// Warm-up and measured samples of one session.
#[derive(Debug, Clone)]
pub(crate) struct Sequence {
    pub warmup: Vec<Sample>,
    pub measured: Vec<Sample>,
    pub steady: Steady,
}

/// The steady-state parameters of a plan (`None`: fixed warm-up).
pub(crate) fn steady_config(plan: &Plan) -> Option<SteadyConfig> {
    (plan.max_warmup > 0).then(|| SteadyConfig {
        max_warmup: plan.max_warmup as usize,
        ..SteadyConfig::default()
    })
}

/// The runs a session takes a side, as a plan sets them up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionRuns {
    /// `warmup` unmeasured runs, then `measured`.
    Fixed { warmup: u64, measured: u64 },
    /// Between `min` and `max` runs until the last `window` are steady;
    /// the last `adopted` of that window are measured, then `more` runs.
    UntilSteady {
        min: u64,
        max: u64,
        window: u64,
        adopted: u64,
        more: u64,
    },
}

impl Plan {
    /// What [`SideRun`] does with this plan's warm-up and repeats.
    pub fn session_runs(&self) -> SessionRuns {
        match steady_config(self) {
            None => SessionRuns::Fixed {
                warmup: self.warmup,
                measured: self.repeats,
            },
            Some(cfg) => {
                let adopted = adopted(&cfg, self);
                SessionRuns::UntilSteady {
                    min: min_warmup(&cfg, self, adopted)
                        .max(cfg.window)
                        .min(cfg.max_warmup) as u64,
                    max: cfg.max_warmup as u64,
                    window: cfg.window as u64,
                    adopted: adopted as u64,
                    more: self.repeats - adopted as u64,
                }
            }
        }
    }
}

/// Runs of a settled window that are measured: the last `--repeats`, at
/// most the window.
fn adopted(cfg: &SteadyConfig, plan: &Plan) -> usize {
    cfg.window.min(plan.repeats as usize)
}

/// Runs judged before any is measured: at least `--warmup` stay
/// unmeasured, besides the adopted ones (capped).
fn min_warmup(cfg: &SteadyConfig, plan: &Plan, adopted: usize) -> usize {
    (plan.warmup as usize + adopted).min(cfg.max_warmup)
}

/// One side's sequence in progress: warming up until steady (or the
/// cap), then measuring under the [`SampleRule`].
struct SideRun {
    rule: SampleRule,
    ctl: Option<WarmupController>,
    /// Undisturbed runs at the end of a settled window that are measured
    /// (the last `--repeats` of it, at most the window).
    adopt: usize,
    warmup: Vec<Sample>,
    /// `None` while warming up; then whether it settled (`None` inside:
    /// a fixed warm-up, not judged).
    settled: Option<Option<bool>>,
    /// Every warm-up run executed emulated code (see [`SampleRule::disturbed`]).
    emulated: bool,
    measured: Vec<Sample>,
    undisturbed: u64,
}

impl SideRun {
    fn new(plan: &Plan) -> Result<SideRun> {
        let cfg = steady_config(plan);
        let adopt = cfg.map_or(0, |c| adopted(&c, plan));
        let ctl = match cfg {
            Some(cfg) => Some(
                WarmupController::new(cfg, min_warmup(&cfg, plan, adopt))
                    .map_err(|e| Error::WarmupRule(e.to_string()))?,
            ),
            None => None,
        };
        let fixed_none = ctl.is_none() && plan.warmup == 0;
        Ok(SideRun {
            rule: plan.sample_rule(),
            ctl,
            adopt,
            warmup: Vec::new(),
            settled: fixed_none.then_some(None),
            emulated: false,
            measured: Vec::with_capacity(plan.repeats as usize),
            undisturbed: 0,
        })
    }

    fn active(&self) -> bool {
        self.settled.is_none()
            || self
                .rule
                .again(self.measured.len() as u64, self.undisturbed)
    }

    /// One run: a warm-up run (runs that lost time to other tasks say
    /// nothing about the trend and are not judged) or a measured one.
    fn step(&mut self, plan: &Plan, one: &mut impl FnMut() -> Result<Sample>) -> Result<()> {
        let mut s = one()?;
        if self.settled.is_some() {
            s.disturbed = SampleRule::disturbed(&s, self.emulated);
            self.undisturbed += u64::from(!s.disturbed);
            self.measured.push(s);
            return Ok(());
        }
        let lost = s.lost_time;
        let bps = s.bytes_per_sec;
        self.warmup.push(s);
        let n = self.warmup.len() as u64;
        self.settled = match &mut self.ctl {
            None => (n >= plan.warmup).then_some(None),
            Some(ctl) => match (!lost).then(|| ctl.push(bps)) {
                Some(WarmupDecision::Settled { .. }) => Some(Some(true)),
                Some(WarmupDecision::Capped { .. }) => Some(Some(false)),
                _ if n >= plan.max_warmup => Some(Some(false)),
                _ => None,
            },
        };
        if self.settled.is_some() {
            self.emulated = self.warmup.iter().all(|s| s.emulated);
        }
        if self.settled == Some(Some(true)) {
            self.adopt_window();
        }
        Ok(())
    }

    /// The settled window's last [`SideRun::adopt`] undisturbed runs (and
    /// any disturbed run among them) move from the warm-up to the measured
    /// runs: the trend test showed them steady.
    fn adopt_window(&mut self) {
        let (mut left, mut at) = (self.adopt, self.warmup.len());
        while left > 0 && at > 0 {
            at -= 1;
            left -= usize::from(!self.warmup[at].lost_time);
        }
        for mut s in self.warmup.split_off(at) {
            s.disturbed = SampleRule::disturbed(&s, self.emulated);
            self.undisturbed += u64::from(!s.disturbed);
            self.measured.push(s);
        }
    }

    /// The sequence, runs numbered and the warm-up's disturbed ones marked.
    fn finish(mut self, session: u64) -> Sequence {
        for (i, s) in self.warmup.iter_mut().enumerate() {
            s.session = session;
            s.run = i as u64;
            s.disturbed = SampleRule::disturbed(s, self.emulated);
        }
        for (i, s) in self.measured.iter_mut().enumerate() {
            s.session = session;
            s.run = i as u64;
        }
        Sequence {
            steady: Steady {
                session,
                warmup_used: self.warmup.len() as u64,
                settled: self.settled.flatten(),
            },
            warmup: self.warmup,
            measured: self.measured,
        }
    }
}

/// Run `one` (one timed run from the precondition; returns its sample)
/// through the warm-up and then under the [`SampleRule`]; marks the
/// disturbed runs and numbers the runs (one side alone: the unit tests;
/// bench runs both sides by turns, [`run_pair`]).
#[cfg(test)]
pub(crate) fn run(
    plan: &Plan,
    session: u64,
    mut one: impl FnMut() -> Result<Sample>,
) -> Result<Sequence> {
    let mut side = SideRun::new(plan)?;
    while side.active() {
        side.step(plan, &mut one)?;
    }
    Ok(side.finish(session))
}

/// Guest and host of one session by turns, run for run (host first when
/// `host_first`), each through its own warm-up and [`SampleRule`]: both
/// sides see the same moments of the machine, so a session's guest/host
/// pairs runs that ran next to each other.
pub(crate) fn run_pair(
    plan: &Plan,
    session: u64,
    host_first: bool,
    mut guest: impl FnMut() -> Result<Sample>,
    mut host: Option<impl FnMut() -> Result<Sample>>,
) -> Result<(Sequence, Option<Sequence>)> {
    let mut g = SideRun::new(plan)?;
    let mut h = match host {
        Some(_) => Some(SideRun::new(plan)?),
        None => None,
    };
    loop {
        let host_turn = |h: &mut Option<SideRun>, host: &mut Option<_>| -> Result<()> {
            if let (Some(h), Some(one)) = (h.as_mut(), host.as_mut())
                && h.active()
            {
                h.step(plan, one)?;
            }
            Ok(())
        };
        if !g.active() && !h.as_ref().is_some_and(SideRun::active) {
            break;
        }
        if host_first {
            host_turn(&mut h, &mut host)?;
        }
        if g.active() {
            g.step(plan, &mut guest)?;
        }
        if !host_first {
            host_turn(&mut h, &mut host)?;
        }
    }
    Ok((g.finish(session), h.map(|h| h.finish(session))))
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
    use crate::plan::{DEFAULT_MAX_RUNS_FACTOR, Variants};
    use crate::routines::Routine;
    use crate::vmm::memory::Backing;
    use crate::{Order, PageState};

    fn plan(warmup: u64, max_warmup: u64) -> Plan {
        Plan {
            routine: Routine::ClearPages,
            shape: crate::Shape {
                size: 1 << 20,
                loops: 1,
                vcpus: 1,
            },
            chunks: vec![1 << 20],
            variants: Variants::All,
            orders: vec![Order::Forward],
            fills: vec![PageState::Populate],
            backings: vec![Backing::Anon],
            sides: vec![LinkConfig::Vanilla.into()],
            warmup,
            max_warmup,
            repeats: 3,
            max_runs: 3 * DEFAULT_MAX_RUNS_FACTOR,
            sessions: 1,
            precision: None,
            priority: crate::Priority::Normal,
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
            emulated: false,
            preempted: 0,
            off_cpu_ns: 0.0,
            lost_time: false,
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

    /// A run that lost time (`lost`) or ran emulated code (`emu`).
    fn disturbed_sample(bps: f64, lost: bool, emu: bool) -> Sample {
        Sample {
            lost_time: lost,
            emulated: emu,
            ..sample(bps)
        }
    }

    #[test]
    fn disturbed_runs_are_repeated_until_enough_or_the_cap() {
        let rule = SampleRule {
            repeats: 3,
            max_runs: 12,
        };
        assert!(rule.again(0, 0) && rule.again(11, 2));
        assert!(!rule.again(3, 3) && !rule.again(12, 2));
        // Every other measured run preempted: 5 runs for 3 undisturbed.
        let mut k = 0;
        let s = run(&plan(1, 0), 0, || {
            k += 1;
            Ok(disturbed_sample(10.0, k % 2 == 1 && k > 1, false))
        })
        .unwrap();
        let flags: Vec<bool> = s.measured.iter().map(|m| m.disturbed).collect();
        assert_eq!(flags, vec![false, true, false, true, false], "{s:?}");
        assert_eq!(
            s.measured.iter().map(|m| m.run).collect::<Vec<_>>(),
            (0..5).collect::<Vec<_>>()
        );
        // Every run preempted: the cap, 4 x --repeats, and no more.
        let s = run(&plan(1, 0), 0, || Ok(disturbed_sample(3.0, true, false))).unwrap();
        assert_eq!(s.measured.len(), 12);
        assert!(s.measured.iter().all(|m| m.disturbed));
    }

    #[test]
    fn emulation_throughout_is_the_state_a_stray_one_is_repeated() {
        // --cpl 0 on PVM: every run emulated, from the warm-up on; the
        // runs are the measurement (3, not 12), preempted ones still out.
        let mut k = 0;
        let s = run(&plan(2, 0), 0, || {
            k += 1;
            Ok(disturbed_sample(0.1, k == 4, true))
        })
        .unwrap();
        assert_eq!(s.measured.len(), 4, "{s:?}");
        assert_eq!(s.measured.iter().filter(|m| m.disturbed).count(), 1);
        // A native session with one emulated run: that run is repeated.
        let mut k = 0;
        let s = run(&plan(1, 0), 0, || {
            k += 1;
            Ok(disturbed_sample(10.0, false, k == 2))
        })
        .unwrap();
        assert_eq!(s.measured.len(), 4, "{s:?}");
        assert!(s.measured[0].disturbed && !s.measured[1].disturbed);
    }

    #[test]
    fn the_warm_up_judges_only_runs_that_kept_the_cpu() {
        // Flat at 25 with every third run preempted at a third of the
        // speed: the preempted runs do not keep the warm-up going.
        let mut k = 0;
        let s = run(&plan(1, 20), 0, || {
            k += 1;
            Ok(match k % 3 {
                0 => disturbed_sample(8.0, true, false),
                _ => sample(25.0),
            })
        })
        .unwrap();
        assert_eq!(s.steady.settled, Some(true), "{s:?}");
        assert!(s.steady.warmup_used < 20, "{s:?}");
    }

    #[test]
    fn the_settled_windows_last_runs_are_the_first_measured() {
        // Flat: the window of 5 settles at once, its last 3 are measured.
        let mut k = 0;
        let mut flat = || {
            k += 1;
            Ok(sample(25.0 + k as f64 * 1e-3))
        };
        let s = run(&plan(1, 20), 0, &mut flat).unwrap();
        assert_eq!((s.steady.warmup_used, s.measured.len()), (2, 3), "{s:?}");
        assert_eq!(s.steady.settled, Some(true));
        assert_eq!(s.measured[0].bytes_per_sec, 25.003);
        // --warmup 4: at least 4 runs stay unmeasured.
        let s = run(&plan(4, 20), 0, &mut flat).unwrap();
        assert_eq!((s.steady.warmup_used, s.measured.len()), (4, 3), "{s:?}");
        // A preempted run inside the window moves with it, marked, and
        // does not count: 3 undisturbed measured runs still.
        let mut k = 0;
        let s = run(&plan(1, 20), 0, || {
            k += 1;
            Ok(match k {
                4 => disturbed_sample(8.0, true, false),
                _ => sample(25.0),
            })
        })
        .unwrap();
        let kept = s.measured.iter().filter(|m| !m.disturbed).count();
        assert_eq!((s.measured.len(), kept), (4, 3), "{s:?}");
        assert!(s.measured[0].bytes_per_sec == 25.0 && s.measured[1].disturbed);
    }

    #[test]
    fn the_headlines_runs_are_what_a_flat_session_runs() {
        // What the plan says a session runs is what a flat one ran: its
        // `min` runs in all, the last `adopted` of them measured.
        for (warmup, repeats) in [(1, 3), (4, 3), (1, 1), (0, 7)] {
            let p = Plan {
                repeats,
                ..plan(warmup, 20)
            };
            let SessionRuns::UntilSteady {
                min,
                max,
                window,
                adopted,
                more,
            } = p.session_runs()
            else {
                panic!("{:?}", p.session_runs());
            };
            assert_eq!((max, window), (20, 5));
            let mut k = 0;
            let s = run(&p, 0, || {
                k += 1;
                Ok(sample(25.0 + k as f64 * 1e-3))
            })
            .unwrap();
            let used = s.steady.warmup_used as u64;
            assert_eq!(
                used + adopted,
                min,
                "--warmup {warmup} --repeats {repeats}: {s:?}"
            );
            assert_eq!(s.measured.len() as u64, adopted + more, "{s:?}");
        }
        let fixed = plan(2, 0).session_runs();
        assert_eq!(
            fixed,
            SessionRuns::Fixed {
                warmup: 2,
                measured: 3
            }
        );
    }

    #[test]
    fn guest_and_host_run_by_turns() {
        // Each side's own rule: the host loses its first two measured
        // runs and makes them up; the order of the calls is the turns.
        let log = std::cell::RefCell::new(Vec::new());
        let mut hk = 0;
        let (g, h) = run_pair(
            &plan(1, 0),
            1,
            true,
            || {
                log.borrow_mut().push('g');
                Ok(sample(9.0))
            },
            Some(|| {
                log.borrow_mut().push('h');
                hk += 1;
                Ok(disturbed_sample(10.0, hk == 2 || hk == 3, false))
            }),
        )
        .unwrap();
        let h = h.unwrap();
        assert_eq!((g.measured.len(), h.measured.len()), (3, 5));
        assert_eq!(log.borrow().iter().collect::<String>(), "hghghghghh");
        assert!(h.measured.iter().all(|m| m.session == 1));
        let (g, h) = run_pair(
            &plan(1, 0),
            0,
            false,
            || Ok(sample(9.0)),
            None::<fn() -> Result<Sample>>,
        )
        .unwrap();
        assert!(h.is_none() && g.measured.len() == 3);
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
