//! `hypclear compare FILE` (its two link configurations) or
//! `hypclear compare BASE.json NEW.json...`: the seed's comparison table.
use crate::bench::compare::{self, Format};
use crate::cli::{CompareArgs, CompareFormat};
use crate::error::Result;

pub fn compare(a: &CompareArgs) -> Result<i32> {
    let mut files = Vec::new();
    for p in std::iter::once(&a.base).chain(a.new.iter()) {
        files.push((p.clone(), compare::load(p)?));
    }
    let format = match a.format {
        CompareFormat::Text => Format::Text,
        CompareFormat::Markdown => Format::Markdown,
    };
    print!(
        "{}",
        compare::compare(&files, a.alpha, a.margin, a.allow_different_hosts, format)?
    );
    Ok(0)
}
