//! `hypclear selftest`: prove the checker catches broken routines.
use super::Ctx;
use crate::blob::LinkConfig;
use crate::check::selftest::CaseResult;
use crate::cli::Format;
use crate::error::{EXIT_FAILED, Result};
use crate::ktap::{Document, Outcome, Test};
use crate::vmm::host::HostInfo;
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

pub(super) fn selftest(ctx: &Ctx) -> Result<i32> {
    let p = &ctx.privilege;
    let mut results = Vec::new();
    for side in &ctx.sides {
        let config = side.config();
        let (opts, side) = crate::check::selftest::vm_options(&ctx.vm_options(side)?, side)?;
        for r in crate::check::selftest::run(&opts, &side, ctx.timeout)? {
            results.push((config, r));
        }
    }
    let mut t = crate::table::table(&[
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
    let n = results.len();
    let ok = results.iter().filter(|(_, r)| r.detected).count();
    if ctx.common.format == Format::Ktap {
        crate::output::print_bytes(ktap(&results).render().as_bytes());
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
            "cases": results.iter().map(|(c, r)| json!({"config": c, "case": r})).collect::<Vec<_>>(),
            "summary": { "passed": ok, "failed": n - ok },
        });
        crate::files::write_json(path, &doc)?;
    }
    Ok(if ok == n { 0 } else { EXIT_FAILED })
}

/// `hypclear selftest --hostile`: every hostile guest must end the way its
/// case expects (exit 0), or the harness has a hole (exit 1).
pub(super) fn hostile(ctx: &Ctx, only: &[String]) -> Result<i32> {
    let vanilla = crate::blob::LinkConfig::Vanilla.into();
    let (opts, side) = crate::check::selftest::vm_options(&ctx.vm_options(&vanilla)?, &vanilla)?;
    let results = crate::check::hostile::run(&opts, &side, only, ctx.timeout)?;
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
        let doc = Document::Tests(vec![Test::parent("hostile", leaves)]);
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
            "cases": results,
            "summary": { "passed": ok, "failed": n - ok },
        });
        crate::files::write_json(path, &doc)?;
    }
    Ok(if ok == n { 0 } else { EXIT_FAILED })
}
