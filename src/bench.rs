//! `hypclear bench`: perf-bench-style throughput of the blob's routines
//! inside the guest, side by side with the same objects on the host.
//!
//! Method (as in the seed discussion): `--warmup` unmeasured runs, then
//! `--repeats` measured runs, in each of `--sessions` fresh VMs. Guest
//! timestamps come from the guest counter around the call loop and are
//! converted with the vCPU's counter frequency. Every cell's first and last
//! measured regions are verified, so a fast but wrong routine never produces
//! a number; each run carries its KVM binary-stats deltas and runs disturbed
//! by instruction emulation are flagged and left out of the statistics.
use crate::abi::PAGE_SIZE;
use crate::arch;
use crate::blob::LinkConfig;
use crate::error::{Error, Result};
use crate::hostbench::{self, HostBuffer};
use crate::memory::Backing;
use crate::routines::{self, Call, Kind, Routine, VariantDef};
use crate::stats::Summary;
use crate::verify::{self, GUARD, Patterns, Placement};
use crate::vm::{CallResult, Privilege, Vm, VmOptions};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Barrier;
use std::time::{Duration, Instant};

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// One call over the whole size.
    Oneshot,
    /// Chunk by chunk, ascending addresses.
    Forward,
    /// Chunk by chunk, descending addresses.
    Reverse,
}

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Fill {
    /// First touch inside the measurement: the pages are dropped before
    /// every pass (MADV_DONTNEED), so KVM and the host fault them back in.
    Demand,
    /// Pre-faulted: the memory is warm from the warm-up runs.
    Populate,
}

/// The axes of one benchmark cell (each a column in the output).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Axes {
    pub routine: String,
    pub variant: String,
    pub config: String,
    pub chunk: u64,
    pub order: Order,
    pub fill: Fill,
    pub backing: String,
    pub size: u64,
    pub loops: u64,
    pub vcpus: u64,
}

impl Axes {
    /// One-line name, like a perf bench benchmark name.
    pub fn label(&self) -> String {
        let mut parts = vec![self.routine.clone(), self.variant.clone()];
        if !self.config.is_empty() {
            parts.push(self.config.clone());
        }
        parts.push(format!(
            "-s {} -k {}",
            crate::units::format_size(self.size),
            crate::units::format_size(self.chunk)
        ));
        if self.loops > 1 {
            parts.push(format!("-l {}", self.loops));
        }
        parts.push(format!("{:?}", self.order).to_lowercase());
        parts.push(format!("{:?}", self.fill).to_lowercase());
        parts.push(self.backing.clone());
        if self.vcpus > 1 {
            parts.push(format!("x{} vCPUs", self.vcpus));
        }
        parts.join(" ")
    }
}

/// One measured (or warm-up) run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sample {
    pub session: u64,
    pub run: u64,
    pub bytes: u64,
    pub ns: f64,
    pub bytes_per_sec: f64,
    /// Counter ticks (TSC / CNTVCT) per byte.
    pub ticks_per_byte: f64,
    pub verified: bool,
    pub disturbed: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_vcpu_bytes_per_sec: Vec<f64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kvm_stats: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cell {
    pub axes: Axes,
    pub guest: Vec<Sample>,
    pub host: Vec<Sample>,
    pub guest_bytes_per_sec: Option<Summary>,
    pub guest_ticks_per_byte: Option<Summary>,
    pub host_bytes_per_sec: Option<Summary>,
    /// median guest bytes/s / median host bytes/s
    pub guest_host_ratio: Option<f64>,
    pub disturbed_runs: u64,
    pub verified_runs: u64,
}

impl Cell {
    /// A cell with samples and no summaries yet (see [`summarize`]).
    pub fn new(axes: Axes, guest: Vec<Sample>, host: Vec<Sample>) -> Cell {
        Cell {
            axes,
            guest,
            host,
            guest_bytes_per_sec: None,
            guest_ticks_per_byte: None,
            host_bytes_per_sec: None,
            guest_host_ratio: None,
            disturbed_runs: 0,
            verified_runs: 0,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchResult {
    pub tool: String,
    pub command: String,
    pub host: crate::host::HostInfo,
    pub privilege: String,
    pub warmup: u64,
    pub repeats: u64,
    pub sessions: u64,
    pub cells: Vec<Cell>,
}

/// Everything `bench` was asked to do.
#[derive(Debug, Clone)]
pub struct Plan {
    pub routine: Routine,
    pub size: u64,
    pub chunks: Vec<u64>,
    pub variants: Vec<String>,
    pub loops: u64,
    pub orders: Vec<Order>,
    pub fills: Vec<Fill>,
    pub backings: Vec<Backing>,
    pub configs: Vec<LinkConfig>,
    pub warmup: u64,
    pub repeats: u64,
    pub sessions: u64,
    pub vcpus: u64,
    pub host_baseline: bool,
    pub privilege: Privilege,
    pub seed: u64,
    pub prefault: bool,
    pub timeout: Duration,
}

/// A cell with what is needed to run it.
#[derive(Debug, Clone)]
pub struct CellSpec {
    pub axes: Axes,
    /// The routine the cell runs (clear_page with a larger -k runs clear_pages).
    pub routine: Routine,
    pub config: LinkConfig,
    pub backing: Backing,
    pub variant: &'static VariantDef,
}

/// Expand the plan into cells; usage errors come back before any VM exists.
pub fn cells(plan: &Plan, caps: &arch::CpuCaps) -> Result<(Vec<CellSpec>, Vec<String>)> {
    let r = plan.routine;
    if plan.size == 0 || !plan.size.is_multiple_of(PAGE_SIZE) {
        return Err(Error::Usage(format!(
            "-s {} is not a whole number of 4KB pages; bench sizes must be (e.g. -s 256MB)",
            plan.size
        )));
    }
    if plan.loops == 0 || plan.repeats == 0 || plan.sessions == 0 {
        return Err(Error::Usage(
            "-l, --repeats and --sessions must be at least 1".into(),
        ));
    }
    let mut out = Vec::new();
    let mut notes = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for &config in &plan.configs {
        let vs = routines::variants(r, config);
        for want in &plan.variants {
            if want != "all"
                && !plan.configs.iter().any(|c| {
                    routines::variants(r, *c)
                        .iter()
                        .any(|v| routines::is_named(v, want))
                })
            {
                return Err(Error::Usage(format!(
                    "unknown variant `{want}` for {r}; choose all or one of: {}",
                    vs.iter().map(|v| v.name).collect::<Vec<_>>().join(", ")
                )));
            }
        }
        for v in vs {
            if !plan
                .variants
                .iter()
                .any(|w| w == "all" || routines::is_named(v, w))
            {
                continue;
            }
            if let Some(f) = v.requires.filter(|f| !caps.has(f)) {
                notes.push(format!(
                    "{r} {} ({config}) skipped: the CPU does not have {f}",
                    v.name
                ));
                continue;
            }
            for &order in &plan.orders {
                for &chunk in &plan.chunks {
                    let chunk = match (order, r.fixed_size()) {
                        (Order::Oneshot, _) => plan.size,
                        (_, Some(f))
                            if r == Routine::CopyPage && chunk != f && chunk != plan.size =>
                        {
                            return Err(Error::Usage(format!(
                                "{r} always copies {} per call: use -k 4KB (or bench memcpy for other chunk sizes)",
                                crate::units::format_size(f)
                            )));
                        }
                        (_, Some(f)) if r == Routine::CopyPage => f,
                        _ => chunk,
                    };
                    // clear_page over a larger extent is the kernel's
                    // clear_pages(addr, npages): run that routine.
                    let routine = if r == Routine::ClearPage && chunk != PAGE_SIZE {
                        if !notes
                            .iter()
                            .any(|n: &String| n.starts_with("clear_page -k"))
                        {
                            notes.push(format!(
                                "clear_page -k {} runs clear_pages(addr, {}) per call (the clear_pages() extent)",
                                crate::units::format_size(chunk),
                                chunk / PAGE_SIZE
                            ));
                        }
                        Routine::ClearPages
                    } else {
                        r
                    };
                    if chunk == 0 || !plan.size.is_multiple_of(chunk) {
                        return Err(Error::Usage(format!(
                            "-s {} is not a multiple of -k {}",
                            crate::units::format_size(plan.size),
                            crate::units::format_size(chunk)
                        )));
                    }
                    if r.page_granular() && !chunk.is_multiple_of(PAGE_SIZE) {
                        return Err(Error::Usage(format!(
                            "{r} works on whole pages: -k {chunk} is not a multiple of 4096"
                        )));
                    }
                    for &fill in &plan.fills {
                        for &backing in &plan.backings {
                            let axes = Axes {
                                routine: routine.name().into(),
                                variant: v.name.into(),
                                config: config.name().into(),
                                chunk,
                                order,
                                fill,
                                backing: backing.to_string(),
                                size: plan.size,
                                loops: plan.loops,
                                vcpus: plan.vcpus,
                            };
                            if seen.insert(axes.clone()) {
                                out.push(CellSpec {
                                    axes,
                                    routine,
                                    config,
                                    backing,
                                    variant: v,
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    if out.is_empty() {
        return Err(Error::Usage(format!(
            "nothing to run for {r} with -f {}",
            plan.variants.join(",")
        )));
    }
    Ok((out, notes))
}

/// Guest RAM needed for one vCPU's region (target, guards, source).
pub fn region_stride(plan: &Plan) -> u64 {
    let copy = plan.routine.kind() == Kind::Copy;
    let one = plan.size + 2 * GUARD.next_multiple_of(PAGE_SIZE) + PAGE_SIZE;
    let one = if copy { 2 * one } else { one };
    one.next_multiple_of(2 << 20)
}

/// Guest RAM the plan needs.
pub fn mem_needed(plan: &Plan) -> u64 {
    (arch::ARENA_BASE - arch::RAM_BASE + plan.vcpus * region_stride(plan))
        .next_multiple_of(arch::RAM_ALIGN)
        .max(arch::MIN_RAM)
}

fn placement(plan: &Plan, vcpu: u64) -> Placement {
    let base = arch::ARENA_BASE + vcpu * region_stride(plan);
    let dst = base + GUARD.next_multiple_of(PAGE_SIZE);
    let src = (plan.routine.kind() == Kind::Copy)
        .then(|| (dst + plan.size + GUARD).next_multiple_of(PAGE_SIZE) + PAGE_SIZE);
    Placement {
        dst,
        len: plan.size,
        src,
    }
}

/// The call for one pass over a region.
fn pass_call(spec: &CellSpec, plan: &Plan, p: &Placement, fill: u8) -> Call {
    let chunk = spec.axes.chunk;
    let count = plan.size / chunk;
    let (dst, src, step) = match spec.axes.order {
        Order::Reverse => (
            p.dst + plan.size - chunk,
            p.src.map(|s| s + plan.size - chunk),
            -(chunk as i64),
        ),
        _ => (p.dst, p.src, chunk as i64),
    };
    Call {
        routine: spec.routine,
        dst,
        src: src.unwrap_or(0),
        fill,
        len: chunk,
        count,
        step,
    }
}

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
    cmds: &[crate::vm::Command],
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
                    .unwrap_or_else(|_| Err(Error::Usage("vCPU thread panicked".into())))
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
fn run_guest_cell(
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
            if let Some(src) = p.src
                && (verify_this || run == 0)
            {
                vm.ram
                    .slice_mut(src, p.len)?
                    .copy_from_slice(&pats.source[..p.len as usize]);
            }
            if verify_this {
                if demand {
                    // Only the guards: the target stays untouched for the
                    // first-touch measurement (see verify_demand_clear).
                    let lo = p.dst - GUARD;
                    verify::fill_pattern(vm.ram.slice_mut(lo, GUARD)?, lo, pats.guard);
                    let hi = p.dst + p.len;
                    verify::fill_pattern(vm.ram.slice_mut(hi, GUARD)?, hi, pats.guard);
                } else {
                    verify::prepare(&vm.ram, p, pats)?;
                }
            }
        }
        let mut ticks = 0u64;
        let mut per_vcpu_ticks = vec![0u64; places.len()];
        let mut stats = BTreeMap::new();
        for _ in 0..plan.loops {
            if demand {
                for p in &places {
                    hostbench::discard(vm.ram.host_addr() + (p.dst - vm.ram.base()), p.len)?;
                }
            }
            let rs = guest_pass(vm, &cmds, timeout)?;
            let t0 = rs.iter().map(|r| r.t0).min().unwrap_or(0);
            let t1 = rs.iter().map(|r| r.t1).max().unwrap_or(0);
            ticks += t1.wrapping_sub(t0);
            for (i, r) in rs.iter().enumerate() {
                per_vcpu_ticks[i] += r.ticks();
                sum_stats(&mut stats, &r.stats);
            }
        }
        if verify_this {
            for p in &places {
                let out = verify::check(&vm.ram, p, kind, pats)?;
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

/// Freshly faulted memory reads as zero, so a demand-mode clear cannot show
/// that it wrote anything: run the same pass once more, unmeasured, over the
/// seeded pattern and verify that.
fn verify_demand_clear(
    vm: &mut Vm,
    cmds: &[crate::vm::Command],
    places: &[Placement],
    plan: &Plan,
    spec: &CellSpec,
    pats: &Patterns,
    timeout: Duration,
) -> Result<()> {
    for p in places {
        verify::prepare(&vm.ram, p, pats)?;
    }
    guest_pass(vm, cmds, timeout)?;
    for p in places {
        let out = verify::check(&vm.ram, p, plan.routine.kind(), pats)?;
        if !out.passed() {
            return Err(verification_error(spec, &out));
        }
    }
    Ok(())
}

fn verification_error(spec: &CellSpec, out: &verify::Outcome) -> Error {
    Error::Guest(Box::new(crate::vm::GuestFailure {
        kind: crate::vm::FailureKind::Protocol,
        vcpu: 0,
        detail: format!(
            "{}: the measured region is wrong ({}: {} bad bytes, first at offset {}); no number is reported for a wrong routine",
            spec.axes.label(),
            out.breakdown.label(),
            out.bad_bytes,
            out.first_bad.unwrap_or(0)
        ),
        pc: None,
        pc_symbol: None,
        registers: None,
        vector: None,
    }))
}

/// The same cell natively on the host, with the same routine object.
fn run_host_cell(
    spec: &CellSpec,
    plan: &Plan,
    pats: &Patterns,
    session: u64,
    tsc_khz: u64,
) -> Result<Vec<Sample>> {
    let alias = host_alias(spec);
    let Some(f) = hostbench::routine(&alias) else {
        return Ok(vec![]);
    };
    let stride = region_stride(plan);
    let buf = HostBuffer::new(stride * plan.vcpus, spec.backing)?;
    let copy = plan.routine.kind() == Kind::Copy;
    let mut samples = Vec::new();
    let total_runs = plan.warmup + plan.repeats;
    let regions: Vec<(u64, u64)> = (0..plan.vcpus)
        .map(|v| {
            let dst = buf.addr() + v * stride + PAGE_SIZE;
            (
                dst,
                dst + (plan.size + PAGE_SIZE).next_multiple_of(PAGE_SIZE),
            )
        })
        .collect();
    if copy {
        for (_, src) in &regions {
            // SAFETY: inside buf.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    pats.source.as_ptr(),
                    *src as *mut u8,
                    plan.size as usize,
                )
            };
        }
    }
    for run in 0..total_runs {
        let mut ns = 0f64;
        let mut per = vec![0f64; regions.len()];
        for _ in 0..plan.loops {
            if spec.axes.fill == Fill::Demand {
                for (dst, _) in &regions {
                    hostbench::discard(*dst, plan.size)?;
                }
            }
            let barrier = Barrier::new(regions.len());
            let times: Vec<(Instant, Instant)> = std::thread::scope(|s| {
                let hs: Vec<_> = regions
                    .iter()
                    .map(|(dst, src)| {
                        let b = &barrier;
                        let p = Placement {
                            dst: *dst,
                            len: plan.size,
                            src: copy.then_some(*src),
                        };
                        let call = pass_call(spec, plan, &p, pats.fill);
                        let (a0, a1, a2) = host_args(&call, spec);
                        s.spawn(move || {
                            b.wait();
                            let t0 = Instant::now();
                            let (mut x0, mut x1) = (a0, a1);
                            for _ in 0..call.count {
                                // SAFETY: the arguments stay inside `buf`,
                                // exactly as the guest's stay inside its region.
                                unsafe { f(x0, x1, a2) };
                                x0 = x0.wrapping_add(call.step as u64);
                                if copy {
                                    x1 = x1.wrapping_add(call.step as u64);
                                }
                            }
                            (t0, Instant::now())
                        })
                    })
                    .collect();
                hs.into_iter()
                    .map(|h| h.join().unwrap_or((Instant::now(), Instant::now())))
                    .collect()
            });
            let start = times.iter().map(|t| t.0).min();
            let end = times.iter().map(|t| t.1).max();
            if let (Some(a), Some(b)) = (start, end) {
                ns += (b - a).as_nanos() as f64;
            }
            for (i, (a, b)) in times.iter().enumerate() {
                per[i] += (*b - *a).as_nanos() as f64;
            }
        }
        if run < plan.warmup {
            continue;
        }
        let bytes = plan.size * plan.loops * plan.vcpus;
        let bps = bytes as f64 * 1e9 / ns.max(1.0);
        samples.push(Sample {
            session,
            run: run - plan.warmup,
            bytes,
            ns,
            bytes_per_sec: bps,
            ticks_per_byte: ns * tsc_khz as f64 / 1e6 / bytes as f64,
            verified: false,
            disturbed: false,
            per_vcpu_bytes_per_sec: if regions.len() > 1 {
                per.iter()
                    .map(|n| (plan.size * plan.loops) as f64 * 1e9 / n.max(1.0))
                    .collect()
            } else {
                vec![]
            },
            kvm_stats: BTreeMap::new(),
        });
    }
    Ok(samples)
}

/// Alias name whose host copy implements the cell.
fn host_alias(spec: &CellSpec) -> String {
    let v = spec.variant.name.replace('-', "_");
    match (spec.routine, spec.config) {
        (Routine::ClearPage | Routine::ClearPages, LinkConfig::Memset) => format!("memset_{v}"),
        (r, _) => format!("{}_{v}", r.name()),
    }
}

/// The dispatcher's (a0, a1, a2) for a host call, as `routines::command` builds them.
fn host_args(call: &Call, spec: &CellSpec) -> (u64, u64, u64) {
    match (spec.routine, spec.config) {
        (Routine::ClearPage, LinkConfig::Vanilla) => (call.dst, 0, 0),
        (Routine::ClearPages, LinkConfig::Vanilla) => (call.dst, call.len / PAGE_SIZE, 0),
        (Routine::ClearPage | Routine::ClearPages, LinkConfig::Memset) => (call.dst, 0, call.len),
        (Routine::Memset, _) => (call.dst, u64::from(call.fill), call.len),
        (Routine::Memcpy, _) => (call.dst, call.src, call.len),
        (Routine::CopyPage, _) => (call.dst, call.src, 0),
    }
}

/// Summaries over the undisturbed samples (all of them if every run was disturbed).
pub fn summarize(cell: &mut Cell) {
    let clean: Vec<&Sample> = cell.guest.iter().filter(|s| !s.disturbed).collect();
    let use_: Vec<&Sample> = if clean.is_empty() {
        cell.guest.iter().collect()
    } else {
        clean
    };
    cell.guest_bytes_per_sec =
        Summary::of(&use_.iter().map(|s| s.bytes_per_sec).collect::<Vec<_>>());
    cell.guest_ticks_per_byte =
        Summary::of(&use_.iter().map(|s| s.ticks_per_byte).collect::<Vec<_>>());
    cell.host_bytes_per_sec = Summary::of(
        &cell
            .host
            .iter()
            .map(|s| s.bytes_per_sec)
            .collect::<Vec<_>>(),
    );
    cell.disturbed_runs = cell.guest.iter().filter(|s| s.disturbed).count() as u64;
    cell.verified_runs = cell.guest.iter().filter(|s| s.verified).count() as u64;
    cell.guest_host_ratio = match (&cell.guest_bytes_per_sec, &cell.host_bytes_per_sec) {
        (Some(g), Some(h)) if h.median > 0.0 => Some(g.median / h.median),
        _ => None,
    };
}

/// Run the whole plan.
pub fn run(
    plan: &Plan,
    specs: &[CellSpec],
    host: crate::host::HostInfo,
    privilege_name: &str,
    progress: &indicatif::ProgressBar,
) -> Result<BenchResult> {
    let pats = Patterns::new(
        plan.seed,
        if plan.routine.kind() == Kind::Copy {
            plan.size as usize
        } else {
            0
        },
    );
    let mut cells: Vec<Cell> = specs
        .iter()
        .map(|s| Cell::new(s.axes.clone(), vec![], vec![]))
        .collect();
    let mut counter_khz = host.counter_khz;
    for session in 0..plan.sessions {
        for &backing in &plan.backings {
            for &config in &plan.configs {
                let idx: Vec<usize> = (0..specs.len())
                    .filter(|&i| specs[i].backing == backing && specs[i].config == config)
                    .collect();
                if idx.is_empty() {
                    continue;
                }
                let opts = VmOptions {
                    mem: mem_needed(plan),
                    backing,
                    prefault: plan.prefault,
                    privilege: plan.privilege,
                    config,
                    vcpus: plan.vcpus,
                    seed: plan.seed.wrapping_add(session),
                };
                let mut vm = Vm::new(crate::vm::open_kvm()?, &opts)?;
                counter_khz = vm.counter_khz;
                for i in idx {
                    let g = run_guest_cell(&mut vm, &specs[i], plan, &pats, session)?;
                    cells[i].guest.extend(g);
                    if plan.host_baseline {
                        let h = run_host_cell(&specs[i], plan, &pats, session, vm.counter_khz)?;
                        cells[i].host.extend(h);
                    }
                    progress.inc(1);
                }
            }
        }
    }
    for c in &mut cells {
        summarize(c);
    }
    let mut host = host;
    host.counter_khz = counter_khz;
    Ok(BenchResult {
        tool: "hypclear".into(),
        command: "bench".into(),
        host,
        privilege: privilege_name.into(),
        warmup: plan.warmup,
        repeats: plan.repeats,
        sessions: plan.sessions,
        cells,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        Plan {
            routine: Routine::ClearPages,
            size: 16 << 20,
            chunks: vec![4096, 2 << 20],
            variants: vec!["all".into()],
            loops: 1,
            orders: vec![Order::Forward, Order::Reverse],
            fills: vec![Fill::Populate],
            backings: vec![Backing::Anon],
            configs: vec![LinkConfig::Vanilla],
            warmup: 1,
            repeats: 3,
            sessions: 4,
            vcpus: 1,
            host_baseline: true,
            privilege: Privilege::User,
            seed: 1,
            prefault: false,
            timeout: Duration::from_secs(5),
        }
    }

    fn caps() -> arch::CpuCaps {
        arch::CpuCaps {
            model: "test".into(),
            ..Default::default()
        }
    }

    #[test]
    fn cells_cross_all_axes() {
        let p = plan();
        let (c, _) = cells(&p, &caps()).unwrap();
        let n = routines::variants(Routine::ClearPages, LinkConfig::Vanilla)
            .iter()
            .filter(|v| v.requires.is_none())
            .count();
        assert_eq!(c.len(), n * 2 * 2);
    }

    #[test]
    fn reverse_order_starts_at_the_last_chunk() {
        let p = plan();
        let (c, _) = cells(&p, &caps()).unwrap();
        let rev = c
            .iter()
            .find(|c| c.axes.order == Order::Reverse && c.axes.chunk == 4096)
            .unwrap();
        let pl = placement(&p, 0);
        let call = pass_call(rev, &p, &pl, 0);
        assert_eq!(call.dst, pl.dst + p.size - 4096);
        assert_eq!(call.step, -4096);
        assert_eq!(call.count, p.size / 4096);
    }

    #[test]
    fn bad_plans_are_usage_errors() {
        let mut p = plan();
        p.size = 4097;
        assert!(matches!(cells(&p, &caps()), Err(Error::Usage(_))));
        let mut p = plan();
        p.chunks = vec![3 << 20];
        assert!(matches!(cells(&p, &caps()), Err(Error::Usage(_))));
        let mut p = plan();
        p.routine = Routine::CopyPage;
        p.chunks = vec![8192];
        assert!(matches!(cells(&p, &caps()), Err(Error::Usage(_))));
        let mut p = plan();
        p.variants = vec!["nope".into()];
        assert!(matches!(cells(&p, &caps()), Err(Error::Usage(_))));
    }

    #[test]
    fn clear_page_extents_run_clear_pages() {
        let mut p = plan();
        p.routine = Routine::ClearPage;
        p.chunks = vec![4096, 2 << 20];
        p.orders = vec![Order::Forward];
        let (c, notes) = cells(&p, &caps()).unwrap();
        assert!(
            c.iter()
                .any(|c| c.routine == Routine::ClearPage && c.axes.chunk == 4096)
        );
        assert!(
            c.iter()
                .any(|c| c.routine == Routine::ClearPages && c.axes.chunk == 2 << 20)
        );
        assert!(
            notes.iter().any(|n| n.contains("clear_pages(addr, 512)")),
            "{notes:?}"
        );
    }

    #[test]
    fn disturbed_means_emulation_beyond_the_doorbell() {
        let mut s = BTreeMap::new();
        s.insert("insn_emulation".to_string(), 2);
        assert!(!disturbed(&s, 1));
        s.insert("insn_emulation".to_string(), 500);
        assert!(disturbed(&s, 1));
    }

    #[test]
    fn memory_covers_all_vcpu_regions() {
        let mut p = plan();
        p.vcpus = 2;
        let last = placement(&p, 1);
        assert!(last.dst + last.len + GUARD <= arch::RAM_BASE + mem_needed(&p));
    }
}
