//! `hypclear compare FILE` / `compare BASE.json NEW.json…`: the seed's
//! comparison table with session-level statistics (`bench::inference`).
//!
//! For every benchmark and result class (guest, host): the base median
//! throughput (bytes/sec like perf bench, or `--unit`), then per compared side the change with its confidence interval
//! and a mark, the Benjamini–Hochberg q value and the smallest detectable
//! change. Sessions are the units: one file interleaves its two link
//! configurations by session (paired t); separate files are independent
//! invocations (Welch on session means, host drift noted).
use crate::error::{Error, Result};
use crate::inference::{self, Comparison, Config, Design, Session};
use crate::sides::{self, PathKey};
use crate::stats;
use crate::table::right;
use crate::text::bounded_list;
use crate::units::Rate;
use crate::{BenchResult, Cell, SideInfo};
use comfy_table::{Cell as TCell, Table, presets};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The most `compare` reads of one file: a bench JSON of thousands of cells
/// with every raw sample is a few MB; past this it is not one (a 200 MB
/// file took 40 s and 1.4 GB before it was refused).
pub const MAX_INPUT: u64 = 64 << 20;

/// Read a bench JSON: bounded ([`MAX_INPUT`]), duplicate keys refused, its
/// `schema_version` checked ([`check_schema`]), and every string in it
/// sanitized ([`crate::text::sanitize_str`]) before anything prints it.
pub fn load(path: &Path) -> Result<BenchResult> {
    let bytes = crate::files::read_bounded(path, MAX_INPUT)?;
    parse(path, &bytes)
}

/// [`load`] of bytes already read (`path` names them in messages): pure,
/// so the fuzz harness drives it.
pub(crate) fn parse(path: &Path, bytes: &[u8]) -> Result<BenchResult> {
    let not_bench = |e: &dyn std::fmt::Display| Error::NotBenchJson {
        file: shown(path),
        why: crate::text::clip(&e.to_string(), MAX_STRING).into_owned(),
    };
    let mut v = match crate::files::parse_json(path, bytes) {
        Ok(v) => v,
        Err(crate::files::FileError::Malformed { detail, .. }) => return Err(not_bench(&detail)),
        Err(e) => return Err(e.into()),
    };
    check_schema(&v, path)?;
    sanitize_json(&mut v);
    let mut r: BenchResult = serde_json::from_value(v).map_err(|e| not_bench(&e))?;
    validate_throughput(&r, path)?;
    r.upgrade();
    Ok(r)
}

/// A path for a message, sanitized like the files' strings.
fn shown(path: &Path) -> String {
    crate::text::sanitize_str(&path.to_string_lossy()).into_owned()
}

/// The versions `compare` reads: every one from 0 (documents from before
/// the field) up to the one this hypclear writes, which only ever added
/// fields since; a newer document may have changed a field's meaning, so
/// it is refused rather than misread.
fn check_schema(v: &serde_json::Value, path: &Path) -> Result<()> {
    let Some(doc) = v.as_object() else {
        return Err(Error::NotBenchJson {
            file: shown(path),
            why: "not a JSON object".into(),
        });
    };
    let version = match doc.get("schema_version") {
        None => 0,
        Some(n) => n.as_u64().ok_or_else(|| Error::BadSchemaVersion {
            file: shown(path),
            value: crate::text::sanitize_str(&n.to_string()).into_owned(),
        })?,
    };
    let supported = crate::files::SCHEMA_VERSION;
    if version > supported {
        return Err(Error::NewerSchema {
            file: shown(path),
            version,
            supported,
        });
    }
    Ok(())
}

/// Most characters `compare` keeps of one string of a file (names,
/// labels and kernel paths are far shorter) or of a parser's error: a
/// longer one is cut, so no message or cell carries a damaged file's
/// megabyte string.
const MAX_STRING: usize = 200;

/// Every string of the document, keys included, made safe to print (the
/// one sanitizer, applied where file text enters) and cut to
/// [`MAX_STRING`] characters.
fn sanitize_json(v: &mut serde_json::Value) {
    use serde_json::Value;
    use std::borrow::Cow;
    let clean = |s: &str| match crate::text::sanitize_str(s) {
        Cow::Borrowed(b) => crate::text::clip(b, MAX_STRING).into_owned(),
        Cow::Owned(o) => crate::text::clip(&o, MAX_STRING).into_owned(),
    };
    match v {
        Value::String(s) => *s = clean(s),
        Value::Array(a) => a.iter_mut().for_each(sanitize_json),
        Value::Object(o) => {
            let map = std::mem::take(o);
            for (k, mut x) in map {
                sanitize_json(&mut x);
                o.insert(clean(&k), x);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Above any memory bandwidth a machine has (bytes/s): a sample beyond it
/// is a damaged file, and would overflow the statistics (1e308 panicked).
const MAX_BYTES_PER_SEC: f64 = 10e12;

/// Every throughput must be a positive finite number below
/// [`MAX_BYTES_PER_SEC`]: a zero, negative or NaN sample would turn the
/// change into NaN% or a sign flip, a huge one into nonsense percentages.
fn validate_throughput(r: &BenchResult, path: &Path) -> Result<()> {
    let physical = |x: f64| x.is_finite() && x > 0.0 && x < MAX_BYTES_PER_SEC;
    for c in &r.cells {
        for (side, samples) in [("guest", &c.guest), ("host", &c.host)] {
            let bad = samples.iter().find_map(|s| {
                std::iter::once(s.bytes_per_sec)
                    .chain(s.per_vcpu_bytes_per_sec.iter().copied())
                    .find(|x| !physical(*x))
                    .map(|x| (s, x))
            });
            if let Some((s, x)) = bad {
                return Err(Error::ImplausibleRate {
                    file: shown(path),
                    row: c.axes.label_with(true),
                    side,
                    session: s.session,
                    run: s.run,
                    value: x,
                });
            }
        }
    }
    Ok(())
}

/// The key rows are matched on: the side (when files hold several and
/// are compared side by side) and the [`PathKey`]: routine, size, chunk,
/// the run axes and the kernel path (a built-in's variant name; a kernel
/// routine's equivalent built-in variant).
type Key = (Option<usize>, PathKey);

fn key(r: &BenchResult, c: &Cell, with_side: bool, by_path: bool) -> Key {
    (
        with_side.then_some(c.axes.side),
        PathKey::of(&r.side_of(c), &c.axes, by_path),
    )
}

/// The side names of a result, in the order they were run.
fn side_names(r: &BenchResult) -> Vec<String> {
    r.sides.iter().map(|s| s.name.clone()).collect()
}

/// How rows were matched, for the header; a kernel side's paths listed.
fn matching_note(files: &[(PathBuf, BenchResult)], mixed: bool) -> String {
    if !mixed {
        return "rows matched by routine, size, chunk, order, fill, backing and variant".into();
    }
    let mut paths = Vec::new();
    for (_, r) in files {
        for s in r.sides.iter().filter(|s| !s.is_builtin()) {
            let p: Vec<String> = s
                .kernel_paths
                .iter()
                .map(|(f, v)| format!("{f} -> {v}"))
                .collect();
            paths.push(format!(
                "{}: {}",
                s.name,
                if p.is_empty() {
                    "not recorded (variant names only)".into()
                } else {
                    bounded_list(&p, ", ")
                }
            ));
        }
    }
    format!(
        "rows matched by routine, size, chunk, order, fill, backing and kernel path: a kernel \
         routine lines up with the built-in variant that follows the same path with the same \
         alternatives decision ({}); x86 clear_page erms/rep/orig by name",
        bounded_list(&paths, "; ")
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Markdown,
    /// reStructuredText grid tables, the style review tables on the lists use.
    Rst,
}

/// What `hypclear compare` was asked for (built by the CLI from its
/// options).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompareOptions {
    /// Significance level (q values) and 1 - confidence of the intervals.
    pub alpha: f64,
    /// Equivalence margin as a fraction (0.02 = +-2%).
    pub margin: f64,
    /// Compare files from different hosts in one table.
    pub allow_different_hosts: bool,
    pub format: Format,
    /// Throughput unit of the tables.
    pub unit: Rate,
}

/// One side of one row: the sessions of a result class of a cell.
fn sessions(c: &Cell, class: Class) -> Vec<Session> {
    match class {
        Class::Guest => c.guest_sessions(),
        Class::Host => c.host_sessions(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Guest,
    Host,
}

impl Class {
    fn name(self, unit: Rate) -> String {
        match self {
            Class::Guest => format!("guest {}", unit.label()),
            Class::Host => format!("host {}", unit.label()),
        }
    }
}

/// Median of all runs of a side, bytes/sec.
fn median_bps(s: &[Session]) -> Option<f64> {
    let all: Vec<f64> = s.iter().flat_map(|x| x.runs.iter().copied()).collect();
    (!all.is_empty()).then(|| stats::median(&all))
}

/// A row's comparison, or why there is none.
#[derive(Debug, Clone)]
struct Col {
    cmp: std::result::Result<Comparison, String>,
    /// Guest rows of separate invocations when the host row moved.
    note: String,
}

#[derive(Debug, Clone)]
struct Row {
    label: String,
    class: Class,
    /// Median throughput of the base side, bytes/sec.
    base_bps: f64,
    cols: Vec<Col>,
    /// Index of the same cell's host row (guest rows only).
    host_row: Option<usize>,
    /// The sides' sessions per column (guest, host) for the drift check.
    sides: Vec<(Vec<Session>, Vec<Session>)>,
}

/// Compare two sides of a row with the design's test; a side with too few
/// sessions gives the reason instead.
fn compare_sides(
    a: &[Session],
    b: &[Session],
    cfg: &Config,
) -> std::result::Result<Comparison, String> {
    let r = inference::compare(a, b, cfg);
    match (r, cfg.design) {
        // Sessions that do not pair up (a side lost some): test them as
        // independent sessions rather than not at all.
        (Err(inference::Error::Unpaired { .. }), Design::Interleaved) => {
            let c = Config {
                design: Design::Independent,
                ..*cfg
            };
            inference::compare(a, b, &c).map_err(|e| e.to_string())
        }
        (r, _) => r.map_err(|e| e.to_string()),
    }
}

/// Relative change of the plain means when no test is possible.
fn plain_change(a: &[Session], b: &[Session]) -> Option<f64> {
    let m = |s: &[Session]| {
        let v: Vec<f64> = s.iter().flat_map(|x| x.runs.iter().copied()).collect();
        (!v.is_empty()).then(|| stats::mean(&v))
    };
    Some((m(b)? / m(a)? - 1.0) * 100.0)
}

/// The options are in range and the files come from one host (unless
/// allowed); the base file.
fn validate<'a>(
    files: &'a [(PathBuf, BenchResult)],
    opts: &CompareOptions,
) -> Result<(&'a PathBuf, &'a BenchResult)> {
    let (alpha, margin) = (opts.alpha, opts.margin);
    let (base_path, base) = files.first().map(|(p, r)| (p, r)).ok_or(Error::NoBase)?;
    if !(alpha > 0.0 && alpha < 0.5) {
        return Err(Error::Alpha(alpha));
    }
    if !(0.0..1.0).contains(&margin) {
        return Err(Error::Margin(margin));
    }
    for (p, r) in &files[1..] {
        if !opts.allow_different_hosts && !base.host.same_host(&r.host) {
            let id = |h: &crate::vmm::host::HostInfo| {
                format!("{} / {} / {}", h.cpu_model, h.kernel, h.kvm_flavour)
            };
            return Err(Error::DifferentHosts {
                file: shown(p),
                base: shown(base_path),
                host: id(&r.host),
                base_host: id(&base.host),
            });
        }
    }
    Ok((base_path, base))
}

/// Whether built-in and kernel sides meet in the files (rows then line up
/// by kernel path).
fn mixed(files: &[(PathBuf, BenchResult)]) -> bool {
    files
        .iter()
        .any(|(_, r)| r.sides.iter().any(SideInfo::is_builtin))
        && files
            .iter()
            .any(|(_, r)| r.sides.iter().any(|s| !s.is_builtin()))
}

/// Benjamini-Hochberg across the rows of each column, then the verdicts.
fn decide_columns(rows: &mut [Row], columns: usize, cfg: &Config) {
    for j in 0..columns {
        let idx: Vec<usize> = (0..rows.len())
            .filter(|&i| rows[i].cols[j].cmp.is_ok())
            .collect();
        let mut cs: Vec<Comparison> = idx
            .iter()
            .filter_map(|&i| rows[i].cols[j].cmp.clone().ok())
            .collect();
        inference::decide_rows(&mut cs, cfg);
        for (&i, c) in idx.iter().zip(cs) {
            rows[i].cols[j].cmp = Ok(c);
        }
    }
}

/// Build the comparison table; refuses files whose axes do not line up or
/// that come from different hosts (unless allowed).
///
/// One file: its two link configurations against each other (sessions
/// interleaved ABBA in one invocation: paired t on session pairs). Several
/// files: each against the first (separate invocations: Welch on session
/// means, with the host rows as a drift check).
pub fn compare(files: &[(PathBuf, BenchResult)], opts: &CompareOptions) -> Result<String> {
    // Files from before sides get theirs (idempotent for newer files).
    let files: &[(PathBuf, BenchResult)] = &files
        .iter()
        .map(|(p, r)| {
            let mut r = r.clone();
            r.upgrade();
            (p.clone(), r)
        })
        .collect::<Vec<_>>();
    let (base_path, base) = validate(files, opts)?;
    let design = if files.len() == 1 {
        Design::Interleaved
    } else {
        Design::Independent
    };
    let cfg = Config {
        alpha: opts.alpha,
        margin: opts.margin,
        design,
        ..Config::default()
    };
    let (names, mut rows, mut notes) = if files.len() == 1 {
        within_file(base_path, base, &cfg)?
    } else {
        across_files(files, &cfg)?
    };
    notes.insert(0, matching_note(files, mixed(files)));
    notes.extend(files.iter().filter_map(|(_, r)| dc_zva_note(r)));
    if rows.is_empty() {
        return Err(Error::NothingLinesUp {
            notes: bounded_list(&notes, "; "),
        });
    }
    decide_columns(&mut rows, names.len() - 1, &cfg);
    if design == Design::Independent {
        drift_notes(&mut rows, &cfg);
    }
    let table = Rendering {
        files,
        names: &names,
        rows: &rows,
        notes_above: &notes,
        cfg: &cfg,
        format: opts.format,
        unit: opts.unit,
    };
    Ok(table.render())
}

/// A reStructuredText grid table, as review tables on the lists use: '+'
/// at every joint of every rule, '=' under the header.
const RST_GRID: comfy_table::TableStyle = {
    use comfy_table::{ContentLineStyle, LineStyle, TableStyle};
    let rule = LineStyle::new('+', '-', '+', '+');
    let content = ContentLineStyle::new('|', '|', '|');
    TableStyle::new()
        .top_border(rule)
        .header_lines(content)
        .header_separator(LineStyle::new('+', '=', '+', '+'))
        .content_lines(content)
        .row_separator(rule)
        .bottom_border(rule)
};

/// "Results for ...": the machine a group of files ran on, as the review
/// tables on the lists head them.
fn host_heading(h: &crate::vmm::host::HostInfo) -> String {
    format!(
        "Results for {} ({}, kernel {}, KVM {}):",
        h.cpu_model, h.arch, h.kernel, h.kvm_flavour
    )
}

/// Files from several machines: one comparison per host (files grouped by
/// host fingerprint, in the order given; each group's first file is its
/// base, a group of one file compares its two link configurations), each
/// under a "Results for <host>:" heading.
pub fn compare_per_host(files: &[(PathBuf, BenchResult)], opts: &CompareOptions) -> Result<String> {
    let opts = CompareOptions {
        allow_different_hosts: false,
        ..*opts
    };
    let mut groups: Vec<Vec<(PathBuf, BenchResult)>> = Vec::new();
    for f in files {
        match groups.iter_mut().find(|g| g[0].1.host.same_host(&f.1.host)) {
            Some(g) => g.push(f.clone()),
            None => groups.push(vec![f.clone()]),
        }
    }
    let mut out = String::new();
    for g in &groups {
        out.push_str(&host_heading(&g[0].1.host));
        out.push_str("\n\n");
        out.push_str(&compare(g, &opts)?);
        out.push('\n');
    }
    Ok(out)
}

/// The side names (A first), the rows of a comparison and notes on
/// cells that found no counterpart.
type Named = (Vec<String>, Vec<Row>, Vec<String>);

/// One file, several sides (link configurations, kernel trees, built-ins
/// beside a kernel): the first side is the base, each other side a column,
/// rows matched by [`PathKey`].
fn within_file(path: &Path, r: &BenchResult, cfg: &Config) -> Result<Named> {
    let names = side_names(r);
    if names.len() < 2 {
        return Err(Error::OneSide {
            file: shown(path),
            count: names.len(),
            names: bounded_list(&names, ", "),
        });
    }
    let mixed = sides::mixed(r);
    let per_side: Vec<Vec<(PathKey, &Cell)>> =
        (0..names.len()).map(|j| sides::by_path(r, j)).collect();
    let mut rows = Vec::new();
    let mut unmatched = Vec::new();
    for (k, a) in &per_side[0] {
        let others: Vec<Option<&Cell>> = per_side[1..]
            .iter()
            .map(|cells| cells.iter().find(|(x, _)| x == k).map(|(_, c)| *c))
            .collect();
        if others.iter().any(Option::is_none) {
            // Not an error: the sides' variant lists differ by design (in
            // the memset configuration clear_page's variants are memset's;
            // a kernel takes one path). Listed below the table.
            unmatched.push(format!("{} {}", names[0], a.axes.label_with(false)));
            continue;
        }
        let others: Vec<&Cell> = others.into_iter().flatten().collect();
        let label = if mixed {
            k.label()
        } else {
            a.axes.label_with(false)
        };
        push_rows(&mut rows, &label, a, &others, cfg);
    }
    for (j, cells) in per_side.iter().enumerate().skip(1) {
        for (k, c) in cells {
            if !per_side[0].iter().any(|(x, _)| x == k) {
                unmatched.push(format!("{} {}", names[j], c.axes.label_with(false)));
            }
        }
    }
    Ok((names, rows, unmatched_notes(unmatched)))
}

/// What the columns of a `--dc-zva both` bench mean (the seed's vanilla,
/// patch, stnp and patch_stp), or `None` when no side records a DC ZVA state.
fn dc_zva_note(r: &BenchResult) -> Option<String> {
    let with = |d: crate::arch::DcZva| -> Vec<&str> {
        r.sides
            .iter()
            .filter(|s| s.dc_zva == Some(d))
            .map(|s| s.name.as_str())
            .collect()
    };
    let (on, off) = (with(crate::arch::DcZva::On), with(crate::arch::DcZva::Off));
    if on.is_empty() && off.is_empty() {
        return None;
    }
    Some(format!(
        "DC ZVA allowed (EL1): {}; prohibited (EL0, DCZID_EL0.DZP=1: clear_page's STNP loop, \
         memset's STP loop): {} (with two kernel trees: the seed's vanilla, patch, stnp, patch_stp)",
        if on.is_empty() {
            "-".into()
        } else {
            on.join(", ")
        },
        if off.is_empty() {
            "-".into()
        } else {
            off.join(", ")
        },
    ))
}

fn unmatched_notes(unmatched: Vec<String>) -> Vec<String> {
    if unmatched.is_empty() {
        return Vec::new();
    }
    vec![format!(
        "{} cell(s) without a counterpart on every side, not compared (variants one side \
         does not have, e.g. clear_page in the memset configuration is memset, or a path \
         the kernel does not take): {}",
        unmatched.len(),
        bounded_list(&unmatched, "; ")
    )]
}

/// Each cell's index in a file's cells, by its [`Key`].
type Index = BTreeMap<Key, usize>;

/// The [`Index`] of `r`'s cells.
fn cell_index(r: &BenchResult, with_side: bool, mixed: bool) -> Index {
    r.cells
        .iter()
        .enumerate()
        .map(|(i, c)| (key(r, c, with_side, mixed), i))
        .collect()
}

/// Mixed files: the cells of each later file (`idx`: each file's
/// [`Index`]) without a counterpart in the first, to list as unmatched.
fn not_in_first(files: &[(PathBuf, BenchResult)], idx: &[Index]) -> Vec<String> {
    let mut unmatched = Vec::new();
    for ((p, r), m) in files.iter().zip(idx).skip(1) {
        for k in m.keys().filter(|k| !idx[0].contains_key(*k)) {
            unmatched.push(format!(
                "{} {}",
                shown(p),
                r.cells[m[k]].axes.label_with(false)
            ));
        }
    }
    unmatched
}

/// Files of one kind: every later file has exactly the first file's cells
/// (`idx`: each file's [`Index`]), else a usage error names one that one
/// has and the other lacks.
fn check_lined_up(files: &[(PathBuf, BenchResult)], idx: &[Index], single: bool) -> Result<()> {
    let ((base_path, base), base_idx) = (&files[0], &idx[0]);
    for ((p, r), m) in files.iter().zip(idx).skip(1) {
        let lacking =
            |from: &Index, to: &Index| from.keys().find(|k| !to.contains_key(*k)).cloned();
        let label = |r: &BenchResult, m: &Index, k: &Key| r.cells[m[k]].axes.label_with(!single);
        if let Some(k) = lacking(base_idx, m) {
            return Err(Error::AxesDiffer {
                has: shown(base_path),
                cell: label(base, base_idx, &k),
                lacks: shown(p),
            });
        }
        if let Some(k) = lacking(m, base_idx) {
            return Err(Error::AxesDiffer {
                has: shown(p),
                cell: label(r, m, &k),
                lacks: shown(base_path),
            });
        }
    }
    Ok(())
}

/// Several files: each against the first, rows keyed by [`Key`] (the
/// side only when some file holds several). Built-in and kernel files
/// (`--allow-mixed`) line up by kernel path; cells without a counterpart
/// are listed, not compared.
fn across_files(files: &[(PathBuf, BenchResult)], cfg: &Config) -> Result<Named> {
    let (base_path, base) = &files[0];
    let single = files.iter().all(|(_, r)| r.sides.len() == 1);
    let with_side = !single;
    let mixed = mixed(files);
    let idx: Vec<Index> = files
        .iter()
        .map(|(_, r)| cell_index(r, with_side, mixed))
        .collect();
    let base_idx = &idx[0];
    let mut unmatched = if mixed {
        not_in_first(files, &idx)
    } else {
        check_lined_up(files, &idx, single)?;
        Vec::new()
    };
    let names = file_names(files, single);
    let mut rows = Vec::new();
    for (k, &bi) in base_idx {
        let others: Option<Vec<&Cell>> = files[1..]
            .iter()
            .zip(&idx[1..])
            .map(|((_, r), m)| m.get(k).map(|&i| &r.cells[i]))
            .collect();
        let a = &base.cells[bi];
        let Some(others) = others else {
            unmatched.push(format!("{} {}", shown(base_path), a.axes.label_with(false)));
            continue;
        };
        let label = if mixed {
            k.1.label()
        } else {
            a.axes.label_with(!single)
        };
        push_rows(&mut rows, &label, a, &others, cfg);
    }
    Ok((names, rows, unmatched_notes(unmatched)))
}

/// Column names of several files: each file's stem, with its side when
/// every file holds one side.
fn file_names(files: &[(PathBuf, BenchResult)], single: bool) -> Vec<String> {
    files
        .iter()
        .map(|(p, r)| {
            let stem = p
                .file_stem()
                .map(|s| crate::text::sanitize_str(&s.to_string_lossy()).into_owned())
                .unwrap_or_default();
            if single {
                format!("{stem} ({})", side_names(r).join(","))
            } else {
                stem
            }
        })
        .collect()
}

/// The guest and host rows of one cell: `a` against each of `others`.
fn push_rows(rows: &mut Vec<Row>, label: &str, a: &Cell, others: &[&Cell], cfg: &Config) {
    let guest_at = rows.len();
    for class in [Class::Guest, Class::Host] {
        // A kernel side has no host baseline (its routines exist only in
        // the guest image): no host row to compare.
        if class == Class::Host && others.iter().any(|b| b.host.is_empty()) {
            continue;
        }
        let sa = sessions(a, class);
        // A cell without figures (unmeasurable under load, too few runs)
        // is a row that says so, not a test on what is left.
        let base_bps = match (median_bps(&sa), a.state.is_measured()) {
            (Some(m), _) => m,
            (None, false) => f64::NAN,
            (None, true) => continue,
        };
        let mut cols = Vec::new();
        let mut sides = Vec::new();
        for b in others {
            let sb = sessions(b, class);
            let cmp = match (a.state.is_measured(), b.state.is_measured()) {
                (true, true) => compare_sides(&sa, &sb, cfg),
                (false, _) => Err(format!("base {}", a.state.text())),
                (true, false) => Err(b.state.text()),
            };
            cols.push(Col {
                cmp,
                note: String::new(),
            });
            sides.push((sa.clone(), sb));
        }
        rows.push(Row {
            label: label.to_string(),
            class,
            base_bps,
            cols,
            host_row: None,
            sides,
        });
    }
    let n = rows.len();
    if n - guest_at == 2 && rows[guest_at].class == Class::Guest {
        rows[guest_at].host_row = Some(guest_at + 1);
    }
}

/// Separate invocations: where a cell's host row moved ((R) or (I)), the
/// guest row says so and shows the guest/host-normalized change.
fn drift_notes(rows: &mut [Row], cfg: &Config) {
    for i in 0..rows.len() {
        let Some(h) = rows[i].host_row else { continue };
        for j in 0..rows[i].cols.len() {
            let moved = rows[h].cols[j]
                .cmp
                .as_ref()
                .is_ok_and(|c| c.verdict.moved());
            if !moved {
                continue;
            }
            let (ga, gb) = &rows[i].sides[j];
            let (ha, hb) = &rows[h].sides[j];
            let note = match inference::host_drift(ha, hb, ga, gb, cfg) {
                Ok(d) => match d.normalized {
                    Some(n) => format!(
                        "host moved {:+.1}%; guest/host-normalized {}",
                        d.host.change_pct,
                        n.cell_text()
                    ),
                    None => format!("host moved {:+.1}%", d.host.change_pct),
                },
                Err(_) => "host moved".into(),
            };
            rows[i].cols[j].note = note;
        }
    }
}

fn precondition(r: &BenchResult) -> String {
    match r.cache {
        Some(c) => c.describe().to_string(),
        None => "not stated (file written before --cache)".into(),
    }
}

/// One comparison to print: the files, the column names, the rows and the
/// notes above the table, with the statistics and the output format.
struct Rendering<'a> {
    files: &'a [(PathBuf, BenchResult)],
    names: &'a [String],
    rows: &'a [Row],
    notes_above: &'a [String],
    cfg: &'a Config,
    format: Format,
    unit: Rate,
}

/// Guest rows per verdict mark (`""` for unmarked).
type Marks<'m> = BTreeMap<&'m str, usize>;

impl Rendering<'_> {
    /// The header lines, the table and the footer of one comparison.
    fn render(&self) -> String {
        let (table, marks) = self.table();
        let mut out = self.title();
        out.push_str(&self.test_line());
        for n in self.notes_above {
            out.push_str(&format!("{n}\n"));
        }
        out.push_str(&self.precondition_line());
        out.push_str(&self.partial_lines());
        out.push_str(&format!(
            "change = B against A from the mean log session means, with its {:.0}% confidence interval; \
             q = Benjamini-Hochberg over the rows; MDE = smallest change this design detects with \
             power 0.8 at alpha {}\n\n",
            (1.0 - self.cfg.alpha) * 100.0,
            self.cfg.alpha
        ));
        out.push_str(&table.to_string());
        out.push_str(&self.footer(&marks));
        out
    }

    /// A note column only when some row has a note (host drift, untested).
    fn has_notes(&self) -> bool {
        self.rows
            .iter()
            .any(|r| r.cols.iter().any(|c| c.cmp.is_err() || !c.note.is_empty()))
    }

    /// A cell's text from the files (a name, a label, a note): markdown
    /// escapes `|`, which would end the cell and add a column.
    fn cell(&self, text: &str) -> String {
        match self.format {
            Format::Markdown => text.replace('|', "\\|"),
            Format::Text | Format::Rst => text.to_string(),
        }
    }

    fn header(&self, notes: bool) -> Vec<String> {
        let mut header = vec![
            "Benchmark".to_string(),
            "Result class".into(),
            format!("Base {} [{}]", self.unit.label(), self.cell(&self.names[0])),
        ];
        for n in &self.names[1..] {
            header.push(format!(
                "Change {} [{:.0}% CI]",
                self.cell(n),
                (1.0 - self.cfg.alpha) * 100.0
            ));
            header.push("q".into());
            header.push("MDE".into());
            if notes {
                header.push("Note".into());
            }
        }
        header
    }

    /// The table, and the guest rows counted by mark.
    fn table(&self) -> (Table, Marks<'static>) {
        let notes = self.has_notes();
        let mut t = Table::new();
        t.load_style(match self.format {
            Format::Text => presets::UTF8_FULL_CONDENSED,
            Format::Markdown => presets::ASCII_MARKDOWN,
            Format::Rst => RST_GRID,
        });
        t.set_header(self.header(notes));
        let mut marks = Marks::new();
        for r in self.rows {
            t.add_row(self.row(r, notes, &mut marks));
        }
        (t, marks)
    }

    /// One row: the benchmark, its class and base, then per column the
    /// change, q and MDE (and the note).
    fn row(&self, r: &Row, notes: bool, marks: &mut Marks<'static>) -> Vec<TCell> {
        let mut row = vec![
            TCell::new(self.cell(&r.label)),
            TCell::new(r.class.name(self.unit)),
            right(match r.base_bps.is_finite() {
                true => self.unit.format(r.base_bps),
                false => "-".into(),
            }),
        ];
        for (j, c) in r.cols.iter().enumerate() {
            match &c.cmp {
                Ok(x) => {
                    if r.class == Class::Guest {
                        *marks.entry(x.verdict.mark()).or_default() += 1;
                    }
                    row.extend(tested_cells(x));
                }
                Err(_) => {
                    let (sa, sb) = &r.sides[j];
                    row.extend(untested_cells(sa, sb));
                }
            }
            if notes {
                row.push(TCell::new(self.cell(match &c.cmp {
                    Err(why) if c.note.is_empty() => why,
                    _ => &c.note,
                })));
            }
        }
        row
    }

    /// "hypclear compare: ..." with what is compared against what.
    fn title(&self) -> String {
        let (files, names) = (self.files, self.names);
        let what = if files.len() == 1 {
            format!(
                "{}: {} (A) vs {} ({}), sessions interleaved in one invocation",
                shown(&files[0].0),
                names[0],
                names[1..].join(", "),
                if names.len() == 2 {
                    "B"
                } else {
                    "each a column"
                }
            )
        } else {
            format!(
                "{} vs {}",
                shown(&files[0].0),
                files[1..]
                    .iter()
                    .map(|(p, _)| shown(p).to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        format!("hypclear compare: {what}\n")
    }

    /// "test: ...": the design's test and what it controls.
    fn test_line(&self) -> String {
        let method = inference::Method::of(self.cfg.design).name();
        format!(
            "test: {method}{}\n",
            if self.cfg.design == Design::Independent {
                " (separate invocations: drift between them is not controlled; the host rows show it, \
                 and guest rows say when the host moved); for a paired test run both sides in one \
                 invocation (`bench --config both`, then `compare FILE`)"
            } else {
                " (each session of A paired with the session of B next to it, ABBA order)"
            }
        )
    }

    fn precondition_line(&self) -> String {
        let mut pre: Vec<String> = self.files.iter().map(|(_, r)| precondition(r)).collect();
        pre.dedup();
        format!(
            "precondition: {}\n",
            if pre.len() == 1 {
                pre[0].clone()
            } else {
                format!("DIFFERENT between the files ({})", pre.join(" / "))
            }
        )
    }

    /// A note per partial file.
    fn partial_lines(&self) -> String {
        let mut out = String::new();
        for (p, r) in self.files.iter().filter(|(_, r)| r.partial) {
            let done = r.cells.iter().filter(|c| !c.guest.is_empty()).count();
            out.push_str(&format!(
                "note: {} is partial (the run did not finish; {done} of {} cells have samples)\n",
                shown(p),
                r.cells.len()
            ));
        }
        out
    }

    /// The legend of the marks and the guest rows counted by mark.
    fn footer(&self, marks: &Marks) -> String {
        let (alpha, m) = (self.cfg.alpha, self.cfg.margin * 100.0);
        let count = |k: &str| marks.get(k).copied().unwrap_or(0);
        format!(
            "\n\n(=) equivalent: the interval lies inside +-{m:.1}% (--margin); \
             (R) regression / (I) improvement: q < {alpha} and the interval excludes 0 (and is not inside the margin); \
             no mark: the data cannot tell (more sessions narrow the interval)\n\
             guest rows: {} (R), {} (I), {} (=), {} unmarked\n",
            count("(R)"),
            count("(I)"),
            count("(=)"),
            count("")
        )
    }
}

/// A tested column: the change with its interval and mark, q and MDE.
fn tested_cells(x: &Comparison) -> [TCell; 3] {
    [
        right(x.cell_text()),
        right(format!("{:.3}", x.q)),
        right(if x.mde_pct.is_finite() {
            format!("{:.1}%", x.mde_pct)
        } else {
            "-".into()
        }),
    ]
}

/// An untested column: the change of the plain means, no q, no MDE.
fn untested_cells(sa: &[Session], sb: &[Session]) -> [TCell; 3] {
    let change = plain_change(sa, sb)
        .map(|c| format!("{} (untested)", crate::units::format_pct(c)))
        .unwrap_or_else(|| "-".into());
    [right(change), right("-"), right("-")]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vmm::host::HostInfo;
    use crate::{Axes, Sample};

    fn opts(allow_different_hosts: bool, format: Format, unit: Rate) -> CompareOptions {
        CompareOptions {
            alpha: 0.05,
            margin: 0.02,
            allow_different_hosts,
            format,
            unit,
        }
    }

    fn host(model: &str) -> HostInfo {
        HostInfo {
            arch: "x86_64".into(),
            cpu_model: model.into(),
            cpus: 2,
            kernel: "6.1".into(),
            kvm_flavour: crate::arch::KvmFlavour::Pvm,
            kvm_paging: crate::arch::PagingMode::Shadow,
            counter: "TSC".into(),
            counter_khz: 1000,
            hypclear_version: "0".into(),
            git_commit: "x".into(),
        }
    }

    fn axes(config: &str, chunk: u64) -> Axes {
        Axes::test_memset(
            serde_json::from_value(serde_json::json!(config)).unwrap(),
            chunk,
        )
    }

    /// `sessions[s][r]`: throughput of run r of session s.
    fn samples(sessions: &[Vec<f64>]) -> Vec<Sample> {
        let mut out = Vec::new();
        for (s, runs) in sessions.iter().enumerate() {
            for (i, v) in runs.iter().enumerate() {
                out.push(Sample {
                    session: s as u64,
                    run: i as u64,
                    bytes: 1 << 20,
                    ns: 1.0,
                    bytes_per_sec: *v,
                    ticks_per_byte: 1.0,
                    verified: false,
                    disturbed: false,
                    emulated: false,
                    preempted: 0,
                    off_cpu_ns: 0.0,
                    lost_time: false,
                    per_vcpu_bytes_per_sec: vec![],
                    kvm_stats: Default::default(),
                });
            }
        }
        out
    }

    /// 4 sessions x 3 runs around `level` with a session effect and a
    /// little deterministic noise (`phase` shifts it).
    fn noisy(level: f64, phase: f64) -> Vec<Vec<f64>> {
        (0..4)
            .map(|s| {
                let sess = 1.0 + 0.004 * ((s as f64 * 1.7 + phase).sin());
                (0..3)
                    .map(|r| {
                        level * sess * (1.0 + 0.003 * ((r as f64 * 2.3 + s as f64 + phase).cos()))
                    })
                    .collect()
            })
            .collect()
    }

    fn file(cells: Vec<Cell>, model: &str, sessions: u64) -> BenchResult {
        BenchResult {
            tool: "hypclear".into(),
            command: "bench".into(),
            host: host(model),
            privilege: "CPL3".into(),
            warmup: 1,
            repeats: 3,
            max_runs: 12,
            priority: None,
            nice: None,
            reproducibility: None,
            sessions,
            precision: None,
            cache: Some(crate::Cache::Cold),
            max_warmup: 20,
            session_setup_seconds: 0.0,
            partial: false,
            partial_reason: None,
            sides: vec![],
            kernel: None,
            cells,
            explain: vec![],
            ab: vec![],
        }
    }

    fn result(config: &str, chunk: u64, sessions: &[Vec<f64>], model: &str) -> BenchResult {
        let host = samples(&noisy(10.0, 0.5));
        file(
            vec![Cell::new(axes(config, chunk), samples(sessions), host)],
            model,
            sessions.len() as u64,
        )
    }

    fn one(values: &[f64]) -> Vec<Vec<f64>> {
        vec![values.to_vec()]
    }

    #[test]
    fn zero_negative_or_non_finite_throughput_is_rejected_at_load() {
        let p = Path::new("x.json");
        assert!(
            validate_throughput(&result("vanilla", 4096, &one(&[100.0, 99.0]), "cpu"), p).is_ok()
        );
        // Issue 25 case 5: 1e308 panicked in statrs, 1e30 printed
        // "+3667336667216705224704.00%".
        for v in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e308, 1e30, 10e12] {
            let r = result("vanilla", 4096, &one(&[100.0, v]), "cpu");
            match validate_throughput(&r, p) {
                Err(e @ Error::ImplausibleRate { .. }) => {
                    let m = e.to_string();
                    assert!(
                        m.starts_with("x.json: row memset") && m.contains("session 0 run 1"),
                        "{m}"
                    )
                }
                other => panic!("{v} accepted: {other:?}"),
            }
        }
        assert!(
            validate_throughput(&result("vanilla", 4096, &one(&[100.0, 9e12]), "cpu"), p).is_ok()
        );
    }

    #[test]
    fn marks_only_significant_changes() {
        let base = result("vanilla", 4096, &noisy(100.0, 0.0), "cpu");
        let same = result("memset", 4096, &noisy(100.0, 1.0), "cpu");
        let slow = result("memset", 4096, &noisy(80.0, 2.0), "cpu");
        let files = vec![
            (PathBuf::from("base.json"), base),
            (PathBuf::from("same.json"), same),
            (PathBuf::from("slow.json"), slow),
        ];
        let out = compare(&files, &opts(false, Format::Markdown, Rate::Giga)).unwrap();
        let guest = out
            .lines()
            .find(|l| l.contains("guest GB/s"))
            .expect("a guest row");
        // Columns: same (change, q, MDE), then slow (no notes: no column).
        let cols: Vec<&str> = guest.split('|').map(str::trim).collect();
        assert!(cols[4].ends_with("(=)"), "{out}");
        let change: f64 = cols[7].split('%').next().unwrap().parse().unwrap();
        assert!(
            (change + 20.0).abs() < 0.5 && cols[7].ends_with("(R)"),
            "{out}"
        );
        assert!(!out.contains("% (I)"), "{out}");
        assert!(out.contains("q < 0.05"), "{out}");
        assert!(out.contains("Welch t on log session means"), "{out}");
        assert!(out.contains("guest rows: 1 (R), 0 (I), 1 (=)"), "{out}");
        assert!(out.contains("MDE"), "{out}");
    }

    /// One file with both configurations, as `bench --config both` writes.
    fn paired() -> BenchResult {
        let a = noisy(100.0, 0.0);
        let host = samples(&noisy(10.0, 0.5));
        let mut r = file(
            vec![
                Cell::new(axes("vanilla", 4096), samples(&a), host.clone()),
                Cell::new(axes("memset", 4096), samples(&a), host),
            ],
            "cpu",
            4,
        );
        r.upgrade();
        r
    }

    /// `text` as a file of its own (removed with the test's directory).
    fn written(tag: &str, text: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("hypclear-compare-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("in.json");
        std::fs::write(&p, text).unwrap();
        p
    }

    /// Issue 38: ESC/OSC/BEL/RLO/newlines in side names reached the
    /// terminal, and a newline forged a table row.
    #[test]
    fn strings_from_the_files_reach_the_output_escaped() {
        let mut v = serde_json::to_value(paired()).unwrap();
        v["sides"][1]["name"] = "memset\n(I) forged row \x1b]0;owned\x07\u{202e}x\0".into();
        v["host"]["cpu_model"] = "cpu\x1b[2J".into();
        let p = written("forged", &v.to_string());
        let r = load(&p).unwrap();
        for format in [Format::Text, Format::Markdown, Format::Rst] {
            let out = compare(&[(p.clone(), r.clone())], &opts(false, format, Rate::Giga)).unwrap();
            assert!(
                !out.lines()
                    .any(|l| l.trim_start_matches(['|', ' ']).starts_with("(I) forged")),
                "{out}"
            );
            let raw = out
                .chars()
                .find(|&c| (c.is_control() && c != '\n') || c == '\u{202e}');
            assert_eq!(raw, None, "{out}");
            assert!(
                out.contains("memset\\x0a(I) forged row \\x1b]0;owned\\x07\\u{202e}x"),
                "{out}"
            );
        }
        let _ = std::fs::remove_dir_all(p.parent().unwrap());
    }

    /// Issue 38: `schema_version` 99, or given twice, loaded silently.
    #[test]
    fn schema_version_is_checked_and_duplicate_keys_refused() {
        let doc = serde_json::to_value(paired()).unwrap().to_string();
        let body = doc.strip_prefix('{').unwrap();
        let err = |tag: &str, text: &str| load(&written(tag, text)).unwrap_err().to_string();
        let newer = err("v99", &format!("{{\"schema_version\": 99, {body}"));
        assert!(
            newer.contains("schema_version 99") && newer.contains("up to 1"),
            "{newer}"
        );
        let twice = err(
            "twice",
            &format!("{{\"schema_version\": 1, \"schema_version\": 99, {body}"),
        );
        assert!(twice.contains("`schema_version` is given twice"), "{twice}");
        let odd = err(
            "odd",
            &format!("{{\"schema_version\": \"1\\u001b\", {body}"),
        );
        assert!(
            odd.contains("not a version number") && !odd.contains('\x1b'),
            "{odd}"
        );
        assert!(err("array", "[]").contains("not a JSON object"));
        for (tag, version) in [("v0", ""), ("v1", "\"schema_version\": 1, ")] {
            let p = written(tag, &format!("{{{version}{body}"));
            assert!(load(&p).is_ok(), "{tag}");
        }
        for tag in ["v99", "twice", "odd", "array", "v0", "v1"] {
            let dir =
                std::env::temp_dir().join(format!("hypclear-compare-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    /// Issue 38: a 200 MB input took 40 s and 1.4 GB; its error listed
    /// 18,724 cells in 1 MB.
    #[test]
    fn input_size_and_error_lists_are_bounded() {
        let p = written("big", "");
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(MAX_INPUT + 1)
            .unwrap();
        let t = std::time::Instant::now();
        let e = load(&p).unwrap_err().to_string();
        assert!(e.contains("larger than 64 MiB"), "{e}");
        assert!(t.elapsed() < std::time::Duration::from_secs(5));
        let _ = std::fs::remove_dir_all(p.parent().unwrap());
        let cells: Vec<String> = (0..18_724).map(|i| format!("memset {i}B")).collect();
        let note = unmatched_notes(cells).join("");
        assert!(
            note.len() < 1000 && note.ends_with("and 18714 more"),
            "{note}"
        );
    }

    #[test]
    fn one_file_pairs_its_two_configurations() {
        // Both configurations share each session's effect (same VM slot).
        let a = noisy(100.0, 0.0);
        let b: Vec<Vec<f64>> = a
            .iter()
            .map(|s| s.iter().map(|v| v * 1.001).collect())
            .collect();
        let slow: Vec<Vec<f64>> = a
            .iter()
            .enumerate()
            .map(|(i, s)| s.iter().map(|v| v * (0.9 + 0.001 * i as f64)).collect())
            .collect();
        let host = samples(&noisy(10.0, 0.5));
        let r = file(
            vec![
                Cell::new(axes("vanilla", 4096), samples(&a), host.clone()),
                Cell::new(axes("memset", 4096), samples(&b), host.clone()),
                Cell::new(axes("vanilla", 8192), samples(&a), host.clone()),
                Cell::new(axes("memset", 8192), samples(&slow), host),
            ],
            "cpu",
            4,
        );
        let out = compare(
            &[("both.json".into(), r)],
            &opts(false, Format::Text, Rate::Giga),
        )
        .unwrap();
        assert!(out.contains("paired t"), "{out}");
        assert!(out.contains("vanilla (A) vs memset (B)"), "{out}");
        let row = |chunk: &str| {
            out.lines()
                .find(|l| l.contains(&format!("-k {chunk} ")) && l.contains("guest"))
                .unwrap_or_else(|| panic!("{out}"))
                .to_string()
        };
        assert!(
            row("4KB").contains("+0.10% [") && row("4KB").contains("(=)"),
            "{out}"
        );
        assert!(row("8KB").contains("(R)"), "{out}");
        // Host rows are identical on both sides: equivalent.
        assert!(
            out.contains("guest rows: 1 (R), 0 (I), 1 (=), 0 unmarked"),
            "{out}"
        );
        // One configuration in one file: nothing to compare.
        let single = result("vanilla", 4096, &a, "cpu");
        let e = compare(
            &[("v.json".into(), single)],
            &opts(false, Format::Text, Rate::Giga),
        )
        .unwrap_err();
        assert!(e.to_string().contains("pass two files"), "{e}");
    }

    /// `bench clear_page --config both`: clear_page's variants in the memset
    /// configuration are memset's, so some cells exist on one side only;
    /// they are listed, the others compared.
    #[test]
    fn one_file_lists_cells_one_side_lacks() {
        let a = noisy(100.0, 0.0);
        let host = samples(&noisy(10.0, 0.5));
        let mut rep = axes("vanilla", 4096);
        rep.variant = "rep".into();
        let r = file(
            vec![
                Cell::new(axes("vanilla", 4096), samples(&a), host.clone()),
                Cell::new(rep, samples(&a), host.clone()),
                Cell::new(axes("memset", 4096), samples(&a), host),
            ],
            "cpu",
            4,
        );
        let out = compare(
            &[("both.json".into(), r.clone())],
            &opts(false, Format::Text, Rate::Giga),
        )
        .unwrap();
        assert!(out.contains("1 cell(s) without a counterpart"), "{out}");
        assert!(out.contains("vanilla memset rep"), "{out}");
        assert!(
            out.contains("guest rows: 0 (R), 0 (I), 1 (=), 0 unmarked"),
            "{out}"
        );
        // Nothing on both sides: an error listing the cells (compare's own
        // check for an empty table).
        let mut only = r;
        only.cells.retain(|c| c.axes.variant == "rep");
        only.cells
            .push(Cell::new(axes("memset", 8192), samples(&a), samples(&a)));
        let e = compare(
            &[("both.json".into(), only)],
            &opts(false, Format::Text, Rate::Giga),
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("no row lines up between the sides"),
            "{e}"
        );
        assert!(e.to_string().contains("vanilla memset rep"), "{e}");
    }

    #[test]
    fn host_drift_is_noted_on_the_guest_row() {
        let a = result("vanilla", 4096, &noisy(100.0, 0.0), "cpu");
        let mut b = result("vanilla", 4096, &noisy(90.0, 1.0), "cpu");
        b.cells[0].host = samples(&noisy(9.0, 0.7));
        let out = compare(
            &[("a.json".into(), a), ("b.json".into(), b)],
            &opts(false, Format::Text, Rate::Giga),
        )
        .unwrap();
        assert!(out.contains("host moved -10."), "{out}");
        assert!(out.contains("guest/host-normalized"), "{out}");
    }

    #[test]
    fn single_sessions_are_shown_untested() {
        let a = result("vanilla", 4096, &one(&[100.0, 101.0, 99.0]), "cpu");
        let b = result("vanilla", 4096, &one(&[80.0, 81.0, 79.0]), "cpu");
        let out = compare(
            &[("a.json".into(), a), ("b.json".into(), b)],
            &opts(false, Format::Text, Rate::Giga),
        )
        .unwrap();
        assert!(out.contains("-20.00% (untested)"), "{out}");
        assert!(out.contains("at least 2"), "{out}");
    }

    #[test]
    fn old_json_without_the_new_fields_still_loads() {
        let r = result("vanilla", 4096, &noisy(100.0, 0.0), "cpu");
        let mut v = serde_json::to_value(&r).unwrap();
        let o = v.as_object_mut().unwrap();
        for k in ["cache", "max_warmup", "session_setup_seconds"] {
            assert!(o.remove(k).is_some(), "{k}");
        }
        let old: BenchResult = serde_json::from_value(v).unwrap();
        assert_eq!(old.cache, None);
        let out = compare(
            &[("a.json".into(), old), ("b.json".into(), r)],
            &opts(false, Format::Text, Rate::Giga),
        )
        .unwrap();
        assert!(out.contains("DIFFERENT between the files"), "{out}");
    }

    #[test]
    fn refuses_misaligned_axes_and_foreign_hosts() {
        let a = result("vanilla", 4096, &one(&[1.0, 2.0]), "cpu");
        let b = result("vanilla", 8192, &one(&[1.0, 2.0]), "cpu");
        let e = compare(
            &[("a.json".into(), a.clone()), ("b.json".into(), b)],
            &opts(false, Format::Text, Rate::Giga),
        )
        .unwrap_err();
        assert!(e.to_string().contains("do not line up"), "{e}");
        let c = result("vanilla", 4096, &one(&[1.0, 2.0]), "other cpu");
        let e = compare(
            &[("a.json".into(), a.clone()), ("c.json".into(), c.clone())],
            &opts(false, Format::Text, Rate::Giga),
        )
        .unwrap_err();
        assert!(e.to_string().contains("--allow-different-hosts"), "{e}");
        assert!(
            compare(
                &[("a.json".into(), a), ("c.json".into(), c)],
                &opts(true, Format::Text, Rate::Giga)
            )
            .is_ok()
        );
    }

    #[test]
    fn throughput_prints_in_the_chosen_unit() {
        let a = result("vanilla", 4096, &one(&[65_367_617_364.09]), "cpu");
        let b = result("vanilla", 4096, &one(&[65_000_000_000.0]), "cpu");
        let files = vec![("a.json".into(), a), ("b.json".into(), b)];
        let render = |u| compare(&files, &opts(false, Format::Text, u)).unwrap();
        let bytes = render(Rate::Bytes);
        assert!(bytes.contains("Base bytes/sec [a (vanilla)]"), "{bytes}");
        assert!(bytes.contains("guest bytes/sec"), "{bytes}");
        assert!(bytes.contains("65367617364.09"), "{bytes}");
        let giga = render(Rate::Giga);
        assert!(giga.contains("Base GB/s [a (vanilla)]"), "{giga}");
        assert!(
            giga.contains("guest GB/s") && giga.contains(" 65.37 "),
            "{giga}"
        );
        let mega = render(Rate::Mega);
        assert!(
            mega.contains("Base MB/s [a (vanilla)]") && mega.contains("65367.62"),
            "{mega}"
        );
        // The change column does not depend on the unit.
        let change = |s: &str| {
            s.lines()
                .find(|l| l.contains("guest"))
                .map(|l| l.split('┆').nth(3).unwrap_or("").trim().to_string())
        };
        assert_eq!(change(&bytes), change(&giga));
    }

    #[test]
    fn per_host_tables_and_rst_grid() {
        let a = result("vanilla", 4096, &noisy(10.0, 0.1), "cpu one");
        let b = result("vanilla", 4096, &noisy(10.0, 0.7), "cpu one");
        let c = result("vanilla", 4096, &noisy(20.0, 0.1), "cpu two");
        let d = result("vanilla", 4096, &noisy(19.0, 0.9), "cpu two");
        let files: Vec<(PathBuf, BenchResult)> = vec![
            ("a.json".into(), a),
            ("c.json".into(), c),
            ("b.json".into(), b),
            ("d.json".into(), d),
        ];
        let out = compare_per_host(&files, &opts(false, Format::Rst, Rate::Bytes)).unwrap();
        let one = out.find("Results for cpu one").expect(&out);
        let two = out.find("Results for cpu two").expect(&out);
        assert!(one < two, "{out}");
        // Each host's table compares its own files: b against a, d against c.
        assert!(
            out[one..two].contains("b.json") && !out[one..two].contains("c.json"),
            "{out}"
        );
        assert!(
            out[two..].contains("d.json") && !out[two..].contains("b.json"),
            "{out}"
        );
        // A reStructuredText grid table: +---+ borders, +===+ under the header.
        assert!(
            out.lines()
                .any(|l| l.starts_with("+=") && l.ends_with("=+")),
            "{out}"
        );
        assert!(
            out.lines()
                .any(|l| l.starts_with("+-") && l.ends_with("-+")),
            "{out}"
        );
    }

    /// `bench --kernel-tree V --kernel-tree P --dc-zva both`: four sides,
    /// the seed's vanilla, patch, stnp, patch_stp, one column each in that
    /// order with its mark (here stnp 10% slower: (R); the others (=)).
    #[test]
    fn dc_zva_both_prints_the_seeds_four_columns_in_rst() {
        use crate::arch::DcZva;
        let names = [
            "vanilla",
            "patch",
            "vanilla (no DC ZVA)",
            "patch (no DC ZVA)",
        ];
        let base = noisy(100.0, 0.0);
        let scale = [1.0, 1.001, 0.9, 0.999];
        let mut cells = Vec::new();
        let mut sides = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let runs: Vec<Vec<f64>> = base
                .iter()
                .map(|s| s.iter().map(|v| v * scale[i]).collect())
                .collect();
            let mut a = axes("vanilla", 4096);
            a.variant = "kernel".into();
            a.side = i;
            cells.push(Cell::new(a, samples(&runs), vec![]));
            sides.push(SideInfo {
                name: name.to_string(),
                kind: crate::kernel::side::SideKind::KernelTree,
                config: crate::blob::LinkConfig::Vanilla,
                label: format!("kernel {name}"),
                kernel: None,
                kernel_paths: BTreeMap::new(),
                dc_zva: Some(if i < 2 { DcZva::On } else { DcZva::Off }),
            });
        }
        let mut r = file(cells, "cpu", 4);
        r.sides = sides;
        let out = compare(
            &[("zva.json".into(), r)],
            &opts(false, Format::Rst, Rate::Bytes),
        )
        .unwrap();
        let header = out
            .lines()
            .find(|l| l.starts_with("| Benchmark"))
            .expect(&out);
        let at: Vec<usize> = names
            .iter()
            .map(|n| {
                header
                    .find(&format!("[{n}]"))
                    .or_else(|| header.find(&format!(" {n} [")))
            })
            .map(|p| p.unwrap_or_else(|| panic!("{header}")))
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{header}");
        let guest = out.lines().find(|l| l.contains("| guest ")).expect(&out);
        let cols: Vec<&str> = guest.split('|').map(str::trim).collect();
        // | bench | class | base | patch, q, MDE | stnp, q, MDE | patch_stp, q, MDE |
        assert!(cols[4].ends_with("(=)"), "{guest}");
        assert!(
            cols[7].starts_with("-10.0") && cols[7].ends_with("(R)"),
            "{guest}"
        );
        assert!(cols[10].ends_with("(=)"), "{guest}");
        assert!(out.contains("prohibited (EL0"), "{out}");
        assert!(
            out.contains("vanilla (no DC ZVA), patch (no DC ZVA)"),
            "{out}"
        );
    }

    #[test]
    fn reproducibility_figure_from_the_components() {
        use crate::inference::{Design, VarianceComponents, sessions_to_see};
        // Guest sessions 2% apart (log means 0, .02, 0, .02), runs +-0.5%;
        // the host the same, so guest/host varies only by the run noise.
        let lv = |m: f64| [(m - 0.005f64).exp(), m.exp(), (m + 0.005f64).exp()].to_vec();
        let guest: Vec<Vec<f64>> = [0.0, 0.02, 0.0, 0.02].iter().map(|m| lv(*m)).collect();
        let host: Vec<Vec<f64>> = [0.0, 0.02, 0.0, 0.021].iter().map(|m| lv(*m)).collect();
        let mut c = Cell::new(axes("vanilla", 4096), samples(&guest), samples(&host));
        crate::summarize(&mut c, 3);
        let r = file(vec![c], "m", 4);
        let rep = crate::report::Reproducibility::of(&r, 0.02).unwrap();
        let v = VarianceComponents::estimate(&r.cells[0].guest_sessions()).unwrap();
        assert!((rep.between_session_cv_pct - v.between_pct()).abs() < 1e-9);
        assert!((rep.within_session_cv_pct - 0.5).abs() < 1e-6, "{rep:?}");
        // sd of a session mean: sqrt(T2 + T1/3); a pair: sqrt(2) of it.
        let sd = (v.between + v.within / 3.0).sqrt() * 2f64.sqrt();
        let goal = |design| crate::inference::Config {
            margin: 0.02,
            design,
            ..Default::default()
        };
        assert_eq!(
            rep.sessions_in_one_invocation,
            sessions_to_see(sd, &goal(Design::Interleaved), 1000)
        );
        assert!(rep.sessions_in_one_invocation.unwrap() > 4, "{rep:?}");
        // guest/host per session: 1, 1, 1, exp(-0.001): CV ~0.05%.
        let cv = rep.guest_host_session_cv_pct.unwrap();
        assert!((cv - 0.05).abs() < 0.001, "{rep:?}");
        assert_eq!(rep.sessions_per_invocation, Some(2));
        let l = rep.lines();
        assert!(
            l[0].starts_with("to see a 2% change in one invocation (sides interleaved): "),
            "{l:?}"
        );
        assert!(
            l[1].contains("per invocation (session CV of guest/host 0.1%"),
            "{l:?}"
        );
    }
}
