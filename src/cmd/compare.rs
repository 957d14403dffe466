//! `hypclear compare FILE` (its two link configurations) or
//! `hypclear compare BASE.json NEW.json...`: the seed's comparison table.
use crate::bench::compare::{self, Format};
use crate::cli::{Common, CompareArgs, Format as OutputFormat};
use crate::error::Result;

pub fn compare(common: &Common, a: &CompareArgs) -> Result<i32> {
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
    let format = match common.format {
        OutputFormat::Markdown => Format::Markdown,
        OutputFormat::Rst => Format::Rst,
        _ => Format::Text,
    };
    let text = if a.per_host {
        compare::compare_per_host(&files, a.alpha, a.margin, format)?
    } else {
        compare::compare(&files, a.alpha, a.margin, a.allow_different_hosts, format)?
    };
    crate::out!("{}", text);
    Ok(0)
}
