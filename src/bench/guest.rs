//! The guest side of a bench cell: warm-up and measured passes inside the
//! VM, timed by the guest counter, verified before and after, with the KVM
//! statistics of every run.
use super::plan::{CellSpec, Plan, pass_call, placement};
use super::{Fill, Sample};
use crate::check::checker::{self, Patterns, Placement};
use crate::error::{Error, Result};
use crate::routines::{self, Kind};
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
fn disturbed(stats: &BTreeMap<String, u64>, commands: u64) -> bool {
    stats.get("insn_emulation").copied().unwrap_or(0) > 2 * commands
}

/// Run one pass (all vCPUs at once); returns per-vCPU results.
fn guest_pass(
    vm: &mut Vm,
    cmds: &[crate::vmm::Command],
    timeout: Duration,
) -> Result<Vec<CallResult>> {
    if vm.vcpus.len() == 1 {
        return Ok(vec![vm.vcpu(0)?.call(&cmds[0], timeout)?]);
    }
    let barrier = Barrier::new(vm.vcpus.len());
    let results: Vec<Result<CallResult>> = std::thread::scope(|s| {
        let handles: Vec<_> = vm
            .vcpus
            .iter_mut()
            .zip(cmds)
            .map(|(v, c)| {
                let b = &barrier;
                s.spawn(move || {
                    b.wait();
                    v.call(c, timeout)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Internal("vCPU thread panicked".into())))
            })
            .collect()
    });
    results.into_iter().collect()
}

/// Timeout for one pass: the watchdog base plus time for slow first touch.
fn pass_timeout(plan: &Plan) -> Duration {
    plan.timeout + Duration::from_secs_f64(plan.size as f64 * plan.vcpus as f64 / 20e6)
}

/// Run one cell on `vm` for one session: warm-up + repeats, verified.
pub(super) fn run_cell(
    vm: &mut Vm,
    spec: &CellSpec,
    plan: &Plan,
    pats: &Patterns,
    session: u64,
) -> Result<Vec<Sample>> {
    let timeout = pass_timeout(plan);
    let places: Vec<Placement> = (0..plan.vcpus).map(|v| placement(plan, v)).collect();
    let cmds = places
        .iter()
        .map(|p| routines::command(&vm.blob, spec.variant, &pass_call(spec, plan, p, pats.fill)))
        .collect::<Result<Vec<_>>>()?;
    let kind = plan.routine.kind();
    let demand = spec.axes.fill == Fill::Demand;
    let total_runs = plan.warmup + plan.repeats;
    let mut samples = Vec::new();
    for run in 0..total_runs {
        let measured = run >= plan.warmup;
        let verify_this = measured && (run == plan.warmup || run + 1 == total_runs);
        for p in &places {
            if verify_this || run == 0 {
                checker::prepare_source(&vm.ram, p, pats)?;
            }
            if verify_this {
                if demand {
                    // Only the guards: the target stays untouched for the
                    // first-touch measurement (see verify_demand_clear).
                    checker::prepare_guards(&vm.ram, p, pats)?;
                } else {
                    checker::prepare(&vm.ram, p, pats)?;
                }
            }
        }
        let (ticks, per_vcpu_ticks, stats) =
            timed_passes(vm, &cmds, &places, plan, demand, timeout)?;
        if verify_this {
            for p in &places {
                let out = checker::check(&vm.ram, p, kind, pats)?;
                if !out.passed() {
                    return Err(verification_error(spec, &out));
                }
            }
        }
        if !measured {
            continue;
        }
        let bytes = plan.size * plan.loops * plan.vcpus;
        let (ns, bps, tpb) = rates(bytes, ticks, vm.counter_khz);
        let per_vcpu = if plan.vcpus > 1 {
            per_vcpu_ticks
                .iter()
                .map(|t| rates(plan.size * plan.loops, *t, vm.counter_khz).1)
                .collect()
        } else {
            vec![]
        };
        samples.push(Sample {
            session,
            run: run - plan.warmup,
            bytes,
            ns,
            bytes_per_sec: bps,
            ticks_per_byte: tpb,
            verified: verify_this,
            disturbed: disturbed(&stats, plan.loops * plan.vcpus),
            per_vcpu_bytes_per_sec: per_vcpu,
            kvm_stats: stats.into_iter().filter(|(_, v)| *v != 0).collect(),
        });
    }
    if demand && kind == Kind::Zero {
        verify_demand_clear(vm, &cmds, &places, plan, spec, pats, timeout)?;
    }
    Ok(samples)
}

/// `-l` passes of one run: total ticks (first start to last end over the
/// vCPUs), ticks per vCPU, and the summed KVM statistics.
fn timed_passes(
    vm: &mut Vm,
    cmds: &[crate::vmm::Command],
    places: &[Placement],
    plan: &Plan,
    demand: bool,
    timeout: Duration,
) -> Result<(u64, Vec<u64>, BTreeMap<String, u64>)> {
    let mut ticks = 0u64;
    let mut per_vcpu_ticks = vec![0u64; places.len()];
    let mut stats = BTreeMap::new();
    for _ in 0..plan.loops {
        if demand {
            for p in places {
                vm.ram.discard(p.dst, p.len)?;
            }
        }
        let rs = guest_pass(vm, cmds, timeout)?;
        let t0 = rs.iter().map(|r| r.t0).min().unwrap_or(0);
        let t1 = rs.iter().map(|r| r.t1).max().unwrap_or(0);
        ticks += t1.wrapping_sub(t0);
        for (i, r) in rs.iter().enumerate() {
            per_vcpu_ticks[i] += r.ticks();
            sum_stats(&mut stats, &r.stats);
        }
    }
    Ok((ticks, per_vcpu_ticks, stats))
}

/// Freshly faulted memory reads as zero, so a demand-mode clear cannot show
/// that it wrote anything: run the same pass once more, unmeasured, over the
/// seeded pattern and verify that.
fn verify_demand_clear(
    vm: &mut Vm,
    cmds: &[crate::vmm::Command],
    places: &[Placement],
    plan: &Plan,
    spec: &CellSpec,
    pats: &Patterns,
    timeout: Duration,
) -> Result<()> {
    for p in places {
        checker::prepare(&vm.ram, p, pats)?;
    }
    guest_pass(vm, cmds, timeout)?;
    for p in places {
        let out = checker::check(&vm.ram, p, plan.routine.kind(), pats)?;
        if !out.passed() {
            return Err(verification_error(spec, &out));
        }
    }
    Ok(())
}

fn verification_error(spec: &CellSpec, out: &checker::Outcome) -> Error {
    Error::Verification(format!(
        "{}: the measured region is wrong ({}: {} bad bytes, first at offset {}); no number is reported for a wrong routine",
        spec.axes.label(),
        out.breakdown.label(),
        out.bad_bytes,
        out.first_bad.unwrap_or(0)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disturbed_means_emulation_beyond_the_doorbell() {
        let mut s = BTreeMap::new();
        s.insert("insn_emulation".to_string(), 2);
        assert!(!disturbed(&s, 1));
        s.insert("insn_emulation".to_string(), 500);
        assert!(disturbed(&s, 1));
    }
}
