//! `hypclear selftest`: prove the checker catches broken routines.
use super::Ctx;
use crate::blob::LinkConfig;
use crate::check::selftest::CaseResult;
use crate::cli::Format;
use crate::error::{EXIT_FAILED, Error, Result, VmmError};
use crate::ktap::{Document, Outcome, Test};
use crate::vmm::host::HostInfo;
use hypclear_process::exit::Failure;
use serde_json::json;

/// One KTAP test per link configuration, one leaf per injected fault: `ok`
/// when the checker caught it as the expected kind.
fn ktap(results: &[(LinkConfig, CaseResult)]) -> Document {
    let mut configs: Vec<(LinkConfig, Vec<Test>)> = Vec::new();
    for (config, r) in results {
        let leaf = Test::leaf(&r.name, Outcome::of(r.detected)).with_diagnostics([format!(
            "{config}/{}: expected {:?}, observed: {}",
            r.name, r.expected, r.observed
        )]);
        match configs.last_mut() {
            Some((c, leaves)) if c == config => leaves.push(leaf),
            _ => configs.push((*config, vec![leaf])),
        }
    }
    Document::Tests(
        configs
            .into_iter()
            .map(|(c, leaves)| Test::parent(c.name(), leaves))
            .collect(),
    )
}

/// What stopped the cases short, if anything did (a stop request, a VMM
/// error): the cases that ran are reported, marked partial.
struct Cut {
    stopped: Option<Error>,
}

impl Cut {
    /// `stopped` ended the cases after `ran` of them; when none ran there
    /// is nothing to report, only the error.
    fn of(ran: usize, stopped: Option<impl Into<Error>>) -> Result<Cut> {
        match stopped.map(Into::into) {
            Some(e) if ran == 0 => Err(e),
            stopped => Ok(Cut { stopped }),
        }
    }

    /// The JSON's `partial_reason` and KTAP's `# interrupted:` line.
    fn reason(&self) -> Option<String> {
        self.stopped.as_ref().map(Failure::partial_reason)
    }

    /// KTAP's mark of a cut run: a failing test, so a parser (kunit.py)
    /// never reads the cases that ran as the whole set.
    fn leaf(&self) -> Option<Test> {
        let reason = self.reason()?;
        Some(
            Test::leaf("interrupted", Outcome::Fail).with_diagnostics([format!(
                "interrupted: {reason}; the cases after the ones above did not run"
            )]),
        )
    }

    /// The exit status once the results are out: 128 + the signal for a
    /// stop request, the error for anything else that stopped the cases,
    /// else whether every case was handled.
    fn finish(self, command: &str, all_ok: bool) -> Result<i32> {
        match self.stopped {
            Some(Error::Vmm(VmmError::Interrupted)) => {
                crate::errln!(
                    "hypclear {command}: interrupted ({}); the results above are partial",
                    crate::interrupt::name()
                );
                Ok(crate::interrupt::exit_code())
            }
            Some(e) => Err(e),
            None => Ok(if all_ok { 0 } else { EXIT_FAILED }),
        }
    }
}

pub(super) fn selftest(ctx: &Ctx) -> Result<i32> {
    let p = &ctx.privilege;
    let mut results = Vec::new();
    let mut stopped = None;
    for side in &ctx.sides {
        let config = side.config();
        let (opts, side) = crate::check::selftest::vm_options(&ctx.vm_options(side)?, side)?;
        let cases = crate::check::selftest::run(&opts, &side, ctx.timeout);
        results.extend(cases.results.into_iter().map(|r| (config, r)));
        if cases.stopped.is_some() {
            stopped = cases.stopped;
            break;
        }
    }
    let cut = Cut::of(results.len(), stopped)?;
    let t = table(&results);
    let n = results.len();
    let ok = results.iter().filter(|(_, r)| r.detected).count();
    if ctx.common.format == Format::Ktap {
        let mut doc = ktap(&results);
        if let Document::Tests(tests) = &mut doc {
            tests.extend(cut.leaf());
        }
        crate::output::print_bytes(doc.render().as_bytes());
    } else {
        ctx.say(t);
    }
    ctx.say(format_args!(
        "{ok}/{n} injected faults detected (guest at {})",
        p.name
    ));
    if let Some(path) = &ctx.common.json {
        let doc = json!({
            "tool": "hypclear",
            "command": "selftest",
            "host": HostInfo::collect(&ctx.caps, 0),
            "guest": { "privilege": p, "seed": ctx.seed },
            "partial": cut.stopped.is_some(),
            "partial_reason": cut.reason(),
            "cases": results.iter().map(|(c, r)| json!({"config": c, "case": r})).collect::<Vec<_>>(),
            "summary": { "passed": ok, "failed": n - ok },
        });
        crate::files::write_json(path, &doc)?;
    }
    cut.finish("selftest", ok == n)
}

/// The table of the cases: each injected fault, expected and observed.
fn table(results: &[(LinkConfig, CaseResult)]) -> comfy_table::Table {
    let mut t = crate::table::table(&[
        "config",
        "injected fault",
        "expected",
        "detected",
        "observed",
    ]);
    for (config, r) in results {
        t.add_row(vec![
            comfy_table::Cell::new(config.name()),
            comfy_table::Cell::new(&r.name),
            comfy_table::Cell::new(format!("{:?}", r.expected)),
            comfy_table::Cell::new(if r.detected { "yes" } else { "NO" }),
            comfy_table::Cell::new(&r.observed),
        ]);
    }
    t
}

/// `hypclear selftest --hostile`: every hostile guest must end the way its
/// case expects (exit 0), or the harness has a hole (exit 1).
pub(super) fn hostile(ctx: &Ctx, only: &[String]) -> Result<i32> {
    let vanilla = crate::blob::LinkConfig::Vanilla.into();
    let (opts, side) = crate::check::selftest::vm_options(&ctx.vm_options(&vanilla)?, &vanilla)?;
    let cases = crate::check::hostile::run(&opts, &side, only, ctx.timeout)?;
    let results = cases.results;
    let cut = Cut::of(results.len(), cases.stopped)?;
    let mut t = crate::table::table(&["hostile guest", "expected", "handled", "observed", "s"]);
    for r in &results {
        t.add_row(vec![
            comfy_table::Cell::new(&r.name),
            comfy_table::Cell::new(format!("{:?}", r.expected)),
            comfy_table::Cell::new(if r.detected { "yes" } else { "NO" }),
            comfy_table::Cell::new(&r.observed),
            comfy_table::Cell::new(format!("{:.2}", r.seconds)),
        ]);
    }
    let n = results.len();
    let ok = results.iter().filter(|r| r.detected).count();
    if ctx.common.format == Format::Ktap {
        // One test, one leaf per hostile guest: `ok` when it ended the way
        // its case expects (the observed text is sanitized by the renderer).
        let leaves = results
            .iter()
            .map(|r| {
                Test::leaf(&r.name, Outcome::of(r.detected)).with_diagnostics([format!(
                    "{}: expected {:?}, observed: {} ({:.2} s)",
                    r.name, r.expected, r.observed, r.seconds
                )])
            })
            .collect();
        let mut tests = vec![Test::parent("hostile", leaves)];
        tests.extend(cut.leaf());
        let doc = Document::Tests(tests);
        crate::output::print_bytes(doc.render().as_bytes());
    } else {
        ctx.say(t);
    }
    ctx.say(format_args!(
        "{ok}/{n} hostile guests handled (guest at {})",
        ctx.privilege.name
    ));
    if let Some(path) = &ctx.common.json {
        let doc = json!({
            "tool": "hypclear",
            "command": "selftest --hostile",
            "partial": cut.stopped.is_some(),
            "partial_reason": cut.reason(),
            "cases": results,
            "summary": { "passed": ok, "failed": n - ok },
        });
        crate::files::write_json(path, &doc)?;
    }
    cut.finish("selftest --hostile", ok == n)
}
