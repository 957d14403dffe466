//! The subcommands: run, verify, selftest, info.
use crate::arch;
use crate::blob::{Blob, LinkConfig};
use crate::cli::{Cli, Cmd, Common, VerifyArgs};
use crate::error::{EXIT_FAILED, Error, Result};
use crate::host::HostInfo;
use crate::privilege::{self, PrivilegeChoice};
use crate::report;
use crate::routines::{self, Routine};
use crate::suite::{self, CheckRecord, Filter, Verdict};
use crate::verify::Patterns;
use crate::vm::{self, GuestFailure, Vm, VmOptions};
use serde_json::json;
use std::time::{Duration, Instant};

/// Everything decided before the first VM is created.
pub struct Ctx {
    pub start: Instant,
    pub common: Common,
    pub seed: u64,
    pub caps: arch::CpuCaps,
    pub timeout: Duration,
}

impl Ctx {
    pub fn vm_options(&self, config: LinkConfig, p: &PrivilegeChoice) -> VmOptions {
        VmOptions {
            mem: self.common.mem(),
            backing: self.common.backing,
            prefault: self.common.prefault,
            privilege: p.privilege,
            config,
            vcpus: 1,
            seed: self.seed,
        }
    }
}

/// The privilege request, with `--no-dc-zva` folded in.
fn cpl_choice(common: &Common) -> Result<privilege::CplChoice> {
    if !common.no_dc_zva {
        return Ok(common.cpl);
    }
    if !cfg!(target_arch = "aarch64") {
        return Err(Error::Usage(
            "--no-dc-zva is an arm64 option (DC ZVA does not exist on x86_64)".into(),
        ));
    }
    if common.cpl == privilege::CplChoice::Kernel {
        return Err(Error::Usage(
            "--no-dc-zva runs the guest at EL0 (SCTLR_EL1.DZE clear); it cannot be combined with --cpl 0"
                .into(),
        ));
    }
    Ok(privilege::CplChoice::User)
}

/// Validate options and the environment; nothing here creates a VM.
pub fn prepare(common: &Common, start: Instant) -> Result<Ctx> {
    if !(common.timeout.is_finite() && common.timeout > 0.0) {
        return Err(Error::Usage(format!(
            "--timeout {} is not a positive number of seconds",
            common.timeout
        )));
    }
    cpl_choice(common)?;
    let seed = common.seed.unwrap_or_else(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        t ^ u64::from(std::process::id()).rotate_left(32)
    });
    let probe = VmOptions {
        mem: common.mem(),
        backing: common.backing,
        prefault: common.prefault,
        privilege: vm::Privilege::User,
        config: LinkConfig::Vanilla,
        vcpus: 1,
        seed,
    };
    vm::validate(&probe)?;
    crate::memory::precheck(common.mem(), common.backing)?;
    let kvm = vm::open_kvm()?;
    let caps = arch::cpu_caps(&kvm);
    Ok(Ctx {
        start,
        common: common.clone(),
        seed,
        caps,
        timeout: Duration::from_secs_f64(common.timeout),
    })
}

/// Dispatch a parsed command line; returns the process exit status.
pub fn main(cli: Cli, start: Instant) -> Result<i32> {
    match cli.command.unwrap_or(Cmd::Run) {
        Cmd::Compare(a) => compare(&a),
        Cmd::Bench(a) => bench(&cli.common, &a, start),
        Cmd::Run => verify(&prepare(&cli.common, start)?, &VerifyArgs::default(), "run"),
        Cmd::Verify(a) => verify(&prepare(&cli.common, start)?, &a, "verify"),
        Cmd::Selftest => selftest(&prepare(&cli.common, start)?),
        Cmd::Info => info(&prepare(&cli.common, start)?),
    }
}

fn compare(a: &crate::cli::CompareArgs) -> Result<i32> {
    let mut files = Vec::new();
    for p in std::iter::once(&a.base).chain(a.new.iter()) {
        files.push((p.clone(), crate::compare::load(p)?));
    }
    let format = match a.format {
        crate::cli::CompareFormat::Text => crate::compare::Format::Text,
        crate::cli::CompareFormat::Markdown => crate::compare::Format::Markdown,
    };
    print!(
        "{}",
        crate::compare::compare(&files, a.alpha, a.allow_different_hosts, format)?
    );
    Ok(0)
}

fn bench(common: &Common, a: &crate::cli::BenchArgs, start: Instant) -> Result<i32> {
    use crate::bench::{self, Plan};
    if a.vcpus == 0 || a.vcpus > crate::abi::MAX_VCPUS {
        return Err(Error::Usage(format!(
            "--vcpus {} is out of range: use 1 to {}",
            a.vcpus,
            crate::abi::MAX_VCPUS
        )));
    }
    let chunks = if !a.chunk.is_empty() {
        a.chunk.clone()
    } else {
        vec![a.routine.fixed_size().unwrap_or(a.size)]
    };
    let backings = if a.backings.is_empty() {
        vec![common.backing]
    } else {
        a.backings.clone()
    };
    let mut plan = Plan {
        routine: a.routine,
        size: a.size,
        chunks,
        variants: a.function.clone(),
        loops: a.loops,
        orders: a.order.clone(),
        fills: a.fill.clone(),
        backings: backings.clone(),
        configs: common.config.configs(),
        warmup: a.warmup,
        repeats: a.repeats,
        sessions: a.sessions,
        vcpus: a.vcpus,
        host_baseline: !a.no_host,
        privilege: vm::Privilege::User,
        seed: 0,
        prefault: common.prefault,
        timeout: Duration::from_secs_f64(common.timeout.max(0.001)),
    };
    // Usage errors first, before touching KVM (CPU features come later).
    let no_caps = arch::CpuCaps::default();
    bench::cells(&plan, &no_caps)?;
    let need = bench::mem_needed(&plan);
    if let Some(m) = common.mem
        && m < need
    {
        return Err(Error::Usage(format!(
            "--mem {} is too small for -s {} x {} vCPU(s): use --mem {} or more (or leave --mem out)",
            crate::units::format_size(m),
            crate::units::format_size(a.size),
            a.vcpus,
            crate::units::format_size(need)
        )));
    }
    let mut c = common.clone();
    c.mem = Some(common.mem.unwrap_or(need).max(need));
    for b in &backings {
        // Guest RAM and the host baseline buffer both come from the pool.
        crate::memory::precheck(c.mem() + need, *b)?;
    }
    let ctx = prepare(&c, start)?;
    plan.seed = ctx.seed;
    let (specs, notes) = bench::cells(&plan, &ctx.caps)?;
    let p = privilege::choose(cpl_choice(&ctx.common)?)?;
    plan.privilege = p.privilege;
    println!(
        "hypclear bench {} on {}: {} cell(s) x {} session(s) x ({} warm-up + {} measured), guest at {} ({})",
        a.routine,
        ctx.caps.model,
        specs.len(),
        plan.sessions,
        plan.warmup,
        plan.repeats,
        p.name,
        p.reason
    );
    for n in &notes {
        println!("note: {n}");
    }
    if let Some(v) = routines::kernel_default(
        a.routine,
        LinkConfig::Vanilla,
        &ctx.caps,
        arch::DEFAULT_KERNEL,
    ) {
        println!(
            "note: kernel {} would run {} {} on this CPU (6.1: {})",
            arch::DEFAULT_KERNEL,
            a.routine,
            v.name,
            routines::kernel_default(a.routine, LinkConfig::Vanilla, &ctx.caps, "6.1")
                .map_or("-", |v| v.name)
        );
    }
    let pb = progress(specs.len() as u64 * plan.sessions);
    pb.set_prefix("bench");
    let host = HostInfo::collect(&ctx.caps, 0);
    let result = bench::run(&plan, &specs, host, p.name, &pb)?;
    pb.finish_and_clear();
    println!("{}", crate::bench_report::cells_table(&result));
    println!(
        "bytes/sec from guest {} ticks at {} kHz; guest/host = median guest GB/s / median host GB/s \
         of the same object on a host buffer, measured in the same process; {:.1} seconds",
        arch::COUNTER_NAME,
        result.host.counter_khz,
        ctx.start.elapsed().as_secs_f64()
    );
    if let Some(path) = &ctx.common.json {
        let v = serde_json::to_value(&result).map_err(|e| Error::Io {
            path: path.display().to_string(),
            source: std::io::Error::other(e),
        })?;
        report::write_json(path, &v)?;
    }
    if let Some(path) = &a.csv {
        crate::bench_report::write_csv(&result, path)?;
    }
    if let Some(path) = &a.plot {
        crate::bench_report::write_plot(&result, path)?;
    }
    Ok(0)
}

/// A progress bar on stderr, only on a terminal (not for `TERM=dumb` or
/// `HYPCLEAR_PROGRESS=0`, e.g. a serial console that is logged).
fn progress(len: u64) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    let off = std::env::var("HYPCLEAR_PROGRESS").is_ok_and(|v| v == "0")
        || std::env::var("TERM").is_ok_and(|t| t == "dumb");
    if off || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::new(len);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{prefix} [{bar:40}] {pos}/{len} checks {elapsed}")
    {
        pb.set_style(style.progress_chars("=> "));
    }
    pb
}

fn arena(mem: u64) -> u64 {
    (arch::RAM_BASE + mem).saturating_sub(arch::ARENA_BASE)
}

/// Usage errors in verify's filters, found before any VM is created.
fn check_filter(ctx: &Ctx, configs: &[LinkConfig], f: &Filter) -> Result<()> {
    for v in &f.variants {
        let known = configs.iter().any(|c| {
            Routine::ALL
                .iter()
                .filter(|r| f.routines.is_empty() || f.routines.contains(r))
                .any(|r| {
                    routines::variants(*r, *c)
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
                        .flat_map(move |r| routines::variants(*r, *c))
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
    for &size in &f.sizes {
        for r in Routine::ALL {
            if !(f.routines.is_empty() || f.routines.contains(&r)) {
                continue;
            }
            if r.page_granular() && (size == 0 || size % crate::abi::PAGE_SIZE != 0) {
                return Err(Error::Usage(format!(
                    "{r} works on whole pages: --size {size} is not a multiple of 4096 \
                     (try {} or pick --routine memset/memcpy)",
                    crate::units::format_size(size.div_ceil(4096).max(1) * 4096)
                )));
            }
        }
    }
    for c in configs {
        let (specs, _) = suite::plan(*c, &ctx.caps, f, u64::MAX);
        let need = specs.iter().map(suite::footprint).max().unwrap_or(0);
        if !f.sizes.is_empty() && need > arena(ctx.common.mem()) {
            let mem = (arch::ARENA_BASE - arch::RAM_BASE + need).next_multiple_of(arch::RAM_ALIGN);
            return Err(Error::Usage(format!(
                "--mem {} is too small for the requested sizes: they need {} of arena; use --mem {} or more",
                crate::units::format_size(ctx.common.mem()),
                crate::units::format_size(need),
                crate::units::format_size(mem)
            )));
        }
    }
    Ok(())
}

fn verify(ctx: &Ctx, args: &VerifyArgs, command: &str) -> Result<i32> {
    let configs = ctx.common.config.configs();
    let filter = Filter {
        routines: args.routine.clone(),
        variants: args.variant.clone(),
        sizes: args.size.clone(),
    };
    check_filter(ctx, &configs, &filter)?;
    let p = privilege::choose(cpl_choice(&ctx.common)?)?;

    let mut records: Vec<CheckRecord> = Vec::new();
    let mut failure: Option<GuestFailure> = None;
    let mut loads = serde_json::Map::new();
    let mut first_hypercall: Option<Duration> = None;
    let mut checked_bytes = 0u64;
    let mut check_time = Duration::ZERO;
    let mut counter_khz = 0;
    let max_copy = suite::LARGE_SIZES
        .iter()
        .chain(filter.sizes.iter())
        .copied()
        .max()
        .unwrap_or(0)
        .max(4 << 20);
    let pats = Patterns::new(ctx.seed, max_copy as usize);

    println!(
        "hypclear {}: {} {}, KVM {}, guest at {} ({})",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::ARCH,
        ctx.caps.model,
        arch::kvm_flavour(),
        p.name,
        p.reason
    );
    for config in &configs {
        let opts = ctx.vm_options(*config, &p);
        let (specs, skipped) = suite::plan(*config, &ctx.caps, &filter, arena(opts.mem));
        records.extend(skipped);
        let mut vm = Vm::new(vm::open_kvm()?, &opts)?;
        counter_khz = vm.counter_khz;
        vm.vcpu(0)?.start(ctx.timeout)?;
        first_hypercall.get_or_insert(ctx.start.elapsed());
        println!(
            "{config:>7} blob: {} aliases, {} relocations, loaded at {:#x} (seed {}), {} {} guest RAM, {} {} kHz",
            vm.blob.aliases.len(),
            vm.blob.relocs.len(),
            vm.loaded.base,
            ctx.seed,
            crate::units::format_size(opts.mem),
            opts.backing,
            arch::COUNTER_NAME,
            vm.counter_khz
        );
        loads.insert(config.name().into(), json!(vm.loaded.base));
        let pb = progress(specs.len() as u64);
        pb.set_prefix(config.name());
        let run = suite::run(&mut vm, &specs, &pats, ctx.timeout, &pb)?;
        pb.finish_and_clear();
        records.extend(run.records);
        checked_bytes += run.checked_bytes;
        check_time += run.check_time;
        if let Some(f) = run.failure {
            failure = Some(f);
            break;
        }
        vm.vcpu(0)?.exit(ctx.timeout)?;
    }

    println!("{}", report::checks_table(&records, counter_khz, &ctx.caps));
    let passed = records
        .iter()
        .filter(|r| r.verdict == Verdict::Pass)
        .count();
    let failed = records
        .iter()
        .filter(|r| r.verdict == Verdict::Fail)
        .count();
    let skipped = records
        .iter()
        .filter(|r| r.verdict == Verdict::Skipped)
        .count();
    let elapsed = ctx.start.elapsed();
    let checker_gbps = checked_bytes as f64 / check_time.as_secs_f64().max(1e-9) / 1e9;
    if let Some(f) = &failure {
        eprintln!("{f}");
    }
    let ok = failed == 0 && failure.is_none();
    println!(
        "hypclear {command}: {} — {passed} passed, {failed} failed, {skipped} skipped ({}) in {:.2} s; \
         first hypercall after {:.1} ms; checker {:.1} GB/s",
        if ok { "PASS" } else { "FAIL" },
        configs
            .iter()
            .map(|c| c.name())
            .collect::<Vec<_>>()
            .join(", "),
        elapsed.as_secs_f64(),
        first_hypercall.unwrap_or_default().as_secs_f64() * 1e3,
        checker_gbps
    );
    if let Some(path) = &ctx.common.json {
        let host = HostInfo::collect(&ctx.caps, counter_khz);
        let first_load = configs
            .first()
            .and_then(|c| loads.get(c.name()))
            .cloned()
            .unwrap_or(serde_json::Value::Null);
        let doc = json!({
            "tool": "hypclear",
            "command": command,
            "host": host,
            "cpu": ctx.caps,
            "guest": {
                "load_address": first_load,
                "load_addresses": loads,
                "privilege": p,
                "mem": ctx.common.mem(),
                "backing": ctx.common.backing,
                "prefault": ctx.common.prefault,
                "seed": ctx.seed,
            },
            "checks": records,
            "failure": failure,
            "summary": {
                "passed": passed,
                "failed": failed,
                "skipped": skipped,
                "elapsed_s": elapsed.as_secs_f64(),
                "first_hypercall_ms": first_hypercall.unwrap_or_default().as_secs_f64() * 1e3,
                "checker_gb_per_s": checker_gbps,
                "checked_bytes": checked_bytes,
            }
        });
        report::write_json(path, &doc)?;
    }
    Ok(if ok { 0 } else { EXIT_FAILED })
}

fn selftest(ctx: &Ctx) -> Result<i32> {
    let p = privilege::choose(cpl_choice(&ctx.common)?)?;
    let mut results = Vec::new();
    for config in ctx.common.config.configs() {
        let opts = crate::selftest::vm_options(&ctx.vm_options(config, &p));
        for r in crate::selftest::run(&opts, ctx.timeout)? {
            results.push((config, r));
        }
    }
    let mut t = report::table(&[
        "config",
        "injected fault",
        "expected",
        "detected",
        "observed",
    ]);
    for (config, r) in &results {
        t.add_row(vec![
            comfy_table::Cell::new(config.name()),
            comfy_table::Cell::new(&r.name),
            comfy_table::Cell::new(format!("{:?}", r.expected)),
            comfy_table::Cell::new(if r.detected { "yes" } else { "NO" }),
            comfy_table::Cell::new(&r.observed),
        ]);
    }
    println!("{t}");
    let n = results.len();
    let ok = results.iter().filter(|(_, r)| r.detected).count();
    println!("{ok}/{n} injected faults detected (guest at {})", p.name);
    if let Some(path) = &ctx.common.json {
        let doc = json!({
            "tool": "hypclear",
            "command": "selftest",
            "host": HostInfo::collect(&ctx.caps, 0),
            "guest": { "privilege": p, "seed": ctx.seed },
            "cases": results.iter().map(|(c, r)| json!({"config": c, "case": r})).collect::<Vec<_>>(),
            "summary": { "passed": ok, "failed": n - ok },
        });
        report::write_json(path, &doc)?;
    }
    Ok(if ok == n { 0 } else { EXIT_FAILED })
}

fn info(ctx: &Ctx) -> Result<i32> {
    let kvm = vm::open_kvm()?;
    let p = privilege::choose(cpl_choice(&ctx.common)?)?;
    let mut host = HostInfo::collect(&ctx.caps, 0);
    let mut t = report::table(&["item", "value"]);
    let mut blobs = serde_json::Map::new();
    let mut first = true;
    for config in ctx.common.config.configs() {
        let opts = ctx.vm_options(config, &p);
        let vm = Vm::new(vm::open_kvm()?, &opts)?;
        if first {
            host.counter_khz = vm.counter_khz;
            first = false;
        }
        let blob: &Blob = &vm.blob;
        blobs.insert(
            config.name().into(),
            json!({
                "load_address": vm.loaded.base,
                "entry": vm.loaded.entry,
                "size": blob.size,
                "relocations": blob.relocs.len(),
                "aliases": blob.aliases,
                "selftests": blob.selftests,
            }),
        );
    }
    t.add_row(vec![
        "host".to_string(),
        format!("{} {} ({} CPUs)", host.arch, host.cpu_model, host.cpus),
    ]);
    t.add_row(vec!["kernel".to_string(), host.kernel.clone()]);
    t.add_row(vec![
        "KVM".to_string(),
        format!(
            "{} (API {}, max vCPUs {})",
            host.kvm_flavour,
            kvm.get_api_version(),
            kvm.get_max_vcpus()
        ),
    ]);
    t.add_row(vec![
        "guest CPUID features".to_string(),
        ctx.caps
            .features
            .iter()
            .map(|(n, v)| format!("{n}={}", if *v { "yes" } else { "no" }))
            .collect::<Vec<_>>()
            .join(" "),
    ]);
    for (k, v) in arch::cpu_details(&kvm) {
        t.add_row(vec![k, v]);
    }
    for kernel in [arch::DEFAULT_KERNEL, "6.1"] {
        t.add_row(vec![
            format!("kernel {kernel} would run"),
            ctx.caps.kernel_picks_line(kernel),
        ]);
    }
    t.add_row(vec![
        "counter".to_string(),
        format!("{} at {} kHz", host.counter, host.counter_khz),
    ]);
    t.add_row(vec![
        "privilege".to_string(),
        format!("{} ({})", p.name, p.reason),
    ]);
    t.add_row(vec!["seed".to_string(), ctx.seed.to_string()]);
    for (name, b) in &blobs {
        t.add_row(vec![
            format!("{name} blob"),
            format!(
                "loaded at {:#x}, entry {:#x}, {} bytes, {} relocations",
                b["load_address"].as_u64().unwrap_or(0),
                b["entry"].as_u64().unwrap_or(0),
                b["size"],
                b["relocations"]
            ),
        ]);
    }
    println!("{t}");
    for config in ctx.common.config.configs() {
        let blob = Blob::get(config)?;
        let mut a = report::table(&["alias (__hypclear_)", "-> routine", "offset", "table"]);
        for r in &blob.aliases {
            a.add_row(vec![
                r.name.clone(),
                r.target.clone(),
                format!("{:#x}", r.offset),
                "alias".into(),
            ]);
        }
        for r in &blob.selftests {
            a.add_row(vec![
                r.name.clone(),
                r.target.clone(),
                format!("{:#x}", r.offset),
                "selftest".into(),
            ]);
        }
        println!("{config} configuration:\n{a}");
    }
    if let Some(path) = &ctx.common.json {
        let doc = json!({
            "tool": "hypclear",
            "command": "info",
            "host": host,
            "cpu": ctx.caps,
            "cpu_details": arch::cpu_details(&kvm),
            "guest": { "privilege": p, "seed": ctx.seed, "blobs": blobs,
                       "load_address": blobs.values().next().map(|b| b["load_address"].clone()) },
        });
        report::write_json(path, &doc)?;
    }
    Ok(0)
}
