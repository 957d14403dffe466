//! `hypclear compare BASE.json NEW.json…`: the seed's comparison table.
//!
//! For every benchmark: base bytes/sec (median), then the change in % for
//! each other file, marked `(R)` regression or `(I)` improvement only when
//! Welch's t-test on the raw samples says the difference is significant at
//! `--alpha`; plus each column's standard deviation.
use crate::bench::stats::{self, Verdict};
use crate::bench::{Axes, BenchResult, Cell};
use crate::error::{Error, Result};
use crate::report::right;
use comfy_table::{Cell as TCell, Table, presets};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub fn load(path: &Path) -> Result<BenchResult> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::Usage(format!("cannot read {}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| {
        Error::Usage(format!(
            "{} is not a hypclear bench JSON ({e}); write one with `hypclear bench ... --json FILE`",
            path.display()
        ))
    })
}

/// Axes as the comparison key; `config` is left out when every file holds
/// exactly one link configuration (comparing vanilla against memset).
fn key(a: &Axes, ignore_config: bool) -> Axes {
    let mut k = a.clone();
    if ignore_config {
        k.config = String::new();
    }
    k
}

fn configs(r: &BenchResult) -> Vec<String> {
    let mut v: Vec<String> = r.cells.iter().map(|c| c.axes.config.clone()).collect();
    v.sort();
    v.dedup();
    v
}

fn guest_samples(c: &Cell) -> Vec<f64> {
    let clean: Vec<f64> = c
        .guest
        .iter()
        .filter(|s| !s.disturbed)
        .map(|s| s.bytes_per_sec)
        .collect();
    if clean.is_empty() {
        c.guest.iter().map(|s| s.bytes_per_sec).collect()
    } else {
        clean
    }
}

fn host_samples(c: &Cell) -> Vec<f64> {
    c.host.iter().map(|s| s.bytes_per_sec).collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Markdown,
}

// Over 80 lines: file checks, row matching and the rendering of one table;
// the statistics issue (session-aware tests) rewrites this function next.
/// Build the comparison table; refuses files whose axes do not line up or
/// that come from different hosts (unless allowed).
pub fn compare(
    files: &[(PathBuf, BenchResult)],
    alpha: f64,
    allow_different_hosts: bool,
    format: Format,
) -> Result<String> {
    let (base_path, base) = files
        .first()
        .ok_or_else(|| Error::Usage("compare needs a base file".into()))?;
    if !(alpha > 0.0 && alpha < 1.0) {
        return Err(Error::Usage(format!(
            "--alpha {alpha} must be between 0 and 1"
        )));
    }
    for (p, r) in &files[1..] {
        if !allow_different_hosts && !base.host.same_host(&r.host) {
            return Err(Error::Usage(format!(
                "{} comes from a different host than {} ({} / {} / {} vs {} / {} / {}); \
                 pass --allow-different-hosts to compare anyway",
                p.display(),
                base_path.display(),
                r.host.cpu_model,
                r.host.kernel,
                r.host.kvm_flavour,
                base.host.cpu_model,
                base.host.kernel,
                base.host.kvm_flavour
            )));
        }
    }
    let ignore_config = files.iter().all(|(_, r)| configs(r).len() == 1);
    let index = |r: &BenchResult| -> BTreeMap<Axes, usize> {
        r.cells
            .iter()
            .enumerate()
            .map(|(i, c)| (key(&c.axes, ignore_config), i))
            .collect()
    };
    let base_idx = index(base);
    let idx: Vec<BTreeMap<Axes, usize>> = files.iter().map(|(_, r)| index(r)).collect();
    for ((p, _), m) in files.iter().zip(&idx).skip(1) {
        if let Some(k) = base_idx.keys().find(|k| !m.contains_key(*k)) {
            return Err(Error::Usage(format!(
                "the axes do not line up: {} has `{}` but {} does not; run both benches with the same options",
                base_path.display(),
                k.label(),
                p.display()
            )));
        }
        if let Some(k) = m.keys().find(|k| !base_idx.contains_key(*k)) {
            return Err(Error::Usage(format!(
                "the axes do not line up: {} has `{}` but {} does not; run both benches with the same options",
                p.display(),
                k.label(),
                base_path.display()
            )));
        }
    }

    let name = |p: &PathBuf, r: &BenchResult| {
        let stem = p
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if ignore_config {
            format!("{stem} ({})", configs(r).join(","))
        } else {
            stem
        }
    };
    let mut header = vec![
        "Benchmark".to_string(),
        "Result class".into(),
        format!("Base bytes/sec [{}]", name(base_path, base)),
    ];
    for (p, r) in &files[1..] {
        header.push(format!("Change {}", name(p, r)));
    }
    header.push("stddev base".into());
    for (p, r) in &files[1..] {
        header.push(format!("stddev {}", name(p, r)));
    }
    let mut t = Table::new();
    t.load_style(match format {
        Format::Text => presets::UTF8_FULL_CONDENSED,
        Format::Markdown => presets::ASCII_MARKDOWN,
    });
    t.set_header(header);
    let mut regressions = 0;
    let mut improvements = 0;
    for (k, &bi) in &base_idx {
        let bc = &base.cells[bi];
        for (class, get) in [
            ("guest bytes/sec", guest_samples as fn(&Cell) -> Vec<f64>),
            ("host bytes/sec", host_samples as fn(&Cell) -> Vec<f64>),
        ] {
            let bs = get(bc);
            let Some(bsum) = stats::Summary::of(&bs) else {
                continue;
            };
            let mut row = vec![
                TCell::new(k.label()),
                TCell::new(class),
                right(format!("{:.2}", bsum.median)),
            ];
            let mut sds = vec![right(format!("{:.4e}", bsum.stddev))];
            for ((_, r), m) in files.iter().zip(&idx).skip(1) {
                let c = &r.cells[m[k]];
                let ns = get(c);
                let cmp = stats::classify(&bs, &ns, alpha, true);
                if class.starts_with("guest") {
                    match cmp.verdict {
                        Verdict::Regression => regressions += 1,
                        Verdict::Improvement => improvements += 1,
                        Verdict::NoChange => {}
                    }
                }
                row.push(right(
                    format!("{:.2}% {}", cmp.change_pct, cmp.verdict.marker())
                        .trim_end()
                        .to_string(),
                ));
                sds.push(right(
                    stats::Summary::of(&ns)
                        .map(|s| format!("{:.4e}", s.stddev))
                        .unwrap_or_else(|| "-".into()),
                ));
            }
            row.extend(sds);
            t.add_row(row);
        }
    }
    let mut out = format!(
        "hypclear compare: {} vs {}\n",
        base_path.display(),
        files[1..]
            .iter()
            .map(|(p, _)| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    out.push_str(&format!(
        "(R) regression / (I) improvement only where Welch's two-sided t-test on the raw samples gives p < {alpha}; medians of undisturbed runs\n\n"
    ));
    out.push_str(&t.to_string());
    out.push_str(&format!(
        "\n\n{regressions} significant regression(s), {improvements} significant improvement(s) in guest throughput\n"
    ));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::{Fill, Order, Sample};
    use crate::vmm::host::HostInfo;

    fn host(model: &str) -> HostInfo {
        HostInfo {
            arch: "x86_64".into(),
            cpu_model: model.into(),
            cpus: 2,
            kernel: "6.1".into(),
            kvm_flavour: "pvm".into(),
            counter: "TSC".into(),
            counter_khz: 1000,
            hypclear_version: "0".into(),
            git_commit: "x".into(),
        }
    }

    fn result(config: &str, chunk: u64, values: &[f64], model: &str) -> BenchResult {
        let axes = Axes {
            routine: "memset".into(),
            variant: "erms".into(),
            config: config.into(),
            chunk,
            order: Order::Forward,
            fill: Fill::Populate,
            backing: "anon".into(),
            size: 1 << 20,
            loops: 1,
            vcpus: 1,
        };
        let samples = values
            .iter()
            .enumerate()
            .map(|(i, v)| Sample {
                session: 0,
                run: i as u64,
                bytes: 1 << 20,
                ns: 1.0,
                bytes_per_sec: *v,
                ticks_per_byte: 1.0,
                verified: false,
                disturbed: false,
                per_vcpu_bytes_per_sec: vec![],
                kvm_stats: Default::default(),
            })
            .collect();
        BenchResult {
            tool: "hypclear".into(),
            command: "bench".into(),
            host: host(model),
            privilege: "CPL3".into(),
            warmup: 1,
            repeats: 3,
            sessions: 1,
            cache: None,
            max_warmup: 0,
            cells: vec![Cell::new(axes, samples, vec![])],
        }
    }

    #[test]
    fn marks_only_significant_changes() {
        let base = result("vanilla", 4096, &[100.0, 101.0, 99.0, 100.5, 99.5], "cpu");
        let same = result("memset", 4096, &[100.2, 100.8, 99.1, 100.4, 99.7], "cpu");
        let slow = result("memset", 4096, &[80.0, 81.0, 79.0, 80.5, 79.5], "cpu");
        let files = vec![
            (PathBuf::from("base.json"), base),
            (PathBuf::from("same.json"), same),
            (PathBuf::from("slow.json"), slow),
        ];
        let out = compare(&files, 0.05, false, Format::Markdown).unwrap();
        assert!(out.contains("-20.00% (R)"), "{out}");
        assert!(!out.contains("% (I)"), "{out}");
        assert!(out.contains("p < 0.05"), "{out}");
        assert!(out.contains("1 significant regression"), "{out}");
        assert!(out.contains("stddev base"), "{out}");
    }

    #[test]
    fn refuses_misaligned_axes_and_foreign_hosts() {
        let a = result("vanilla", 4096, &[1.0, 2.0], "cpu");
        let b = result("vanilla", 8192, &[1.0, 2.0], "cpu");
        let e = compare(
            &[("a.json".into(), a.clone()), ("b.json".into(), b)],
            0.05,
            false,
            Format::Text,
        )
        .unwrap_err();
        assert!(e.to_string().contains("do not line up"), "{e}");
        let c = result("vanilla", 4096, &[1.0, 2.0], "other cpu");
        let e = compare(
            &[("a.json".into(), a.clone()), ("c.json".into(), c.clone())],
            0.05,
            false,
            Format::Text,
        )
        .unwrap_err();
        assert!(e.to_string().contains("--allow-different-hosts"), "{e}");
        assert!(
            compare(
                &[("a.json".into(), a), ("c.json".into(), c)],
                0.05,
                true,
                Format::Text
            )
            .is_ok()
        );
    }
}
