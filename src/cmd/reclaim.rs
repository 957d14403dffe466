//! `hypclear reclaim`: pKVM zeroes a protected VM's memory when it
//! reclaims it (crates/check/src/reclaim.rs), with its control.
use crate::check::reclaim::{self, Found, ReclaimOptions, Report, RunReport};
use crate::cli::{Common, Format, RECLAIM_MEM, ReclaimArgs};
use crate::error::{EXIT_FAILED, Result, VmmError};
use serde_json::json;

pub(super) fn reclaim(common: &Common, args: &ReclaimArgs) -> Result<i32> {
    let report = reclaim::run(&options(common, args)?)?;
    if let Some(path) = &common.json {
        let doc = json!({
            "tool": "hypclear",
            "command": "reclaim",
            "report": report,
        });
        crate::files::write_json(path, &doc)?;
    }
    let ktap = common.format == Format::Ktap;
    let say = |line: String| {
        if ktap {
            crate::errln!("{line}");
        } else {
            crate::output::print_bytes(format!("{line}\n").as_bytes());
        }
    };
    say(format!("host: {}", report.host));
    if ktap {
        crate::output::print_bytes(reclaim::ktap(&report).render().as_bytes());
    }
    let runs = match &report.outcome {
        Found::Skipped(why) if ktap => {
            say(format!("reclaim: SKIP: {why}"));
            return Ok(crate::ktap::KSFT_SKIP);
        }
        Found::Skipped(why) => {
            return Err(VmmError::Unsupported {
                what: "protected VMs (reclaim: SKIP)",
                detail: why.clone(),
            }
            .into());
        }
        Found::Ran(runs) => runs,
    };
    say(describe(&report, runs));
    if !ktap {
        say(table(runs).to_string());
    }
    expectation_lines(runs).into_iter().for_each(&say);
    let ok = runs.iter().all(RunReport::passed);
    say(format!(
        "reclaim: {}: {}",
        if ok { "PASS" } else { "FAIL" },
        "a protected VM's pages read zero after teardown; the control (ordinary VM) keeps its pattern"
    ));
    Ok(if ok { 0 } else { EXIT_FAILED })
}

/// The options of `hypclear reclaim`.
fn options(common: &Common, args: &ReclaimArgs) -> Result<ReclaimOptions> {
    Ok(ReclaimOptions {
        mem: common.mem.unwrap_or(RECLAIM_MEM),
        seed: common.seed.unwrap_or_else(super::random_seed),
        backing: common.backing,
        timeout: crate::cli::timeout(common.timeout)?,
        control: !args.no_control,
    })
}

/// One line per expectation of each run: what was checked, what was seen.
fn expectation_lines(runs: &[RunReport]) -> Vec<String> {
    let mut out = Vec::new();
    for r in runs {
        for e in &r.expectations {
            out.push(format!(
                "{}: {}: {}",
                reclaim::run_name(r.vm_type),
                e.check,
                e.detail
            ));
        }
    }
    out
}

/// What was filled, with what.
fn describe(report: &Report, runs: &[RunReport]) -> String {
    let Some(r) = runs.first() else {
        return String::new();
    };
    let p = report.pattern;
    format!(
        "fill: {} guest, __pi_memset_generic of arena page i with byte {:#04x} + i*{:#04x} \
         (seed {}) over {:#x}..{:#x} ({}, {} pages); checked after teardown: those pages, \
         the mailbox page and the blob entry page",
        crate::units::format_size(r.mem),
        p.first,
        p.step,
        report.seed,
        r.fill_gpa,
        r.fill_gpa + r.fill_bytes,
        crate::units::format_size(r.fill_bytes),
        r.arena.pages
    )
}

fn table(runs: &[RunReport]) -> comfy_table::Table {
    let mut t = crate::table::table(&[
        "VM",
        "guest memset",
        "teardown",
        "reads zero",
        "pattern kept",
        "verdict",
    ]);
    let yes = |b: bool| if b { "yes" } else { "no" };
    for r in runs {
        let mut row = vec![
            reclaim::run_name(r.vm_type).to_string(),
            format!("{:.3} s ({:.1} MB/s)", r.fill_seconds, r.fill_mb_s),
            format!("{:.3} s ({:.1} MB/s)", r.teardown_seconds, r.teardown_mb_s),
        ];
        for e in &r.expectations {
            row.push(format!(
                "{} (expected {}): {}",
                yes(e.observed),
                yes(e.expected),
                if e.passed() { "ok" } else { "FAIL" }
            ));
        }
        row.push(if r.passed() { "PASS" } else { "FAIL" }.to_string());
        t.add_row(row);
    }
    t
}
