//! Fuzz harnesses (`fuzz/`'s `compare` and `writers` targets; the replay
//! tests below run their corpus and regressions without AFL). Each panics
//! when an invariant breaks, so AFL records the input as a crash:
//!
//! * [`compare_input`]: bytes are one to three bench JSON files (split at
//!   NUL, which JSON text cannot hold) for `compare`'s loader, then its
//!   tables in every format;
//! * [`writers`]: bytes become a KTAP tree, check records for verify's
//!   KTAP and a two-side bench file whose names and figures are the
//!   input's, rendered as KTAP, rst, markdown and text.
use crate::check::record::{CheckRecord, Rows, Verdict};
use crate::compare::{self, CompareOptions, Format};
use crate::error::Error;
use crate::ktap::{Document, Outcome, Test};
use crate::units::Rate;
use std::borrow::Cow;
use std::path::PathBuf;

/// Most characters of an error a damaged input may produce (a person
/// reads it).
const MAX_ERROR: usize = 4096;

/// `compare`'s input: every document loads or is refused with a usage
/// error (exit 2) that reads cleanly; what loads writes back to JSON that
/// loads to the same result; its tables hold their shape.
pub fn compare_input(data: &[u8]) {
    let mut files = Vec::new();
    for (i, doc) in data.splitn(3, |b| *b == 0).enumerate() {
        let path = PathBuf::from(format!("in{i}.json"));
        match compare::parse(&path, doc) {
            Ok(r) => {
                let again = serde_json::to_vec(&r).expect("a loaded file serializes");
                let back = compare::parse(&path, &again).expect("a loaded file loads again");
                assert_eq!(
                    serde_json::to_value(&r).ok(),
                    serde_json::to_value(&back).ok(),
                    "load, write, load changed the file"
                );
                files.push((path, r));
            }
            Err(e) => return assert_refusal(&e),
        }
    }
    render_all(&files);
}

/// Every format of the comparison (and per host, for several files).
fn render_all(files: &[(PathBuf, crate::BenchResult)]) {
    for format in [Format::Text, Format::Markdown, Format::Rst] {
        let opts = CompareOptions {
            alpha: 0.05,
            margin: 0.02,
            allow_different_hosts: true,
            format,
            unit: Rate::Giga,
        };
        match compare::compare(files, &opts) {
            Ok(out) => assert_table(&out, format),
            Err(e) => assert_refusal(&e),
        }
        if files.len() > 1 {
            match compare::compare_per_host(files, &opts) {
                Ok(out) => assert_table(&out, format),
                Err(e) => assert_refusal(&e),
            }
        }
    }
}

/// A refusal is a usage error of bounded length without raw control or
/// bidi characters.
fn assert_refusal(e: &Error) {
    use hypclear_process::exit::{Category, Failure};
    assert_eq!(e.category(), Category::Usage, "not a usage error: {e:?}");
    let msg = &e.to_string();
    let n = msg.chars().count();
    assert!(n <= MAX_ERROR, "a {n}-character error: {msg}");
    assert_clean("an error", msg);
}

fn assert_clean(what: &str, text: &str) {
    for line in text.split('\n') {
        assert!(
            matches!(crate::text::sanitize_str(line), Cow::Borrowed(_)),
            "{what} holds raw control or bidi characters: {line:?}"
        );
    }
}

/// Output of `compare`: clean lines, and each table's rows line up: as
/// wide as its rules (rst, text) or as many cells as its header
/// (markdown: an unescaped `|` in a cell adds one).
fn assert_table(out: &str, format: Format) {
    assert_clean("compare's output", out);
    let starts: &[char] = match format {
        Format::Text => &['┌', '│', '╞', '├', '└'],
        Format::Markdown => &['|'],
        Format::Rst => &['+', '|'],
    };
    let measure = |l: &str| match format {
        Format::Markdown => l.split('|').count() - l.matches("\\|").count(),
        _ => unicode_width::UnicodeWidthStr::width(l),
    };
    let mut tables = 0;
    let mut table: Vec<&str> = Vec::new();
    for line in out.lines().chain([""]) {
        if line.starts_with(starts) {
            table.push(line);
            continue;
        }
        if let Some(first) = table.first() {
            tables += 1;
            for r in &table {
                assert_eq!(measure(r), measure(first), "{r:?} against {first:?}");
            }
            let rules = table.iter().filter(|l| l.starts_with('+'));
            for l in rules.filter(|_| format == Format::Rst) {
                assert_eq!(l.replace('=', "-"), table[0], "rst rule {l:?}");
            }
        }
        table.clear();
    }
    assert!(tables > 0, "no table in {out}");
}

/// Bytes read front to back; zeros once they run out.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }

    /// Text of up to 63 bytes, any bytes (invalid UTF-8 replaced).
    fn text(&mut self) -> String {
        let n = usize::from(self.byte() % 64).min(self.0.len());
        let (a, rest) = self.0.split_at(n);
        self.0 = rest;
        String::from_utf8_lossy(a).into_owned()
    }
}

/// The writers: KTAP from an arbitrary tree and from check records, and
/// `compare`'s tables of a file whose names and figures are the input's.
pub fn writers(data: &[u8]) {
    let mut b = Bytes(data);
    let doc = match b.byte() {
        0 => Document::SkipAll(b.text()),
        _ => Document::Tests(tests(&mut b, 0)),
    };
    assert_ktap(&doc);
    checks_ktap(&mut b);
    let file = bench_file(&mut b);
    let bytes = serde_json::to_vec(&file).expect("a JSON value serializes");
    let path = PathBuf::from(b.text());
    let r = compare::parse(&path, &bytes).expect("a well-formed bench file loads");
    render_all(&[(path, r)]);
}

/// Up to 4 tests per level, 4 levels deep: leaves and parents with any
/// names, outcomes and diagnostics.
fn tests(b: &mut Bytes, depth: usize) -> Vec<Test> {
    (0..b.byte() % 5)
        .map(|_| {
            let name = b.text();
            let kind = b.byte();
            let mut t = match kind % 4 {
                3 if depth < 4 => Test::parent(name, tests(b, depth + 1)),
                0 | 3 => Test::leaf(name, Outcome::Pass),
                1 => Test::leaf(name, Outcome::Fail),
                _ => Test::leaf(name, Outcome::Skip(b.text())),
            };
            for _ in 0..(kind >> 4) % 4 {
                t.diagnostics.push(b.text());
            }
            t
        })
        .collect()
}

/// verify's KTAP of arbitrary check records: one leaf per row, a row with
/// a failed check never `ok`, a cut run never complete.
fn checks_ktap(b: &mut Bytes) {
    use crate::blob::LinkConfig;
    use crate::routines::Routine;
    let records: Vec<CheckRecord> = (0..b.byte() % 8)
        .map(|_| {
            let k = b.byte();
            let verdict = [Verdict::Pass, Verdict::Fail, Verdict::Skipped][usize::from(k % 3)];
            let config = [LinkConfig::Vanilla, LinkConfig::Memset][usize::from(k >> 7)];
            let routine = Routine::ALL[usize::from(k >> 2) % Routine::ALL.len()];
            let fill = (k & 0x40 != 0).then(|| b.byte());
            record(config, routine, b.text(), fill, verdict, b.text())
        })
        .collect();
    let rows = Rows::of(&records);
    let cut = (b.byte() & 1 == 1).then(|| b.text());
    let doc = crate::check::report::checks_ktap(&rows, records.last(), None, cut.as_deref());
    assert_ktap(&doc);
    let c = doc.counts();
    let failed = rows.0.values().filter(|x| x.failed > 0).count() as u64;
    assert!(c.fail >= failed, "{c:?}: {failed} rows failed");
    if records.is_empty() {
        assert_eq!(c.fail, u64::from(cut.is_some()));
    } else {
        assert_eq!(c.pass + c.fail + c.skip, rows.0.len() as u64);
        assert!(cut.is_none() || c.fail > 0, "a cut run reads as complete");
    }
}

fn record(
    config: crate::blob::LinkConfig,
    routine: crate::routines::Routine,
    variant: String,
    fill: Option<u8>,
    verdict: Verdict,
    reason: String,
) -> CheckRecord {
    CheckRecord {
        config,
        routine,
        variant,
        size: 4096,
        count: 1,
        dst_offset: 0,
        src_offset: None,
        fill,
        overlap: None,
        verdict,
        first_bad_offset: (verdict == Verdict::Fail).then_some(0),
        bad_bytes: u64::from(verdict == Verdict::Fail),
        breakdown: Default::default(),
        contract: None,
        edge: None,
        ticks: 1,
        reason: (verdict != Verdict::Pass).then_some(reason),
        stray_bytes: None,
        fault_distance: None,
    }
}

/// KTAP that parses back to the tree it was made from: the version line,
/// each level's plan and numbered results (as many as the plan says), the
/// diagnostics before their result, one `# Totals:` line, last.
fn assert_ktap(doc: &Document) {
    let text = doc.render();
    assert!(text.ends_with('\n'), "{text:?}");
    assert_clean("KTAP", &text);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.first(), Some(&"KTAP version 1"), "{text}");
    let totals = lines
        .iter()
        .filter(|l| l.trim_start().starts_with("# Totals:"))
        .count();
    match doc {
        Document::SkipAll(_) => {
            assert!(
                lines.len() == 2 && lines[1].starts_with("1..0 # SKIP"),
                "{text}"
            );
        }
        Document::Tests(tests) => {
            let mut at = 1;
            ktap_level(&lines, &mut at, 0, tests);
            let c = doc.counts();
            let want = format!(
                "# Totals: pass:{} fail:{} xfail:0 xpass:0 skip:{} error:0",
                c.pass, c.fail, c.skip
            );
            assert_eq!((lines.get(at), lines.len()), (Some(&want.as_str()), at + 1));
            assert_eq!(totals, 1, "a forged Totals line: {text}");
        }
    }
}

/// One level at `depth` against `tests`; `at` moves past it.
fn ktap_level(lines: &[&str], at: &mut usize, depth: usize, tests: &[Test]) {
    let ind = "  ".repeat(depth);
    let line = |at: usize| lines.get(at).copied().unwrap_or_default();
    assert_eq!(
        line(*at),
        format!("{ind}1..{}", tests.len()),
        "plan at {at}"
    );
    *at += 1;
    for (i, t) in tests.iter().enumerate() {
        if !t.subtests.is_empty() {
            assert_eq!(line(*at), format!("{ind}  KTAP version 1"));
            *at += 1;
            ktap_level(lines, at, depth + 1, &t.subtests);
        }
        let diag = format!("{ind}# ");
        let n = lines[*at..]
            .iter()
            .take_while(|l| l.starts_with(&diag))
            .count();
        assert_eq!(n, t.diagnostics.len(), "diagnostics before line {at}");
        *at += n;
        let result = line(*at).strip_prefix(&ind).unwrap_or_default();
        let (ok, rest) = match result.strip_prefix("not ok ") {
            Some(rest) => (false, rest),
            None => (true, result.strip_prefix("ok ").unwrap_or_default()),
        };
        let (num, rest) = rest.split_once(' ').unwrap_or_default();
        assert_eq!(num, (i + 1).to_string(), "result line {at}: {result:?}");
        let (name, directive) = rest.split_once(" # ").unwrap_or((rest, ""));
        assert!(
            !name.is_empty() && !name.contains('#') && name.trim() == name,
            "{name:?}"
        );
        match t.outcome() {
            Outcome::Pass => assert!(ok && directive.is_empty(), "{result:?}"),
            Outcome::Fail => assert!(!ok && directive.is_empty(), "{result:?}"),
            Outcome::Skip(_) => assert!(ok && directive.starts_with("SKIP"), "{result:?}"),
        }
        *at += 1;
    }
}

/// A bench file of two sides (built-in, or a kernel tree beside one) and
/// up to three cells each, named and measured as the input says.
fn bench_file(b: &mut Bytes) -> serde_json::Value {
    let kernel = b.byte() & 1 == 1;
    let side = |b: &mut Bytes, i: usize| {
        let (name, config) = (b.text(), ["vanilla", "memset"][i]);
        serde_json::json!({
            "name": name, "label": b.text(),
            "kind": if kernel && i == 1 { "kernel-tree" } else { "builtin" },
            "config": config,
            "kernel_paths": { "memset": b.text() },
        })
    };
    let sides = [side(b, 0), side(b, 1)];
    let variants: Vec<String> = (0..1 + b.byte() % 3).map(|_| b.text()).collect();
    let mut cells = Vec::new();
    for (i, config) in ["vanilla", "memset"].iter().enumerate() {
        for v in &variants {
            cells.push(serde_json::json!({
                "axes": {"routine": "memset", "variant": v, "side": i, "config": config,
                    "chunk": 4096, "order": "forward", "fill": "populate", "backing": "anon",
                    "size": 16384, "loops": 1, "vcpus": 1},
                "guest": samples(b), "host": samples(b),
                "guest_bytes_per_sec": null, "guest_ticks_per_byte": null,
                "host_bytes_per_sec": null, "guest_host_ratio": null,
                "disturbed_runs": 0, "verified_runs": 2,
            }));
        }
    }
    serde_json::json!({
        "schema_version": 1, "tool": "hypclear", "command": "bench",
        "host": {"arch": "x86_64", "cpu_model": b.text(), "cpus": 2, "kernel": b.text(),
            "kvm_flavour": "pvm", "counter": "TSC", "counter_khz": 1000,
            "hypclear_version": "0.1.0", "git_commit": "x"},
        "privilege": "CPL3", "warmup": 1, "repeats": 2, "sessions": 3,
        "sides": sides, "cells": cells,
    })
}

/// Up to 4 sessions of up to 3 runs, between 1 and 9 GB/s.
fn samples(b: &mut Bytes) -> serde_json::Value {
    let (sessions, runs) = (b.byte() % 5, 1 + b.byte() % 3);
    let mut out = Vec::new();
    for s in 0..sessions {
        for r in 0..runs {
            let bps = 1e9 * (1.0 + f64::from(b.byte()) / 32.0);
            out.push(serde_json::json!({
                "session": s, "run": r, "bytes": 16384, "ns": 16384e9 / bps,
                "bytes_per_sec": bps, "ticks_per_byte": 1.0,
                "verified": false, "disturbed": false,
            }));
        }
    }
    out.into()
}

#[cfg(test)]
#[path = "../../../fuzz/inputs.rs"]
mod replay_inputs;

#[cfg(test)]
mod tests {

    use super::replay_inputs::inputs;

    fn replay(target: &str, harness: fn(&[u8])) {
        let files = inputs(target);
        assert!(files.len() >= 3, "fuzz/corpus/{target} is missing");
        for f in &files {
            let data = std::fs::read(f).unwrap();
            let r = std::panic::catch_unwind(|| harness(&data));
            assert!(r.is_ok(), "{} breaks an invariant", f.display());
        }
    }

    /// `compare`'s corpus and the inputs AFL's runs found, kept.
    #[test]
    fn compare_fuzz_inputs_replay() {
        replay("compare", super::compare_input);
    }

    #[test]
    fn writers_fuzz_inputs_replay() {
        replay("writers", super::writers);
    }
}
