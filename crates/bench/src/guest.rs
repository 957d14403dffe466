//! The guest side of a bench cell: warm-up and measured passes inside the
//! VM, timed by the guest counter, with untimed verification passes before
//! and after, and the KVM statistics of every run.
use super::plan::{CellSpec, Plan, pass_call, placement};
use super::sequence;
use super::{PageState, Priority, Sample, sched};
use crate::check::checker::{self, Patterns, Placement};
use crate::error::{Error, Result};
use crate::routines;
use crate::vmm::{CallResult, Vm};
use std::collections::BTreeMap;
use std::sync::Barrier;
use std::time::Duration;

/// Counter ticks -> (ns, bytes/s, ticks/byte).
fn rates(bytes: u64, ticks: u64, counter_khz: u64) -> (f64, f64, f64) {
    let ns = ticks as f64 * 1e6 / counter_khz.max(1) as f64;
    let bps = if ns > 0.0 {
        bytes as f64 * 1e9 / ns
    } else {
        0.0
    };
    (ns, bps, ticks as f64 / bytes.max(1) as f64)
}

fn sum_stats(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
    for (k, v) in from {
        *into.entry(k.clone()).or_default() += v;
    }
}

/// Emulated instructions beyond the one MMIO doorbell store per command
/// mean the measured code itself was (partly) emulated.
fn emulated(stats: &BTreeMap<String, u64>, commands: u64) -> bool {
    stats.get("insn_emulation").copied().unwrap_or(0) > 2 * commands
}

/// Run one pass (all vCPUs at once); returns per-vCPU results and what
/// the scheduler did to the vCPU threads during it.
fn guest_pass(
    vm: &mut Vm,
    cmds: &[crate::vmm::Command],
    (timeout, fifo): (Duration, bool),
) -> Result<(Vec<CallResult>, sched::Off)> {
    if vm.vcpus.len() == 1 {
        let _rt = sched::Fifo::during(fifo);
        let w = sched::Watch::start();
        let r = vm.vcpu(0)?.call_with_stats(&cmds[0], timeout)?;
        kept_contract(&r)?;
        return Ok((vec![r], w.stop()));
    }
    let barrier = Barrier::new(vm.vcpus.len());
    let results: Vec<Result<(CallResult, sched::Off)>> = std::thread::scope(|s| {
        let handles: Vec<_> = vm
            .vcpus
            .iter_mut()
            .zip(cmds)
            .map(|(v, c)| {
                let b = &barrier;
                s.spawn(move || {
                    let _rt = sched::Fifo::during(fifo);
                    b.wait();
                    let w = sched::Watch::start();
                    let r = v.call_with_stats(c, timeout)?;
                    Ok((r, w.stop()))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::internal("vCPU thread panicked")))
            })
            .collect()
    });
    let mut out = Vec::with_capacity(results.len());
    let mut off = sched::Off::default();
    for r in results {
        let (r, o) = r?;
        kept_contract(&r)?;
        out.push(r);
        off.add(o);
    }
    Ok((out, off))
}

/// A pass whose routine broke the calling contract measured a wrong
/// routine (the guest stopped its calls at the breach).
fn kept_contract(r: &CallResult) -> Result<()> {
    match r.breach {
        Some(breach) => Err(Error::Contract { breach }),
        None => Ok(()),
    }
}

/// Timeout for one pass: the watchdog base plus time for slow first touch.
fn pass_timeout(plan: &Plan) -> Duration {
    plan.timeout + Duration::from_secs_f64(plan.shape.size as f64 * plan.shape.vcpus as f64 / 20e6)
}

/// One cell's guest side on `vm` in one session, ready to run: its
/// commands and placements, after an untimed verification pass
/// ([`GuestCell::new`]); [`GuestCell::check_outcome`] checks what the
/// timed runs left.
pub(super) struct GuestCell<'a> {
    vm: &'a mut Vm,
    spec: &'a CellSpec,
    plan: &'a Plan,
    pats: &'a Patterns,
    session: u64,
    cmds: Vec<crate::vmm::Command>,
    places: Vec<Placement>,
    timeout: Duration,
}

impl<'a> GuestCell<'a> {
    pub(super) fn new(
        vm: &'a mut Vm,
        spec: &'a CellSpec,
        (plan, pats, session): (&'a Plan, &'a Patterns, u64),
    ) -> Result<GuestCell<'a>> {
        let timeout = pass_timeout(plan);
        let places: Vec<Placement> = (0..plan.shape.vcpus).map(|v| placement(plan, v)).collect();
        let cmds = places
            .iter()
            .map(|p| {
                routines::command(&vm.blob, spec.variant, &pass_call(spec, plan, p, pats.fill))
                    .map_err(Error::from)
            })
            .collect::<Result<Vec<_>>>()?;
        let mut g = GuestCell {
            vm,
            spec,
            plan,
            pats,
            session,
            cmds,
            places,
            timeout,
        };
        g.verify()?;
        Ok(g)
    }

    /// The untimed verification pass before the timed runs.
    fn verify(&mut self) -> Result<()> {
        let c = (self.plan, self.spec, self.pats, self.timeout);
        verify_pass(self.vm, &self.cmds, &self.places, c)
    }

    /// After the timed runs (guest and host, on these pages): what they
    /// left, checked where they left it: the target as the last pass wrote
    /// it, the guards and a copy's source as the verification pass wrote
    /// them, so a stray write or an overrun in any timed run shows. (A
    /// second verification pass, as before, rewrote the guards first and
    /// so could not see one; it also cost a pass and a pattern write of
    /// the target, a tenth of a 256 MB session.)
    pub(super) fn check_outcome(&self) -> Result<()> {
        check_left(
            &self.vm.ram,
            &self.places,
            (self.plan, self.spec, self.pats),
        )
    }

    /// One timed run (`-l` passes, each from the precondition).
    pub(super) fn one(&mut self) -> Result<Sample> {
        let plan = self.plan;
        let bytes = plan.shape.size * plan.shape.loops * plan.shape.vcpus;
        let Timed {
            ticks,
            per_vcpu_ticks,
            stats,
            off,
        } = timed_passes(
            self.vm,
            &self.cmds,
            &self.places,
            plan,
            self.spec,
            self.timeout,
        )?;
        let khz = self.vm.counter_khz;
        let (ns, bps, tpb) = rates(bytes, ticks, khz);
        let per_vcpu = if plan.shape.vcpus > 1 {
            per_vcpu_ticks
                .iter()
                .map(|t| rates(plan.shape.size * plan.shape.loops, *t, khz).1)
                .collect()
        } else {
            vec![]
        };
        Ok(Sample {
            session: self.session,
            run: 0,
            bytes,
            ns,
            bytes_per_sec: bps,
            ticks_per_byte: tpb,
            verified: false,
            // Decided by the sample rule (sequence) from these two.
            disturbed: false,
            emulated: emulated(&stats, plan.shape.loops * plan.shape.vcpus),
            preempted: off.switches,
            off_cpu_ns: off.off_cpu_ns,
            lost_time: off.disturbed(),
            per_vcpu_bytes_per_sec: per_vcpu,
            kvm_stats: stats.into_iter().filter(|(_, v)| *v != 0).collect(),
        })
    }
}

/// Guest counters are guest data: a sum that overflows is a protocol error.
fn overflow(what: &str) -> crate::error::Error {
    crate::error::Error::protocol(format!("guest timestamps do not add up: {what} overflows"))
}

/// What the timed passes of one run measured.
struct Timed {
    /// Sum over the passes of first start to last end over the vCPUs.
    ticks: u64,
    per_vcpu_ticks: Vec<u64>,
    /// Summed KVM statistics.
    stats: BTreeMap<String, u64>,
    /// What the scheduler did to the vCPU threads during the passes.
    off: sched::Off,
}

/// `-l` passes of one run, each from the precondition.
fn timed_passes(
    vm: &mut Vm,
    cmds: &[crate::vmm::Command],
    places: &[Placement],
    plan: &Plan,
    spec: &CellSpec,
    timeout: Duration,
) -> Result<Timed> {
    let demand = spec.axes.fill == PageState::Demand;
    let mut ticks = 0u64;
    let mut per_vcpu_ticks = vec![0u64; places.len()];
    let mut stats = BTreeMap::new();
    let mut off = sched::Off::default();
    for _ in 0..plan.shape.loops {
        sequence::precondition(&vm.ram, places, demand, plan.cache)?;
        let (rs, o) = guest_pass(vm, cmds, (timeout, plan.priority == Priority::Fifo))?;
        off.add(o);
        let t0 = rs.iter().map(|r| r.t0).min().unwrap_or(0);
        let t1 = rs.iter().map(|r| r.t1).max().unwrap_or(0);
        ticks = t1
            .checked_sub(t0)
            .and_then(|d| ticks.checked_add(d))
            .ok_or_else(|| overflow("the pass's start/end timestamps"))?;
        for (i, r) in rs.iter().enumerate() {
            per_vcpu_ticks[i] = per_vcpu_ticks[i]
                .checked_add(r.ticks())
                .ok_or_else(|| overflow("the per-vCPU tick sum"))?;
            sum_stats(&mut stats, &r.stats);
        }
    }
    Ok(Timed {
        ticks,
        per_vcpu_ticks,
        stats,
        off,
    })
}

/// An untimed verification pass: the seeded patterns into the guards, the
/// target and the source (so even a clear of fresh, zero-reading pages
/// shows that it wrote), one pass, then the check. Never a timed run.
fn verify_pass(
    vm: &mut Vm,
    cmds: &[crate::vmm::Command],
    places: &[Placement],
    (plan, spec, pats, timeout): (&Plan, &CellSpec, &Patterns, Duration),
) -> Result<()> {
    let expect = checker::Expect::of(plan.routine.kind(), pats.fill);
    for p in places {
        checker::prepare(&vm.ram, p, pats, expect)?;
    }
    guest_pass(vm, cmds, (timeout, false))?;
    for p in places {
        let out = checker::check(&vm.ram, p, expect, pats)?;
        if !out.passed() {
            return Err(verification_error(spec, &out));
        }
    }
    Ok(())
}

/// [`GuestCell::check_outcome`]: `places` as the passes left them.
fn check_left(
    ram: &crate::vmm::memory::GuestRam,
    places: &[Placement],
    (plan, spec, pats): (&Plan, &CellSpec, &Patterns),
) -> Result<()> {
    let expect = checker::Expect::of(plan.routine.kind(), pats.fill);
    for p in places {
        let out = checker::check(ram, p, expect, pats)?;
        if !out.passed() {
            return Err(verification_error(spec, &out));
        }
    }
    Ok(())
}

fn verification_error(spec: &CellSpec, out: &checker::Outcome) -> Error {
    Error::WrongRegion {
        cell: spec.axes.label(),
        breakdown: out.breakdown.label(),
        bad_bytes: out.bad_bytes,
        first_bad: Some(out.first_bad.unwrap_or(0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 37: what the timed runs left is checked where they left it. A
    /// byte a timed run wrote past the target fails the cell; the second
    /// verification pass this replaced rewrote the guards first and passed.
    #[test]
    fn a_stray_write_in_a_timed_run_fails_the_cell() {
        use crate::vmm::memory::{Backing, GuestRam};
        let plan = crate::plan::tests::plan();
        let (cells, _) = plan.expand(&crate::arch::CpuCaps::default()).unwrap();
        let spec = &cells[0];
        let ram = GuestRam::new(
            crate::arch::RAM_BASE,
            crate::plan::mem_needed(&plan),
            Backing::Anon,
            false,
        )
        .unwrap();
        let pats = Patterns::new(7, 0);
        let p = crate::plan::placement(&plan, 0);
        let expect = checker::Expect::of(plan.routine.kind(), pats.fill);
        checker::prepare(&ram, &p, &pats, expect).unwrap();
        // The timed runs: clear_pages of the target.
        let zeros = vec![0u8; p.len as usize];
        ram.write_bytes(p.dst, &zeros).unwrap();
        check_left(&ram, &[p], (&plan, spec, &pats)).expect("a clean outcome");
        // One of them wrote a byte past the end.
        let mut past = [0u8];
        ram.read_into(p.dst + p.len, &mut past).unwrap();
        ram.write_bytes(p.dst + p.len, &[!past[0]]).unwrap();
        let e = check_left(&ram, &[p], (&plan, spec, &pats)).unwrap_err();
        assert!(
            matches!(e, Error::WrongRegion { .. }),
            "{e}: an overrun in a timed run must fail the cell"
        );
        // What the former after-pass saw: the guards rewritten, all clean.
        checker::prepare(&ram, &p, &pats, expect).unwrap();
        ram.write_bytes(p.dst, &zeros).unwrap();
        assert!(check_left(&ram, &[p], (&plan, spec, &pats)).is_ok());
    }

    #[test]
    fn emulated_means_emulation_beyond_the_doorbell() {
        let mut s = BTreeMap::new();
        s.insert("insn_emulation".to_string(), 2);
        assert!(!emulated(&s, 1));
        s.insert("insn_emulation".to_string(), 500);
        assert!(emulated(&s, 1));
    }
}
