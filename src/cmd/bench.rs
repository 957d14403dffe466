//! `hypclear bench`: the plan from the command line (usage errors before
//! KVM), then the context, the run and the reports.
use super::Ctx;
use crate::bench::{self, BenchResult};
use crate::bench_lines as lines;
use crate::cli::{BenchArgs, Common};
use crate::error::{Kept, Result, VmmError, unsaved};
use crate::kernel::Side;
use crate::vmm::memory::Backing;
use hypclear_process::exit::Failure;
use std::time::Instant;

/// A human-readable line: stdout, or stderr when stdout carries KTAP.
macro_rules! say {
    ($ktap:expr, $($t:tt)*) => {
        if $ktap {
            crate::errln!($($t)*)
        } else {
            crate::outln!($($t)*)
        }
    };
}

pub(super) fn bench(
    common: &Common,
    a: &BenchArgs,
    start: Instant,
    sides: Vec<Side>,
) -> Result<i32> {
    // From the start: a Ctrl-C while the CPU is probed or a VM boots is a
    // request to stop too, never a silent kill.
    crate::interrupt::install()?;
    let sides = match a.every_path {
        true => super::kernel::bench_paths(common, sides, a.routine)?,
        false => sides,
    };
    let plan = a.plan(common, &sides)?;
    let ktap = common.format == crate::cli::Format::Ktap;
    for path in [&common.json, &a.csv, &a.plot].into_iter().flatten() {
        crate::files::precheck_output(path, crate::files::Precheck::Writable)?;
    }
    let mem = bench::check_memory(&plan, common.mem)?;
    let ctx = Ctx::resolve(common, start, mem, sides)?;
    let (specs, notes) = plan.expand(&ctx.caps)?;
    if let Some(opts) = a.ab() {
        match bench::ab::pairs(&plan, &specs, &ctx.privilege) {
            bench::ab::Pairing::Pairs(pairs) => {
                return ab(ktap, (common, a), &ctx, (&plan, &specs, &pairs), opts);
            }
            bench::ab::Pairing::Apart(why) => crate::errln!(
                "hypclear bench: the sides cannot share a guest ({why}): sessions pair them \
                 as without --ab"
            ),
        }
    }
    announce(ktap, a, &ctx, &plan, specs.len(), &notes)?;
    let (result, kept) = run_kept((common, a), &ctx, &plan, &specs)?;
    report((ktap, common, a), &ctx, (&plan, &specs), result, kept)
}

/// Run the plan, the JSON rewritten (atomically) after every finished
/// cell and marked partial until the end, so a run killed by SIGKILL or
/// the OOM killer keeps what it finished. An error after some cells
/// writes them, with why they stop, before it is returned.
fn run_kept(
    (common, a): (&Common, &BenchArgs),
    ctx: &Ctx,
    plan: &bench::Plan,
    specs: &[bench::CellSpec],
) -> Result<(BenchResult, Kept)> {
    let mut last: Option<BenchResult> = None;
    let kept = std::cell::Cell::new(Kept::Before);
    let mut checkpoint = |r: &BenchResult| {
        last = Some(r.clone());
        match &common.json {
            Some(path) => {
                crate::files::write_json_checkpoint(path, r)?;
                kept.set(Kept::Cells(finished_cells(r), r.cells.len()));
                Ok(())
            }
            None => Ok(()),
        }
    };
    let pb = crate::progress::bar(specs.len() as u64 * plan.sessions);
    pb.set_prefix("bench");
    let run = bench::run(
        plan,
        specs,
        ctx.seed,
        &ctx.privilege,
        &ctx.caps,
        &pb,
        &mut checkpoint,
    );
    pb.finish_and_clear();
    let mut result = match (run, last) {
        (Ok(r), _) => r,
        // Cut short after some cells: what they hold is the result.
        (Err(hypclear_bench::error::Error::Vmm(VmmError::Interrupted)), Some(r)) => r,
        (Err(e), Some(mut r)) => {
            // The error ends the run; the cells so far say why they stop.
            r.partial_reason = Some(e.partial_reason());
            write_outputs(ctx, a, &r)
                .map_err(|w| unsaved(w, common.json.as_deref(), kept.get()))?;
            return Err(e.into());
        }
        (Err(e), None) => return Err(e.into()),
    };
    if result.partial {
        result.partial_reason = Some(crate::interrupt::name().to_string());
    }
    Ok((result, kept.get()))
}

/// The tables, `--explain` (what it explained so far is kept when a later
/// cell fails) and the files of a finished run; its exit status.
fn report(
    (ktap, common, a): (bool, &Common, &BenchArgs),
    ctx: &Ctx,
    (plan, specs): (&bench::Plan, &[bench::CellSpec]),
    mut result: BenchResult,
    kept: Kept,
) -> Result<i32> {
    let unsaved_ = |w| unsaved(w, common.json.as_deref(), kept);
    print_results(ktap, a, ctx, &result);
    if let Some(scope) = a.explain.filter(|_| !result.partial) {
        let explained = explain(ktap, ctx, (plan, specs), scope, &mut result);
        if let Err(e) = explained {
            result.partial_reason = Some(format!("--explain: {e}"));
            write_outputs(ctx, a, &result).map_err(unsaved_)?;
            return Err(e);
        }
    }
    write_outputs(ctx, a, &result).map_err(unsaved_)?;
    if result.partial {
        crate::errln!(
            "hypclear bench: interrupted ({}); the table and files above are partial \
             (\"partial\": true in the JSON)",
            crate::interrupt::name()
        );
        return Ok(crate::interrupt::exit_code());
    }
    Ok(0)
}

/// `--ab`: the pairs measured in one guest, their table and the JSON.
fn ab(
    ktap: bool,
    (common, a): (&Common, &BenchArgs),
    ctx: &Ctx,
    (plan, specs, pairs): (&bench::plan::Plan, &[bench::CellSpec], &[(usize, usize)]),
    opts: bench::ab::AbOptions,
) -> Result<i32> {
    say!(ktap, "{}", lines::ab_headline(pairs.len(), &opts));
    let run = (ctx.seed, &ctx.privilege, &ctx.caps);
    let mut result = bench::run_ab(plan, specs, pairs, run, opts)?;
    if result.partial {
        result.partial_reason = Some(crate::interrupt::name().to_string());
    }
    say!(ktap, "{}", bench::ab::table(&result.ab));
    if ktap {
        crate::output::print_bytes(bench::ab::ktap(&result.ab).render().as_bytes());
    }
    say!(ktap, "{}", lines::ab_legend(ctx.start.elapsed()));
    if let Some(path) = &common.json {
        crate::files::write_json(path, &result)?;
    }
    let _ = a;
    match result.partial {
        true => Ok(crate::interrupt::exit_code()),
        false => Ok(0),
    }
}

/// The table (and KTAP), the unit line, the side ratios and the variance
/// components.
fn print_results(ktap: bool, a: &BenchArgs, ctx: &Ctx, result: &BenchResult) {
    say!(ktap, "{}", bench::report::cells_table(result, a.unit));
    if ktap {
        crate::output::print_bytes(bench::report::cells_ktap(result).render().as_bytes());
    }
    let unit = a.unit.label();
    say!(
        ktap,
        "{}",
        lines::unit_line(result, unit, ctx.start.elapsed())
    );
    for l in bench::report::guest_host_lines(result) {
        say!(ktap, "{l}");
    }
    if let Some(p) = &result.precision {
        say!(ktap, "precision: {}", p.text());
    }
    for l in bench::sides::ratio_lines(result, a.unit) {
        say!(ktap, "{l}");
    }
    for l in bench::report::variance_lines(result, 0.02) {
        say!(ktap, "{l}");
    }
    for l in result.reproducibility.iter().flat_map(|r| r.lines()) {
        say!(ktap, "{l}");
    }
}

/// `--explain`: each cell with a guest/host gap measured again under
/// the variants of `bench::explain`, its table printed, the attribution
/// kept in the result (and so in the JSON).
fn explain(
    ktap: bool,
    ctx: &Ctx,
    (plan, specs): (&bench::plan::Plan, &[bench::CellSpec]),
    scope: bench::explain::Scope,
    result: &mut BenchResult,
) -> Result<()> {
    use bench::explain::{self as x, ExplainOptions, ExplainRun};
    let other = x::other_privilege(ctx.privilege.privilege)?;
    let run = ExplainRun {
        plan,
        seed: ctx.seed,
        privilege: &ctx.privilege,
        other_privilege: other.as_ref(),
        caps: &ctx.caps,
        opts: ExplainOptions {
            scope,
            ..ExplainOptions::default()
        },
    };
    let mut print = |e: &x::Explanation| {
        for l in x::lines(e, &run.opts) {
            say!(ktap, "{l}");
        }
    };
    let found = x::explain_all(&run, specs, &result.cells, &mut print)?;
    if found.is_empty() {
        say!(ktap, "{}", x::nothing_to_explain(&result.cells, &run.opts));
    }
    result.explain = found;
    Ok(())
}

/// The lines above the table: what runs where, the precondition, the
/// sides, the kernel blobs' paths and the notes.
fn announce(
    ktap: bool,
    a: &BenchArgs,
    ctx: &Ctx,
    plan: &bench::plan::Plan,
    cells: usize,
    notes: &[String],
) -> Result<()> {
    say!(
        ktap,
        "{}",
        lines::headline(plan, &ctx.caps.model, cells, &ctx.privilege)
    );
    say!(ktap, "precondition: {}", plan.cache.describe());
    if plan.backings.contains(&Backing::Thp) && crate::vmm::memory::thp_refused() {
        say!(
            ktap,
            "note: this host's /sys/kernel/mm/transparent_hugepage/enabled is [never]: the thp \
             backing gets 4 KiB pages, as anon does (`echo madvise > \
             /sys/kernel/mm/transparent_hugepage/enabled` as root gives it 2 MiB pages)"
        );
    }
    if plan.sides.len() > 1 {
        say!(
            ktap,
            "sides (sessions interleaved, order reversed every other session): {}",
            plan.sides
                .iter()
                .map(|s| format!("{} = {}", s.name(), s.describe()))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    for line in super::kernel::summary_lines(&ctx.sides) {
        say!(ktap, "{line}");
    }
    if ctx.has_kernel_side() {
        say!(
            ktap,
            "note: no host baseline for a kernel blob (its routines exist only in the guest image)"
        );
    }
    for n in notes {
        say!(ktap, "note: {n}");
    }
    for n in pick_notes(a, ctx)? {
        say!(ktap, "note: {n}");
    }
    Ok(())
}

/// With built-in and kernel sides: which built-in each kernel side's tree
/// runs here for the routine, read from its code (without a tree nothing
/// says it).
fn pick_notes(a: &BenchArgs, ctx: &Ctx) -> Result<Vec<String>> {
    if !ctx.sides.iter().any(Side::is_builtin) {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for t in super::kernel::kernel_picks(&ctx.sides, &ctx.caps)? {
        let fam = a.routine.family(t.config);
        if let Some(p) = t.picks.iter().find(|p| p.family == fam) {
            out.push(format!("kernel {} would run {p} on this CPU", t.kernel));
        }
    }
    Ok(out)
}

/// Cells with measured samples in a result so far.
fn finished_cells(r: &BenchResult) -> usize {
    r.cells.iter().filter(|c| !c.guest.is_empty()).count()
}

fn write_outputs(ctx: &Ctx, a: &BenchArgs, result: &BenchResult) -> Result<()> {
    if let Some(path) = &ctx.common.json {
        crate::files::write_json(path, result)?;
    }
    if let Some(path) = &a.csv {
        bench::report::write_csv(result, path)?;
    }
    if let Some(path) = &a.plot {
        bench::report::write_plot(result, path)?;
    }
    Ok(())
}
