//! Human-readable tables and the JSON document.
use crate::blob::LinkConfig;
use crate::routines::Routine;
use crate::suite::{CheckRecord, Rows};
use crate::table::{right, table};
use comfy_table::{Cell, Table};

/// The verification table printed by `run` and `verify`. No throughput
/// column: a check is one untimed-as-a-benchmark call (0.01 "GB/s" for
/// clear_page read as a rate); `bench` measures throughput.
pub fn checks_table(
    rows: &Rows,
    caps: &crate::arch::CpuCaps,
    privilege: crate::arch::Privilege,
) -> Table {
    let mut t = table(&[
        "config", "routine", "variant", "checks", "passed", "failed", "skipped", "sizes", "note",
    ]);
    for (key, x) in &rows.0 {
        let (config, routine) = (key.config, key.routine);
        let sizes = match x.min_size {
            Some(lo) if lo != x.max_size => format!(
                "{}..{}",
                crate::units::format_size(lo),
                crate::units::format_size(x.max_size)
            ),
            Some(lo) => crate::units::format_size(lo),
            None => "-".into(),
        };
        let path = crate::arch::path_note(
            routine.family(config),
            &key.variant,
            key.fill,
            caps,
            privilege,
        );
        let note = x
            .first_failure
            .clone()
            .or_else(|| x.skip_reason.clone().map(|r| format!("skipped: {r}")))
            .or_else(|| path.map(str::to_string))
            .unwrap_or_default();
        t.add_row(vec![
            Cell::new(config.name()),
            Cell::new(routine.name()),
            Cell::new(key.label()),
            right(x.checks),
            right(x.passed),
            right(x.failed),
            right(x.skipped),
            Cell::new(sizes),
            Cell::new(note),
        ]);
    }
    t
}

/// The verification results as KTAP: one test per link configuration, one
/// subtest per routine, one leaf per variant (its checks summed up, the
/// first failure and the guest's registers as diagnostics). `cut`: why
/// the run ended before its plan (a signal, an error, a guest failure):
/// the test it ended in is `not ok` with an `# interrupted:` line, so a
/// parser never reads a cut run as a complete one.
pub fn checks_ktap(
    rows: &Rows,
    last: Option<&CheckRecord>,
    failure: Option<&crate::error::GuestFailure>,
    cut: Option<&str>,
) -> crate::ktap::Document {
    use crate::ktap::{Outcome, Test};
    let last = last.map(|r| (r.config, r.routine, r.variant.as_str(), r.fill));
    if let (None, Some(c)) = (&last, cut) {
        let leaf = Test::leaf("hypclear", Outcome::Fail).with_diagnostics([cut_line(c)]);
        return crate::ktap::Document::Tests(vec![leaf]);
    }
    let mut configs: Vec<(LinkConfig, Routines)> = Vec::new();
    for (key, x) in &rows.0 {
        let (config, routine, variant) = (key.config, key.routine, key.label());
        let mut diagnostics = Vec::new();
        let is_last = last == Some((config, routine, key.variant.as_str(), key.fill));
        let outcome = if x.failed > 0 {
            diagnostics.push(format!(
                "{config}/{routine}/{variant}: {} of {} checks failed; first: {}",
                x.failed,
                x.checks,
                x.first_failure.clone().unwrap_or_default()
            ));
            Outcome::Fail
        } else if cut.is_some() && is_last {
            Outcome::Fail
        } else if x.skipped == x.checks {
            Outcome::Skip(x.skip_reason.clone().unwrap_or_else(|| "skipped".into()))
        } else {
            Outcome::Pass
        };
        if let Some(f) = failure.filter(|_| is_last) {
            diagnostics.extend(f.to_string().lines().map(str::to_string));
        }
        if let Some(c) = cut.filter(|_| is_last) {
            diagnostics.push(cut_line(c));
        }
        let leaf = Test::leaf(variant, outcome).with_diagnostics(diagnostics);
        add_leaf(&mut configs, config, routine, leaf);
    }
    nest(configs)
}

/// The diagnostic of the test a run was cut short in, `c` saying why.
fn cut_line(c: &str) -> String {
    format!("interrupted: {c}; this test was cut short and the tests after it did not run")
}

/// Variant leaves grouped by routine, in table order.
type Routines = Vec<(Routine, Vec<crate::ktap::Test>)>;

/// Append a variant's leaf under its configuration and routine: the last
/// ones if they match (the rows come in table order), else new ones.
fn add_leaf(
    configs: &mut Vec<(LinkConfig, Routines)>,
    config: LinkConfig,
    routine: Routine,
    leaf: crate::ktap::Test,
) {
    if configs.last().is_none_or(|(c, _)| *c != config) {
        configs.push((config, Vec::new()));
    }
    if let Some((_, routines)) = configs.last_mut() {
        match routines.last_mut() {
            Some((r, leaves)) if *r == routine => leaves.push(leaf),
            _ => routines.push((routine, vec![leaf])),
        }
    }
}

/// The KTAP tree: one test per configuration, one subtest per routine.
fn nest(configs: Vec<(LinkConfig, Routines)>) -> crate::ktap::Document {
    use crate::ktap::Test;
    crate::ktap::Document::Tests(
        configs
            .into_iter()
            .map(|(c, routines)| {
                Test::parent(
                    c.name(),
                    routines
                        .into_iter()
                        .map(|(r, leaves)| Test::parent(r.name(), leaves))
                        .collect(),
                )
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::Breakdown;
    use crate::ktap::Counts;
    use crate::suite::Verdict;

    fn rec(config: LinkConfig, routine: Routine, variant: &str, verdict: Verdict) -> CheckRecord {
        CheckRecord {
            config,
            routine,
            variant: variant.into(),
            size: 4096,
            count: 1,
            dst_offset: 3,
            src_offset: None,
            fill: None,
            overlap: None,
            verdict,
            stray_bytes: None,
            fault_distance: None,
            first_bad_offset: (verdict == Verdict::Fail).then_some(7),
            bad_bytes: u64::from(verdict == Verdict::Fail),
            breakdown: Breakdown::default(),
            contract: None,
            edge: None,
            ticks: 1,
            reason: match verdict {
                Verdict::Fail => Some("short: 1 bad bytes, first at offset 7".into()),
                Verdict::Skipped => Some("no CLZERO".into()),
                Verdict::Pass => None,
            },
        }
    }

    /// Issue 25 case 12: the verify table's "guest GB/s" (one call per
    /// check, 0.01 for clear_page) read as throughput; it is gone.
    #[test]
    fn the_checks_table_has_no_throughput_column() {
        let v = LinkConfig::Vanilla;
        let records = vec![rec(v, Routine::Memset, "orig", Verdict::Pass)];
        let t = checks_table(
            &Rows::of(&records),
            &crate::arch::CpuCaps::default(),
            crate::arch::Privilege::Kernel,
        )
        .to_string();
        let header = t.lines().nth(1).unwrap_or_default();
        assert!(header.contains("sizes") && !header.contains("GB"), "{t}");
    }

    #[test]
    fn ktap_tree_per_config_routine_variant() {
        let v = LinkConfig::Vanilla;
        let records = vec![
            rec(v, Routine::ClearPage, "clzero", Verdict::Skipped),
            rec(v, Routine::ClearPage, "erms", Verdict::Pass),
            rec(v, Routine::Memset, "orig", Verdict::Pass),
            rec(v, Routine::Memset, "orig", Verdict::Fail),
            rec(LinkConfig::Memset, Routine::Memset, "erms", Verdict::Pass),
        ];
        let doc = checks_ktap(&Rows::of(&records), records.last(), None, None);
        assert_eq!(
            doc.counts(),
            Counts {
                pass: 2,
                fail: 1,
                skip: 1
            }
        );
        let text = doc.render();
        assert!(
            text.contains("    ok 1 clzero # SKIP no CLZERO\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "    # vanilla/memset/orig: 1 of 2 checks failed; first: size 4096 dst+3: short"
            ),
            "{text}"
        );
        assert!(
            text.contains("    not ok 1 orig\n  not ok 2 memset\nnot ok 1 vanilla\n"),
            "{text}"
        );
        assert!(text.contains("ok 2 memset\n# Totals"), "{text}");
    }

    #[test]
    fn each_memset_fill_is_its_own_leaf() {
        let v = LinkConfig::Vanilla;
        let mut zero = rec(v, Routine::Memset, "orig", Verdict::Pass);
        zero.fill = Some(0);
        let mut seeded = rec(v, Routine::Memset, "orig", Verdict::Fail);
        seeded.fill = Some(0x5a);
        let mut clear = rec(v, Routine::ClearPage, "erms", Verdict::Pass);
        clear.fill = Some(0);
        let records = vec![clear, zero, seeded];
        let text = checks_ktap(&Rows::of(&records), records.last(), None, None).render();
        assert!(text.contains("    ok 1 erms\n"), "{text}");
        assert!(text.contains("    ok 1 orig fill 0x00\n"), "{text}");
        assert!(text.contains("    not ok 2 orig fill 0x5a\n"), "{text}");
    }
}
