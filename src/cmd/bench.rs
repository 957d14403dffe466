//! `hypclear bench`: the plan from the command line (usage errors before
//! KVM), then the context, the run and the reports.
use super::Ctx;
use crate::arch;
use crate::bench::{self, BenchResult};
use crate::cli::{BenchArgs, Common};
use crate::error::{Result, RunError};
use crate::kernel::Side;
use crate::vmm::memory::Backing;
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
        crate::files::precheck_output(path)?;
    }
    let need = plan.mem_needed();
    check_memory(&plan, common, need)?;
    let ctx = Ctx::resolve(common, start, common.mem.unwrap_or(need).max(need), sides)?;
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
        (Err(RunError::Interrupted), Some(r)) => r,
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
    say!(
        ktap,
        "bench A/B in one guest: {} pair(s), per call on the same buffer, randomised ABBA \
         blocks; {}",
        pairs.len(),
        match opts.detect {
            Some(d) => format!(
                "until flagged or equivalent within +-{}%, at most {:.0} s a pair",
                d * 100.0,
                opts.budget.as_secs_f64()
            ),
            None => format!("{:.0} s a pair", opts.budget.as_secs_f64()),
        }
    );
    let run = (ctx.seed, &ctx.privilege, &ctx.caps);
    let mut result = bench::run_ab(plan, specs, pairs, run, opts)?;
    if result.partial {
        result.partial_reason = Some(crate::interrupt::name().to_string());
    }
    say!(ktap, "{}", bench::ab::table(&result.ab));
    if ktap {
        crate::output::print_bytes(bench::ab::ktap(&result.ab).render().as_bytes());
    }
    say!(
        ktap,
        "change = throughput of B against A: per guest the Hodges-Lehmann shift of its \
         blocks' ln(B time / A time), their mean over the guests (fresh VMs, both images \
         moved, main and beside swapped every other one) with its t interval at the level \
         shown (--detect spends 5% over its looks); MDE = the change this n detects with \
         power 0.8; a block with a call over {}x its side's median, or in a batch that lost \
         time to other tasks, is dropped whole; {:.1} seconds",
        bench::ab::OUTLIER,
        ctx.start.elapsed().as_secs_f64()
    );
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
    say!(
        ktap,
        "bytes/sec from guest {} ticks at {} kHz; GB/sec = 2^30 bytes/sec, as perf bench prints it \
         (the table: {}, --unit); \
         guest/host = per session, mean guest over mean host of the same object on the \
         guest's own pages (the vCPU stopped), runs taking turns; their geometric mean [95% paired t interval]; \
         {:.1} seconds",
        arch::COUNTER_NAME,
        result.host.counter_khz,
        a.unit.label(),
        ctx.start.elapsed().as_secs_f64()
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
    use crate::routines::privilege::{self, CplChoice, ElChoice, Request};
    use bench::explain::{ExplainOptions, ExplainRun};
    // Where DC ZVA exists (arm64) the privilege is the DC ZVA side of its
    // own; elsewhere (x86, where PVM emulates CPL0) it is a cause to test.
    let cpl = arch::dc_zva_privilege(arch::DcZva::On).is_none();
    let other = match (cpl, ctx.privilege.privilege) {
        (false, _) => None,
        (true, arch::Privilege::User) => Some(CplChoice::Kernel),
        (true, arch::Privilege::Kernel) => Some(CplChoice::User),
        (true, arch::Privilege::Hyp) => None,
    };
    let other = match other {
        Some(cpl) => Some(privilege::choose(Request {
            cpl,
            el: ElChoice::Auto,
        })?),
        None => None,
    };
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
    let mut found = Vec::new();
    for (spec, cell) in specs.iter().zip(&result.cells) {
        let side = plan.sides[spec.side].name();
        if let Some(e) = bench::explain::explain_cell(&run, spec, cell, &side, cpl)? {
            for l in bench::explain::lines(&e, &run.opts) {
                say!(ktap, "{l}");
            }
            found.push(e);
        }
    }
    if found.is_empty() {
        let (lo, hi) = run.opts.band;
        let unpaired = result
            .cells
            .iter()
            .filter(|c| c.guest_host.is_none() || !c.state.is_measured())
            .count();
        say!(
            ktap,
            "explain: nothing to explain: {} cell(s) with guest/host within {lo:.2}-{hi:.2}, {unpaired} \
             without a guest/host (no host baseline, or unmeasurable under load: see flags)",
            result.cells.len() - unpaired
        );
    }
    result.explain = found;
    Ok(())
}

/// Host memory for the run, checked before any VM: each guest region (the
/// host baseline runs on the guest's pages).
fn check_memory(plan: &bench::plan::Plan, common: &Common, need: u64) -> Result<()> {
    for b in &plan.backings {
        crate::vmm::memory::precheck(common.mem.unwrap_or(need).max(need), *b)?;
    }
    // Hugetlb comes from its pool, checked above.
    if plan
        .backings
        .iter()
        .any(|b| *b != crate::vmm::memory::Backing::Hugetlb)
    {
        crate::vmm::memory::check_host_memory(need, "bench (guest regions)")?;
    }
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
    say!(ktap, "{}", headline(a, ctx, plan, cells));
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

/// The run's first line: routine, CPU, cells, sessions, runs, privilege.
fn headline(a: &BenchArgs, ctx: &Ctx, plan: &bench::plan::Plan, cells: usize) -> String {
    let p = &ctx.privilege;
    format!(
        "hypclear bench {} on {}: {} cell(s) x {} session(s) x ({} + {} measured), guest at {} ({})",
        a.routine,
        ctx.caps.model,
        cells,
        match plan.precision {
            Some(p) => format!(
                "{}..{} (until +-{}%)",
                plan.sessions,
                p.max_sessions,
                bench::precision::pct_text(p.half_width * 100.0)
            ),
            None => plan.sessions.to_string(),
        },
        match plan.max_warmup {
            0 => format!("{} warm-up", plan.warmup),
            m => format!("{}..{m} warm-up until steady", plan.warmup),
        },
        plan.repeats,
        p.name,
        p.reason
    )
}

/// What the `--json` file holds when the final write fails: the last
/// checkpoint that could be written (finished cells of all), or what was
/// there before the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kept {
    Before,
    Cells(usize, usize),
}

impl Kept {
    fn describe(self) -> String {
        match self {
            Kept::Before => "no checkpoint could be written either: the file holds what was \
                             there before the run; free space and run again"
                .into(),
            Kept::Cells(done, of) => format!(
                "the file still holds the last checkpoint that could be written ({done} of \
                 {of} cells finished, \"partial\": true, \"partial_reason\" \"in progress\"): \
                 the process was not killed, it could not write the rest; free space and run again"
            ),
        }
    }
}

/// Cells with measured samples in a result so far.
fn finished_cells(r: &BenchResult) -> usize {
    r.cells.iter().filter(|c| !c.guest.is_empty()).count()
}

/// A failed final `--json` write, saying what the file holds instead.
fn unsaved(
    e: crate::error::Error,
    json: Option<&std::path::Path>,
    kept: Kept,
) -> crate::error::Error {
    let is_json = |p: &str| json.is_some_and(|j| j.display().to_string() == p);
    match e {
        crate::error::Error::Run(RunError::Io { path, source }) if is_json(&path) => {
            crate::error::Error::Unsaved {
                path,
                kept: kept.describe(),
                source,
            }
        }
        e => e,
    }
}

/// The bench JSON (the result carries its sides and kernel blob).
fn write_json(path: &std::path::Path, result: &BenchResult) -> Result<()> {
    Ok(crate::files::write_json(path, result)?)
}

fn write_outputs(ctx: &Ctx, a: &BenchArgs, result: &BenchResult) -> Result<()> {
    if let Some(path) = &ctx.common.json {
        write_json(path, result)?;
    }
    if let Some(path) = &a.csv {
        bench::report::write_csv(result, path)?;
    }
    if let Some(path) = &a.plot {
        bench::report::write_plot(result, path)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 38: after ENOSPC the stale checkpoint claimed the process was
    /// killed, and the error said only "I/O error on FILE".
    #[test]
    fn a_failed_final_write_says_what_the_json_still_holds() {
        let enospc = || {
            crate::error::Error::Run(RunError::Io {
                path: "out.json".into(),
                source: std::io::Error::from_raw_os_error(libc::ENOSPC),
            })
        };
        let json = Some(std::path::Path::new("out.json"));
        let msg = unsaved(enospc(), json, Kept::Cells(3, 8)).to_string();
        assert!(
            msg.contains("out.json") && msg.contains("3 of 8 cells") && msg.contains("not killed"),
            "{msg}"
        );
        let msg = unsaved(enospc(), json, Kept::Before).to_string();
        assert!(msg.contains("before the run"), "{msg}");
        // A failed --csv is not described as the JSON.
        let other = unsaved(enospc(), Some(std::path::Path::new("x.json")), Kept::Before);
        assert!(matches!(other, crate::error::Error::Run(_)));
        assert!(crate::bench::IN_PROGRESS.contains("could not write its final result"));
    }
}
