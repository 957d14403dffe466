//! Human-readable tables and the JSON document.
use crate::blob::LinkConfig;
use crate::check::suite::{CheckRecord, Verdict};
use crate::routines::Routine;
use comfy_table::{Cell, CellAlignment, Table, presets::UTF8_FULL_CONDENSED};
use std::collections::BTreeMap;
use std::path::Path;

pub fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED);
    t.set_header(header.iter().map(Cell::new));
    t
}

pub fn right(v: impl ToString) -> Cell {
    Cell::new(v.to_string()).set_alignment(CellAlignment::Right)
}

/// Per (config, routine, variant) totals.
#[derive(Debug, Default, Clone)]
pub struct Totals {
    pub checks: u64,
    pub passed: u64,
    pub failed: u64,
    pub skipped: u64,
    pub bytes: u64,
    pub ticks: u64,
    pub min_size: Option<u64>,
    pub max_size: u64,
    pub first_failure: Option<String>,
    pub skip_reason: Option<String>,
}

pub fn totals(records: &[CheckRecord]) -> BTreeMap<(LinkConfig, Routine, String), Totals> {
    let mut m: BTreeMap<(LinkConfig, Routine, String), Totals> = BTreeMap::new();
    for r in records {
        let t = m
            .entry((r.config, r.routine, r.variant.clone()))
            .or_default();
        t.checks += 1;
        match r.verdict {
            Verdict::Pass => t.passed += 1,
            Verdict::Fail => {
                t.failed += 1;
                if t.first_failure.is_none() {
                    t.first_failure = Some(format!(
                        "size {} dst+{}{}: {}",
                        r.size * r.count,
                        r.dst_offset,
                        r.src_offset
                            .map(|s| format!(" src+{s}"))
                            .unwrap_or_default(),
                        r.reason.clone().unwrap_or_default()
                    ));
                }
            }
            Verdict::Skipped => {
                t.skipped += 1;
                t.skip_reason = r.reason.clone();
            }
        }
        if r.verdict != Verdict::Skipped {
            t.bytes += r.size * r.count;
            t.ticks += r.ticks;
            let s = r.size * r.count;
            t.min_size = Some(t.min_size.map_or(s, |m| m.min(s)));
            t.max_size = t.max_size.max(s);
        }
    }
    m
}

/// The verification table printed by `run` and `verify`.
pub fn checks_table(records: &[CheckRecord], counter_khz: u64) -> Table {
    let mut t = table(&[
        "config",
        "routine",
        "variant",
        "checks",
        "passed",
        "failed",
        "skipped",
        "sizes",
        "guest GB/s",
        "note",
    ]);
    for ((config, routine, variant), x) in totals(records) {
        let secs = x.ticks as f64 / (counter_khz.max(1) as f64 * 1e3);
        let rate = if x.ticks > 0 && x.bytes > 0 {
            format!("{:.2}", x.bytes as f64 / secs / 1e9)
        } else {
            "-".into()
        };
        let sizes = match x.min_size {
            Some(lo) if lo != x.max_size => format!(
                "{}..{}",
                crate::units::format_size(lo),
                crate::units::format_size(x.max_size)
            ),
            Some(lo) => crate::units::format_size(lo),
            None => "-".into(),
        };
        let note = x
            .first_failure
            .clone()
            .or_else(|| x.skip_reason.clone().map(|r| format!("skipped: {r}")))
            .unwrap_or_default();
        t.add_row(vec![
            Cell::new(config.name()),
            Cell::new(routine.name()),
            Cell::new(variant),
            right(x.checks),
            right(x.passed),
            right(x.failed),
            right(x.skipped),
            Cell::new(sizes),
            right(rate),
            Cell::new(note),
        ]);
    }
    t
}

/// Write `value` as pretty JSON to `path`.
pub fn write_json(path: &Path, value: &serde_json::Value) -> crate::error::Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| crate::error::Error::Io {
        path: path.display().to_string(),
        source: std::io::Error::other(e),
    })?;
    std::fs::write(path, text + "\n").map_err(|source| crate::error::Error::Io {
        path: path.display().to_string(),
        source,
    })
}
