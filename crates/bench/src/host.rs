//! The host baseline: the very same routine objects the blob is built from,
//! linked into this binary (see build.rs), run natively on the session's
//! guest RAM (through the host mapping, between two guest passes, while no
//! vCPU runs) at the guest's own placements, with the same lowered calls:
//! guest/host then compares the execution context on the very same pages,
//! not two buffers' page placement and huge-page luck.
use super::plan::{CellSpec, Plan, pass_call, placement};
use super::sequence;
use super::{Cache, PageState, Priority, Sample, sched};
use crate::check::checker::{Patterns, Placement};
use crate::error::Result;
use crate::routines;
use crate::vmm::Args;
use crate::vmm::memory::GuestRam;
use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};
use std::time::Instant;

use hypclear_guest::host as generated;

/// A routine callable with the dispatcher's convention `fn(a0, a1, a2)`.
pub(crate) type HostFn = unsafe extern "C" fn(u64, u64, u64) -> u64;

/// The host copy of the routine behind alias `name`.
pub(crate) fn routine(name: &str) -> Option<HostFn> {
    generated::HOST_ROUTINES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| {
            // SAFETY: every routine follows the C ABI with at most three
            // integer arguments; passing unused extra argument registers is
            // harmless under the SysV x86_64 and AAPCS64 calling conventions.
            unsafe { std::mem::transmute::<unsafe extern "C" fn(), HostFn>(*f) }
        })
}

/// Names of all routines linked into the host.
#[cfg(test)]
pub(crate) fn names() -> Vec<&'static str> {
    generated::HOST_ROUTINES.iter().map(|(n, _)| *n).collect()
}

/// The same cell natively on the host, with the same routine object,
/// called with the same lowered arguments as the guest on the guest's
/// pages: the calls, ready to run ([`HostCell::one`]) between guest passes.
pub(super) struct HostCell<'a> {
    spec: &'a CellSpec,
    plan: &'a Plan,
    session: u64,
    tsc_khz: u64,
    buf: Arc<GuestRam>,
    places: Vec<Placement>,
    calls: Vec<routines::Lowered>,
    f: HostFn,
}

impl<'a> HostCell<'a> {
    /// Share of the buffer on huge pages ([`GuestRam::huge_share`]): the
    /// guest's own.
    pub(super) fn huge_share(&self) -> Option<f64> {
        self.buf.huge_share()
    }

    /// `None` when the host has no copy of the cell's routine. `buf` is
    /// the session VM's guest RAM.
    pub(super) fn new(
        spec: &'a CellSpec,
        (plan, pats, session): (&'a Plan, &Patterns, u64),
        (buf, tsc_khz): (Arc<GuestRam>, u64),
    ) -> Result<Option<HostCell<'a>>> {
        let (places, calls) = host_calls(&buf, spec, plan, pats)?;
        let Some(f) = calls.first().and_then(|l| routine(&l.alias)) else {
            return Ok(None);
        };
        Ok(Some(HostCell {
            spec,
            plan,
            session,
            tsc_khz,
            buf,
            places,
            calls,
            f,
        }))
    }

    /// One timed run (`-l` passes, each from the precondition).
    pub(super) fn one(&mut self) -> Result<Sample> {
        let plan = self.plan;
        let demand = self.spec.axes.fill == PageState::Demand;
        let bytes = plan.shape.size * plan.shape.loops * plan.shape.vcpus;
        let mut ns = 0f64;
        let mut per = vec![0f64; self.places.len()];
        let mut off = sched::Off::default();
        for _ in 0..plan.shape.loops {
            sequence::precondition(&self.buf, &self.places, demand, plan.cache)?;
            let times = host_pass(self.f, &self.calls, plan.priority == Priority::Fifo);
            for t in &times {
                off.add(t.2);
            }
            let start = times.iter().map(|t| t.0).min();
            let end = times.iter().map(|t| t.1).max();
            if let (Some(a), Some(b)) = (start, end) {
                ns += (b - a).as_nanos() as f64;
            }
            for (i, (a, b, _)) in times.iter().enumerate() {
                per[i] += (*b - *a).as_nanos() as f64;
            }
        }
        let bps = bytes as f64 * 1e9 / ns.max(1.0);
        Ok(Sample {
            session: self.session,
            run: 0,
            bytes,
            ns,
            bytes_per_sec: bps,
            ticks_per_byte: ns * self.tsc_khz as f64 / 1e6 / bytes as f64,
            verified: false,
            disturbed: false,
            emulated: false,
            preempted: off.switches,
            off_cpu_ns: off.off_cpu_ns,
            lost_time: off.disturbed(),
            per_vcpu_bytes_per_sec: if self.places.len() > 1 {
                per.iter()
                    .map(|n| (plan.shape.size * plan.shape.loops) as f64 * 1e9 / n.max(1.0))
                    .collect()
            } else {
                vec![]
            },
            kvm_stats: BTreeMap::new(),
        })
    }
}

/// The guest's placements in its RAM `buf` and the lowered calls on the
/// host addresses of those bytes; copies get their source written.
fn host_calls(
    buf: &GuestRam,
    spec: &CellSpec,
    plan: &Plan,
    pats: &Patterns,
) -> Result<(Vec<Placement>, Vec<routines::Lowered>)> {
    let places: Vec<Placement> = (0..plan.shape.vcpus).map(|v| placement(plan, v)).collect();
    let mut calls = Vec::new();
    for p in &places {
        if let Some(src) = p.src {
            buf.write_bytes(src, &pats.source()[..plan.shape.size as usize])?;
        }
        let mut l = routines::lower(
            spec.config,
            spec.variant,
            &pass_call(spec, plan, p, pats.fill),
        )?;
        // The guest's bytes at their host addresses (the calls of a pass
        // stay inside [dst, dst + len), and a copy's inside its source).
        let dst = buf.host_range(p.dst, p.len)?;
        l.args.a0 = dst + (l.args.a0 - p.dst);
        if let Some(src) = p.src {
            l.args.a1 = buf.host_range(src, p.len)? + (l.args.a1 - src);
        }
        calls.push(l);
    }
    Ok((places, calls))
}

/// One host pass: every lowered call on its own thread, started together;
/// returns each thread's (start, end, what the scheduler did to it).
fn host_pass(
    f: HostFn,
    calls: &[routines::Lowered],
    fifo: bool,
) -> Vec<(Instant, Instant, sched::Off)> {
    let barrier = Barrier::new(calls.len());
    std::thread::scope(|s| {
        let hs: Vec<_> = calls
            .iter()
            .map(|l| {
                let b = &barrier;
                s.spawn(move || {
                    let _rt = sched::Fifo::during(fifo);
                    b.wait();
                    let w = sched::Watch::start();
                    let (t0, t1) = timed(f, &l.args);
                    (t0, t1, w.stop())
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or((Instant::now(), Instant::now(), sched::Off::default()))
            })
            .collect()
    })
}

/// `args`' calls of `f` on this thread: (start, end).
fn timed(f: HostFn, a: &Args) -> (Instant, Instant) {
    let t0 = Instant::now();
    let (mut x0, mut x1) = (a.a0, a.a1);
    for _ in 0..a.count {
        // SAFETY: the lowered arguments stay inside guest RAM (the guest's
        // own placement and call, whose bytes `host_calls` bounds-checked),
        // which outlives every caller, and no vCPU runs while a host call
        // does (guest and host take turns on one thread).
        unsafe { f(x0, x1, a.a2) };
        x0 = x0.wrapping_add(a.a0_step);
        x1 = x1.wrapping_add(a.a1_step);
    }
    (t0, Instant::now())
}

/// The host baseline of an A/B pair in one guest (`bench --ab`): both
/// sides' host copies, called with the guest's lowered arguments on the
/// guest's own buffer while its vCPU waits between batches.
pub(super) struct HostPair {
    fs: [HostFn; 2],
    calls: [Args; 2],
    buf: Arc<GuestRam>,
    place: Placement,
    cache: Cache,
}

impl HostPair {
    /// `None` when a side has no host copy (a kernel blob's routines exist
    /// only in the guest image). `buf` is the guest's RAM.
    pub(super) fn new(
        specs: [&CellSpec; 2],
        (plan, pats): (&Plan, &Patterns),
        buf: Arc<GuestRam>,
    ) -> Result<Option<HostPair>> {
        let one = |spec: &CellSpec| -> Result<Option<(HostFn, Args, Placement)>> {
            let (places, calls) = host_calls(&buf, spec, plan, pats)?;
            Ok(match (places.first(), calls.first()) {
                (Some(p), Some(l)) => routine(&l.alias).map(|f| (f, l.args, *p)),
                _ => None,
            })
        };
        let (Some(a), Some(b)) = (one(specs[0])?, one(specs[1])?) else {
            return Ok(None);
        };
        Ok(Some(HostPair {
            fs: [a.0, b.0],
            calls: [a.1, b.1],
            place: a.2,
            buf,
            cache: plan.cache,
        }))
    }

    /// One slot of `side` (`per_slot` calls where the guest's slot repeats
    /// its call), from the same precondition as the guest's: its ns.
    pub(super) fn slot(&self, side: usize, per_slot: u64) -> Result<f64> {
        if self.cache == Cache::Cold {
            sequence::precondition(&self.buf, &[self.place], false, Cache::Cold)?;
        }
        let (a, b) = timed(self.fs[side], &repeated(self.calls[side], per_slot));
        Ok((b - a).as_nanos() as f64)
    }
}

/// `args` with its one call made `n` calls on the same buffer (a pass of
/// several chunks is left as it is: it walks the buffer).
pub(super) fn repeated(mut args: Args, n: u64) -> Args {
    if args.count == 1 && n > 1 {
        args.count = n;
        args.a0_step = 0;
        args.a1_step = 0;
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vmm::memory::{Backing, GuestRam};

    /// The test plan, its cells, a guest RAM for it and its placement.
    fn fixture() -> (Plan, Vec<CellSpec>, Arc<GuestRam>, Placement) {
        use crate::plan::{mem_needed, placement};
        let plan = crate::plan::tests::plan();
        let (cells, _) = plan.expand(&crate::arch::CpuCaps::default()).unwrap();
        let bytes = mem_needed(&plan);
        let ram = GuestRam::new(crate::arch::RAM_BASE, bytes, Backing::Anon, false).unwrap();
        let p = placement(&plan, 0);
        (plan, cells, Arc::new(ram), p)
    }

    /// The host baseline runs on the guest's RAM at the guest's own
    /// placement: after a host run the guest's target is cleared and the
    /// page below it (the guard's) is not.
    #[test]
    fn the_host_baseline_runs_on_the_guests_pages() {
        use hypclear_abi::PAGE_SIZE as PAGE;
        let (plan, cells, ram, p) = fixture();
        let spec = &cells[0];
        ram.write_bytes(p.dst - PAGE, &vec![0xaa; (PAGE + p.len) as usize])
            .unwrap();
        let pats = Patterns::new(1, 0);
        let mut h = HostCell::new(spec, (&plan, &pats, 0), (ram.clone(), 1))
            .unwrap()
            .expect("a host copy of clear_pages");
        h.one().unwrap();
        let mut got = vec![0u8; (PAGE + p.len) as usize];
        ram.read_into(p.dst - PAGE, &mut got).unwrap();
        assert!(got[..PAGE as usize].iter().all(|b| *b == 0xaa));
        assert!(got[PAGE as usize..].iter().all(|b| *b == 0));
    }

    /// An A/B pair's host slot calls each side's own host copy with the
    /// guest's arguments on the guest's buffer, `per_slot` times.
    #[test]
    fn the_ab_host_baseline_calls_each_side_on_the_guests_buffer() {
        let (plan, cells, ram, p) = fixture();
        let pats = Patterns::new(1, 0);
        let pair = HostPair::new([&cells[0], &cells[0]], (&plan, &pats), ram.clone())
            .unwrap()
            .expect("host copies");
        for side in [0, 1] {
            ram.write_bytes(p.dst, &vec![0xaa; p.len as usize]).unwrap();
            assert!(pair.slot(side, 3).unwrap() > 0.0);
            let mut got = vec![0xffu8; p.len as usize];
            ram.read_into(p.dst, &mut got).unwrap();
            assert!(got.iter().all(|b| *b == 0), "side {side}");
        }
        let one = Args {
            count: 1,
            a0_step: 4096,
            ..Args::default()
        };
        assert_eq!((repeated(one, 3).count, repeated(one, 3).a0_step), (3, 0));
        let walk = Args { count: 4, ..one };
        assert_eq!(repeated(walk, 3), walk);
    }

    #[test]
    fn host_routines_are_linked_and_clear_memory() {
        assert!(!names().is_empty());
        let buf = GuestRam::new(0, 2 << 20, Backing::Anon, false).unwrap();
        buf.write_bytes(0, &[0xaa; 4096]).unwrap();
        let name = names()
            .into_iter()
            .find(|n| n.starts_with("memset_"))
            .expect("a memset variant");
        let f = routine(name).unwrap();
        // SAFETY: buffer is large enough.
        unsafe { f(buf.host_addr() + 3, 0x5a, 100) };
        // SAFETY: a host buffer no vCPU can reach; nothing else writes it.
        let s = unsafe { buf.slice(0, 200) }.unwrap();
        assert_eq!(s[2], 0xaa);
        assert!(s[3..103].iter().all(|b| *b == 0x5a));
        assert_eq!(s[103], 0xaa);
        buf.discard(0, 4096).unwrap();
        // SAFETY: as above.
        assert_eq!(unsafe { buf.slice(0, 1) }.unwrap()[0], 0);
    }
}
