//! `hypclear compare FILE` (its two link configurations) or
//! `hypclear compare BASE.json NEW.json...`: the seed's comparison table.
use crate::bench::compare;
use crate::cli::{Common, CompareArgs, Format as OutputFormat};
use crate::error::{Error, Result};

pub(super) fn compare(common: &Common, a: &CompareArgs) -> Result<i32> {
    common.format.check(
        "compare",
        &[
            OutputFormat::Text,
            OutputFormat::Markdown,
            OutputFormat::Rst,
        ],
    )?;
    refuse_mixed(
        &std::iter::once(&a.base)
            .chain(a.new.iter())
            .collect::<Vec<_>>(),
        a.allow_mixed,
    )?;
    let mut files = Vec::new();
    for p in std::iter::once(&a.base).chain(a.new.iter()) {
        files.push((p.clone(), compare::load(p)?));
    }
    let opts = a.options(common);
    let text = if a.per_host {
        compare::compare_per_host(&files, &opts)?
    } else {
        compare::compare(&files, &opts)?
    };
    crate::out!("{}", text);
    Ok(0)
}

/// Built-in routines and a kernel tree's routines are different code: a
/// comparison mixing them is refused unless `--allow-mixed`.
fn refuse_mixed(paths: &[&std::path::PathBuf], allow: bool) -> Result<()> {
    let mut kinds = Vec::new();
    for p in paths {
        // Unreadable or malformed files are reported by the loader below.
        let Ok(text) = std::fs::read_to_string(p) else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        let kind = match v.get("kernel") {
            Some(k) if !k.is_null() => format!(
                "kernel tree {} ({})",
                k["tree"]["path"].as_str().unwrap_or("?"),
                k["tree"]["kernelversion"].as_str().unwrap_or("?")
            ),
            _ => "built-in routines".to_string(),
        };
        kinds.push((p, kind));
    }
    let builtin = kinds.iter().filter(|k| k.1 == "built-in routines").count();
    if !allow && builtin != 0 && builtin != kinds.len() {
        let list: Vec<String> = kinds
            .iter()
            .map(|(p, k)| format!("{}: {k}", p.display()))
            .collect();
        return Err(Error::Usage(format!(
            "refusing to compare built-in routines with a kernel tree's routines ({}); pass --allow-mixed to compare them anyway",
            list.join("; ")
        )));
    }
    Ok(())
}
