//! `hypclear verify` (and `run`): the arguments as a run/verify plan, the
//! run in `check::verify`, its table or KTAP, the JSON file and the exit
//! status.
use super::Ctx;
use crate::arch;
use crate::check::suite::{self, Filter, RandomSize};
use crate::check::verify::{self, Doc, Plan, Report};
use crate::cli::{Common, Format, VerifyArgs};
use crate::error::{EXIT_FAILED, Result, VmmError};
use crate::kernel::Side;
use crate::progress;
use crate::report;
use std::time::Instant;

pub(super) fn verify(
    common: &Common,
    args: &VerifyArgs,
    start: Instant,
    command: &'static str,
    sides: Vec<Side>,
) -> Result<i32> {
    // From the start: a Ctrl-C while the CPU is probed or a VM boots is a
    // request to stop too, never a silent kill.
    crate::interrupt::install()?;
    let filter = Filter {
        routines: args.routine.clone(),
        variants: args.variant.clone(),
        sizes: args.size.clone(),
        geometry: args.run.geometry,
        seed: 0,
    };
    verify::check_filter(&sides, &filter)?;
    let sides = super::kernel::every_path(common, sides)?;
    let boot = super::boot(common, start, common.mem())?;
    let plan = Plan::new(command, sides, filter, boot, common.check);
    // Everything else is resolved and checked while the VMs boot; no
    // check runs before it has passed.
    let mut ctx = None;
    let prepare = || {
        let c = Ctx::complete(common, &plan.boot, plan.sides.clone())?;
        let admitted = plan.admit(c.caps.clone())?;
        announce(&c, &plan.random_sizes);
        ctx = Some(c);
        Ok::<_, crate::error::Error>(admitted)
    };
    let json = common.json.as_deref();
    let mut write = |doc: &Doc<'_>| -> std::result::Result<(), crate::check::error::Error> {
        match json {
            Some(path) => Ok(crate::files::write_json_checkpoint(path, doc)?),
            None => Ok(()),
        }
    };
    let checkpoint = json
        .is_some()
        .then_some(&mut write as verify::Checkpoint<'_>);
    let bars = verify::Bars {
        group: &progress::group(),
        bar: progress::bar,
    };
    let mut report = verify::run(&plan, &bars, prepare, checkpoint)?;
    let ctx = ctx.ok_or_else(|| VmmError::Internal("the run context was never set".into()))?;
    for banner in &report.banners {
        ctx.say(banner);
    }
    let code = report_outcome(&ctx, &plan, &report)?;
    report.error.take().map_or(Ok(code), |e| Err(e.into()))
}

/// The run's opening lines: version, host, KVM, privilege, the kernel
/// sides, the random sizes.
fn announce(ctx: &Ctx, random_sizes: &[RandomSize]) {
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
    if let Some(line) = random_line(ctx.seed, random_sizes) {
        ctx.say(line);
    }
}

/// "random sizes (seed S): 1234, 70001, ...": what `--seed S` repeats
/// (none: no line).
fn random_line(seed: u64, sizes: &[RandomSize]) -> Option<String> {
    let list: Vec<String> = sizes.iter().map(|r| r.size.to_string()).collect();
    (!list.is_empty()).then(|| format!("random sizes (seed {seed}): {}", list.join(", ")))
}

/// Print the table (or KTAP), the summary line and the failure, write the
/// JSON report; the exit status of the run.
fn report_outcome(ctx: &Ctx, plan: &Plan, r: &Report) -> Result<i32> {
    let (o, command) = (&r.outcome, plan.command);
    let cut = r.partial_reason();
    print_results(ctx, r, cut.as_deref());
    let summary = r.summary(plan);
    if let Some(f) = &o.failure {
        crate::errln!("{f}");
    }
    let ok = summary.failed == 0 && o.failure.is_none() && !o.interrupted;
    let verdict = match (o.interrupted, ok) {
        (true, _) => "PARTIAL (interrupted)",
        (false, true) => "PASS",
        (false, false) => "FAIL",
    };
    // One name per link configuration (alternatives loads share one).
    let mut names: Vec<&str> = plan.sides.iter().map(|c| c.config().name()).collect();
    names.dedup();
    ctx.say(format_args!(
        "hypclear {command}: {verdict} — {} passed, {} failed, {} skipped ({}) in {:.2} s; \
         first hypercall after {:.1} ms; checker {:.1} GB/s",
        summary.passed,
        summary.failed,
        summary.skipped,
        names.join(", "),
        summary.elapsed.as_secs_f64(),
        summary.first_ms,
        summary.checker_gbps
    ));
    if let Some(path) = &ctx.common.json {
        crate::files::write_json(path, &r.doc(plan, &summary, cut.as_deref()))?;
    }
    if o.interrupted {
        crate::errln!(
            "hypclear {command}: interrupted ({}); the results above are partial",
            crate::interrupt::name()
        );
        return Ok(crate::interrupt::exit_code());
    }
    Ok(if ok { 0 } else { EXIT_FAILED })
}

/// The table, or the KTAP document (`cut`: why the run ended early).
fn print_results(ctx: &Ctx, r: &Report, cut: Option<&str>) {
    let o = &r.outcome;
    if ctx.common.format == Format::Ktap {
        // The check the run ended in: skipped records (the plan's, an
        // unrunnable path's) are appended after the run's own.
        let last = o
            .records
            .iter()
            .rev()
            .find(|r| r.verdict != suite::Verdict::Skipped);
        let doc = report::checks_ktap(&o.rows, last, o.failure.as_ref(), cut);
        crate::output::print_bytes(doc.render().as_bytes());
    } else {
        ctx.say(report::checks_table(
            &o.rows,
            &ctx.caps,
            ctx.privilege.privilege,
        ));
    }
}
