//! `hypclear verify`: the verification suite, filtered by routine, variant
//! and size.
use super::{Ctx, progress};
use crate::arch;
use crate::blob::abi::PAGE_SIZE;
use crate::blob::{LinkConfig, Side};
use crate::check::checker::Patterns;
use crate::check::suite::{self, CheckRecord, Filter, Verdict};
use crate::cli::{Common, Format, VerifyArgs};
use crate::error::{EXIT_FAILED, Error, Result};
use crate::report;
use crate::routines::{self, Routine};
use crate::units::format_size;
use crate::vmm::host::HostInfo;
use crate::vmm::{self, GuestFailure, Vm};
use serde_json::json;
use std::io::Write;
use std::time::{Duration, Instant};

fn arena(mem: u64) -> u64 {
    (arch::RAM_BASE + mem).saturating_sub(arch::ARENA_BASE)
}

/// Usage errors in the variant filter, found before any VM is created.
fn check_variants(configs: &[Side], f: &Filter) -> Result<()> {
    let selected = |r: &Routine| f.routines.is_empty() || f.routines.contains(r);
    for v in &f.variants {
        let known = configs.iter().any(|c| {
            Routine::ALL.iter().filter(|r| selected(r)).any(|r| {
                routines::variants(*r, c)
                    .iter()
                    .any(|x| routines::is_named(x, v))
            })
        });
        if !known {
            let mut names: Vec<&str> = configs
                .iter()
                .flat_map(|c| {
                    Routine::ALL
                        .iter()
                        .flat_map(move |r| routines::variants(*r, c))
                })
                .map(|x| x.name)
                .collect();
            names.sort();
            names.dedup();
            return Err(Error::Usage(format!(
                "unknown variant `{v}` for the selected routines; known variants: {}",
                names.join(", ")
            )));
        }
    }
    Ok(())
}

/// Usage errors in verify's filters, found before any VM is created.
fn check_filter(ctx: &Ctx, configs: &[Side], f: &Filter) -> Result<()> {
    check_variants(configs, f)?;
    for &size in &f.sizes {
        for r in Routine::ALL {
            if !(f.routines.is_empty() || f.routines.contains(&r)) {
                continue;
            }
            if r.page_granular() && (size == 0 || size % PAGE_SIZE != 0) {
                return Err(Error::Usage(format!(
                    "{r} works on whole pages: --size {size} is not a multiple of 4096 \
                     (try {} or pick --routine memset/memcpy)",
                    format_size(size.div_ceil(4096).max(1) * 4096)
                )));
            }
        }
    }
    // Only explicit sizes make a too small --mem an error (built-in sizes
    // that do not fit are skipped with the reason); planning costs
    // milliseconds, so it is skipped otherwise.
    if f.sizes.is_empty() {
        return Ok(());
    }
    for c in configs {
        let (specs, _) = suite::plan(c, &ctx.caps, f, u64::MAX);
        let need = specs.iter().map(suite::footprint).max().unwrap_or(0);
        if need > arena(ctx.mem) {
            let mem = (arch::ARENA_BASE - arch::RAM_BASE + need).next_multiple_of(arch::RAM_ALIGN);
            return Err(Error::Usage(format!(
                "--mem {} is too small for the requested sizes: they need {} of arena; use --mem {} or more",
                format_size(ctx.mem),
                format_size(need),
                format_size(mem)
            )));
        }
    }
    Ok(())
}

/// What the suite produced over all link configurations.
#[derive(Default)]
struct Outcome {
    records: Vec<CheckRecord>,
    failure: Option<GuestFailure>,
    loads: serde_json::Map<String, serde_json::Value>,
    first_hypercall: Option<Duration>,
    checked_bytes: u64,
    check_time: Duration,
    counter_khz: u64,
    /// SIGINT stopped the run: what is here is partial.
    interrupted: bool,
}

impl Outcome {
    fn count(&self, v: Verdict) -> usize {
        self.records.iter().filter(|r| r.verdict == v).count()
    }
}

/// What one link configuration's VM produced.
struct ConfigRun {
    config: LinkConfig,
    banner: String,
    load: u64,
    counter_khz: u64,
    first_hypercall: Duration,
    run: suite::SuiteRun,
    skipped: Vec<CheckRecord>,
}

/// The suite of one link configuration in its own VM, stopping at the
/// first guest failure.
fn run_config(
    ctx: &Ctx,
    side: &Side,
    filter: &Filter,
    pats: &Patterns,
    bars: &indicatif::MultiProgress,
) -> Result<ConfigRun> {
    let config = side.config();
    let opts = ctx.vm_options(side);
    let mut vm = Vm::new(vmm::open_kvm()?, &opts)?;
    vm.vcpu(0)?.start(ctx.timeout)?;
    let first_hypercall = ctx.start.elapsed();
    let (specs, skipped) = suite::plan(side, &ctx.caps, filter, arena(opts.mem));
    let banner = format!(
        "{config:>7} blob: {} aliases, {} relocations, loaded at {:#x} (seed {}), {} {} guest RAM, {} {} kHz",
        vm.blob.aliases.len(),
        vm.blob.relocs.len(),
        vm.loaded.base,
        ctx.seed,
        format_size(opts.mem),
        opts.backing,
        arch::COUNTER_NAME,
        vm.counter_khz
    );
    let pb = bars.add(progress(specs.len() as u64));
    pb.set_prefix(config.name());
    let run = suite::run(&mut vm, &specs, pats, ctx.timeout, ctx.common.check, &pb)?;
    pb.finish_and_clear();
    if run.failure.is_none() && !run.interrupted {
        vm.vcpu(0)?.exit(ctx.timeout)?;
    }
    Ok(ConfigRun {
        config,
        banner,
        load: vm.loaded.base,
        counter_khz: vm.counter_khz,
        first_hypercall,
        run,
        skipped,
    })
}

/// Whether the configurations' VMs may run side by side: a second core,
/// and guest RAM for all of them within half the host memory this process
/// may use (`host_available`: MemAvailable, cgroup limits; hugetlb pages
/// are reserved per VM, so that backing stays one at a time).
fn concurrent(ctx: &Ctx, configs: &[Side]) -> bool {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let available = crate::vmm::memory::host_available().map_or(0, |(bytes, _)| bytes);
    let need = ctx.mem.saturating_mul(configs.len() as u64);
    configs.len() > 1
        && cores > 1
        && ctx.common.backing != crate::vmm::memory::Backing::Hugetlb
        && need <= available / 2
}

/// One VM per configuration: side by side on scoped threads when
/// [`concurrent`] allows, else one after the other, stopping at the first
/// guest failure.
fn run_configs(
    ctx: &Ctx,
    configs: &[Side],
    side_by_side: bool,
    filter: &Filter,
    pats: &Patterns,
    bars: &indicatif::MultiProgress,
) -> Vec<Result<ConfigRun>> {
    if side_by_side {
        return std::thread::scope(|s| {
            let handles: Vec<_> = configs
                .iter()
                .map(|c| s.spawn(|| run_config(ctx, c, filter, pats, bars)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::Internal(
                            "a verification thread panicked; please report this as a hypclear bug"
                                .into(),
                        ))
                    })
                })
                .collect()
        });
    }
    let mut runs = Vec::new();
    for c in configs {
        let r = run_config(ctx, c, filter, pats, bars);
        let stop = r
            .as_ref()
            .map_or(true, |r| r.run.failure.is_some() || r.run.interrupted);
        runs.push(r);
        if stop {
            break;
        }
    }
    runs
}

/// Run the filtered suite in one VM per configuration. The configurations
/// run side by side on their own threads where the machine allows (see
/// [`concurrent`]): the host's fills and checks of one overlap the other's
/// guest work. Results are reported in configuration order either way.
fn run_suite(ctx: &Ctx, configs: &[Side], side_by_side: bool, filter: &Filter) -> Result<Outcome> {
    let (_, pattern) = sizes(filter);
    // The copy source (tens of MB) is made when the first copy needs it.
    let pats = Patterns::new(ctx.seed, pattern as usize);
    let bars = super::progress_group();
    let runs = run_configs(ctx, configs, side_by_side, filter, &pats, &bars);
    let mut o = Outcome::default();
    for r in runs {
        let r = match r {
            // Ctrl-C while this configuration's VM booted: nothing of it
            // to report, but the others' results (and the table) stand.
            Err(Error::Interrupted) => {
                o.interrupted = true;
                continue;
            }
            r => r?,
        };
        ctx.say(&r.banner);
        o.counter_khz = r.counter_khz;
        o.first_hypercall = Some(
            o.first_hypercall
                .map_or(r.first_hypercall, |f| f.min(r.first_hypercall)),
        );
        o.loads.insert(r.config.name().into(), json!(r.load));
        o.records.extend(r.skipped);
        o.records.extend(r.run.records);
        o.checked_bytes += r.run.checked_bytes;
        o.check_time += r.run.check_time;
        if o.failure.is_none() {
            o.failure = r.run.failure;
        }
        o.interrupted |= r.run.interrupted;
    }
    Ok(o)
}

/// The largest check and the copy source pattern (host) the suite needs.
fn sizes(filter: &Filter) -> (u64, u64) {
    let largest = suite::LARGE_SIZES
        .iter()
        .chain(filter.sizes.iter())
        .copied()
        .max()
        .unwrap_or(0);
    let copies = filter.routines.is_empty()
        || filter
            .routines
            .iter()
            .any(|r| r.kind() == crate::routines::Kind::Copy);
    let pattern = if copies {
        largest.max(4 << 20)
    } else {
        4 << 20
    };
    (largest, pattern)
}

/// Check, before any VM, that the host can hold what the run touches: the
/// largest target and its copy source in guest RAM, plus the host pattern
/// (per link configuration: they may run side by side).
fn check_memory(ctx: &Ctx, configs: &[Side], side_by_side: bool, filter: &Filter) -> Result<()> {
    let (largest, pattern) = sizes(filter);
    let guest = (arch::ARENA_BASE - arch::RAM_BASE + 2 * largest + (4 << 20)).min(ctx.mem);
    let vms = if side_by_side {
        configs.len() as u64
    } else {
        1
    };
    if ctx.common.backing != crate::vmm::memory::Backing::Hugetlb {
        crate::vmm::memory::check_host_memory(
            guest * vms + pattern,
            "verify (guest RAM it touches plus the copy pattern)",
        )?;
    }
    Ok(())
}

pub fn verify(
    common: &Common,
    args: &VerifyArgs,
    start: Instant,
    command: &str,
    sides: Vec<Side>,
) -> Result<i32> {
    // From the start: a Ctrl-C while the CPU is probed or a VM boots is a
    // request to stop too, never a silent kill.
    crate::vmm::interrupt::install()?;
    // The cgroup walk behind the memory checks (a few hundred µs) runs
    // while the options and the CPU are resolved.
    std::thread::spawn(|| {
        let _ = crate::vmm::memory::host_available();
    });
    let ctx = Ctx::resolve(common, start, common.mem(), sides)?;
    let configs = ctx.sides.clone();
    let filter = Filter {
        routines: args.routine.clone(),
        variants: args.variant.clone(),
        sizes: args.size.clone(),
    };
    check_filter(&ctx, &configs, &filter)?;
    // Decided once: the memory check and the run must agree on it.
    let side_by_side = concurrent(&ctx, &configs);
    check_memory(&ctx, &configs, side_by_side, &filter)?;
    let p = &ctx.privilege;
    ctx.say(format_args!(
        "hypclear {}: {} {}, KVM {}, guest at {} ({})",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::ARCH,
        ctx.caps.model,
        arch::kvm_flavour(),
        p.name,
        p.reason
    ));
    for line in super::kernel::summary_lines(&ctx.sides) {
        ctx.say(line);
    }
    let o = run_suite(&ctx, &configs, side_by_side, &filter)?;
    report_outcome(&ctx, &configs, &o, command)
}

/// Print the table (or KTAP), the summary line and the failure, write the
/// JSON report; the exit status of the run.
fn report_outcome(ctx: &Ctx, configs: &[Side], o: &Outcome, command: &str) -> Result<i32> {
    if ctx.common.format == Format::Ktap {
        let doc = report::checks_ktap(&o.records, o.failure.as_ref());
        report::print_bytes(doc.render().as_bytes());
    } else {
        // The built-ins' "kernel default" marks name built-in variants; a
        // kernel blob's header already says which path each routine takes.
        let caps = match ctx.has_kernel_side() {
            true => arch::CpuCaps {
                defaults: Vec::new(),
                ..ctx.caps.clone()
            },
            false => ctx.caps.clone(),
        };
        ctx.say(report::checks_table(&o.records, o.counter_khz, &caps));
    }
    let (passed, failed, skipped) = (
        o.count(Verdict::Pass),
        o.count(Verdict::Fail),
        o.count(Verdict::Skipped),
    );
    let elapsed = ctx.start.elapsed();
    let checker_gbps = o.checked_bytes as f64 / o.check_time.as_secs_f64().max(1e-9) / 1e9;
    if let Some(f) = &o.failure {
        let _ = writeln!(std::io::stderr(), "{f}");
    }
    let ok = failed == 0 && o.failure.is_none() && !o.interrupted;
    let first_ms = o.first_hypercall.unwrap_or_default().as_secs_f64() * 1e3;
    ctx.say(format_args!(
        "hypclear {command}: {} — {passed} passed, {failed} failed, {skipped} skipped ({}) in {:.2} s; \
         first hypercall after {:.1} ms; checker {:.1} GB/s",
        if o.interrupted {
            "PARTIAL (interrupted)"
        } else if ok {
            "PASS"
        } else {
            "FAIL"
        },
        configs
            .iter()
            .map(|c| c.config().name())
            .collect::<Vec<_>>()
            .join(", "),
        elapsed.as_secs_f64(),
        first_ms,
        checker_gbps
    ));
    if let Some(path) = &ctx.common.json {
        let summary = json!({
            "passed": passed,
            "failed": failed,
            "skipped": skipped,
            "elapsed_s": elapsed.as_secs_f64(),
            "first_hypercall_ms": first_ms,
            "checker_gb_per_s": checker_gbps,
            "checked_bytes": o.checked_bytes,
        });
        report::write_json(path, &json_doc(ctx, command, configs, o, summary))?;
    }
    if o.interrupted {
        let _ = writeln!(
            std::io::stderr(),
            "hypclear {command}: interrupted (SIGINT); the results above are partial"
        );
        return Ok(crate::error::EXIT_INTERRUPTED);
    }
    Ok(if ok { 0 } else { EXIT_FAILED })
}

/// The JSON report of run/verify (serialized straight into the file; the
/// records are borrowed, not copied into a `Value`).
#[derive(serde::Serialize)]
struct JsonDoc<'a> {
    tool: &'static str,
    command: &'a str,
    host: HostInfo,
    cpu: &'a arch::CpuCaps,
    guest: serde_json::Value,
    partial: bool,
    kernel: Option<&'a serde_json::Value>,
    /// Per family, the built-in variant that follows the kernel blob's
    /// path with the same alternatives decision (the differential check).
    kernel_paths: Option<serde_json::Value>,
    checks: &'a [CheckRecord],
    failure: &'a Option<GuestFailure>,
    summary: serde_json::Value,
}

fn json_doc<'a>(
    ctx: &'a Ctx,
    command: &'a str,
    configs: &[Side],
    o: &'a Outcome,
    summary: serde_json::Value,
) -> JsonDoc<'a> {
    let first_load = configs
        .first()
        .and_then(|c| o.loads.get(c.config().name()))
        .cloned()
        .unwrap_or(serde_json::Value::Null);
    JsonDoc {
        tool: "hypclear",
        command,
        host: HostInfo::collect(&ctx.caps, o.counter_khz),
        cpu: &ctx.caps,
        guest: json!({
            "load_address": first_load,
            "load_addresses": o.loads,
            "privilege": ctx.privilege,
            "mem": ctx.mem,
            "backing": ctx.common.backing,
            "prefault": ctx.common.prefault,
            "seed": ctx.seed,
        }),
        partial: o.interrupted,
        kernel: ctx.sides.iter().find_map(Side::external).map(|e| &e.report),
        kernel_paths: ctx
            .sides
            .iter()
            .find(|s| !s.is_builtin())
            .map(|s| json!(crate::bench::SideInfo::of(s, &ctx.caps).kernel_paths)),
        checks: &o.records,
        failure: &o.failure,
        summary,
    }
}
