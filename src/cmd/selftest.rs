//! `hypclear selftest`: prove the checker catches broken routines.
use super::Ctx;
use crate::error::{EXIT_FAILED, Result};
use crate::report;
use crate::vmm::host::HostInfo;
use serde_json::json;

pub fn selftest(ctx: &Ctx) -> Result<i32> {
    let p = &ctx.privilege;
    let mut results = Vec::new();
    for config in ctx.configs() {
        let opts = crate::check::selftest::vm_options(&ctx.vm_options(config));
        for r in crate::check::selftest::run(&opts, ctx.timeout)? {
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
