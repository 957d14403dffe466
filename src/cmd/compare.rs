//! `hypclear compare FILE` (its two link configurations) or
//! `hypclear compare BASE.json NEW.json...`: the seed's comparison table.
use crate::bench::BenchResult;
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
    let mut files = Vec::new();
    for p in std::iter::once(&a.base).chain(a.new.iter()) {
        files.push((p.clone(), compare::load(p)?));
    }
    // An A/B file (`bench --ab`) holds its pairs already decided.
    if let [(_, r)] = files.as_slice()
        && !r.ab.is_empty()
    {
        crate::out!("{}", crate::bench::ab::table(&r.ab));
        return Ok(0);
    }
    refuse_mixed(&files, a.allow_mixed)?;
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
fn refuse_mixed(files: &[(std::path::PathBuf, BenchResult)], allow: bool) -> Result<()> {
    let kinds: Vec<(String, String)> = files
        .iter()
        .map(|(p, r)| {
            // The file's strings are sanitized by `load`; the path is the user's.
            let p = crate::text::sanitize_str(&p.to_string_lossy()).into_owned();
            let kind = match &r.kernel {
                Some(k) if !k.is_null() => format!(
                    "kernel tree {} ({})",
                    k["tree"]["path"].as_str().unwrap_or("?"),
                    k["tree"]["kernelversion"].as_str().unwrap_or("?")
                ),
                _ => "built-in routines".to_string(),
            };
            (p, kind)
        })
        .collect();
    let builtin = kinds.iter().filter(|k| k.1 == "built-in routines").count();
    if !allow && builtin != 0 && builtin != kinds.len() {
        let list: Vec<String> = kinds.iter().map(|(p, k)| format!("{p}: {k}")).collect();
        return Err(Error::usage(format!(
            "refusing to compare built-in routines with a kernel tree's routines ({}); pass --allow-mixed to compare them anyway",
            crate::text::bounded_list(&list, "; ")
        )));
    }
    Ok(())
}
