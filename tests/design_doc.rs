//! docs/DESIGN.md's crate table carries each crate's size, measured here
//! and never typed by hand: this test counts the lines of every crate's
//! Rust sources (`src/` and `build.rs`, unit tests included) and fails when
//! a row's figure differs. After a change that moves a figure run
//! `HYPCLEAR_UPDATE_DOCS=1 cargo test --release --test design_doc`, which
//! rewrites the column instead.
use std::path::{Path, PathBuf};

const REGENERATE: &str = "HYPCLEAR_UPDATE_DOCS=1 cargo test --release --test design_doc";

/// Lines of every `.rs` file under `dir`, recursively.
fn rust_lines(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| e.path())
        .map(|p| match p.is_dir() {
            true => rust_lines(&p),
            false if p.extension().is_some_and(|x| x == "rs") => std::fs::read_to_string(&p)
                .map(|s| s.lines().count())
                .unwrap_or_else(|e| panic!("read {}: {e}", p.display())),
            false => 0,
        })
        .sum()
}

/// Where the crate named in a table row lives: `hypclear` is the binary at
/// the top, `hypclear-NAME` is `crates/NAME`.
fn crate_dir(root: &Path, name: &str) -> PathBuf {
    match name.strip_prefix("hypclear-") {
        Some(sub) => root.join("crates").join(sub),
        None => root.to_path_buf(),
    }
}

/// A crate's size as the table shows it: thousands with one decimal.
fn size(root: &Path, name: &str) -> String {
    let dir = crate_dir(root, name);
    assert!(
        dir.join("Cargo.toml").exists(),
        "no crate {name} at {}",
        dir.display()
    );
    let n = rust_lines(&dir.join("src")) + rust_lines_of(&dir.join("build.rs"));
    format!("{:.1}k", n as f64 / 1000.0)
}

fn rust_lines_of(file: &Path) -> usize {
    std::fs::read_to_string(file).map_or(0, |s| s.lines().count())
}

/// docs/DESIGN.md with every crate row's second column measured afresh.
fn regenerated(root: &Path, doc: &str) -> (String, usize) {
    let mut rows = 0;
    let mut out: Vec<String> = Vec::new();
    for line in doc.lines() {
        let cells: Vec<&str> = line.split('|').collect();
        let name = cells
            .get(1)
            .map(|c| c.trim().trim_matches('`'))
            .filter(|c| *c == "hypclear" || c.starts_with("hypclear-"));
        match name {
            Some(name) if cells.len() > 3 => {
                let mut cells: Vec<String> = cells.iter().map(|c| c.to_string()).collect();
                cells[2] = format!(" {} ", size(root, name));
                out.push(cells.join("|"));
                rows += 1;
            }
            _ => out.push(line.to_string()),
        }
    }
    (out.join("\n") + "\n", rows)
}

#[test]
fn design_doc_crate_sizes_are_measured() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = root.join("docs/DESIGN.md");
    let doc = std::fs::read_to_string(&path).expect("read docs/DESIGN.md");
    let (want, rows) = regenerated(root, &doc);
    assert!(
        rows >= 12,
        "docs/DESIGN.md: only {rows} crate rows found in its table"
    );
    if std::env::var_os("HYPCLEAR_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &want).expect("write docs/DESIGN.md");
        return;
    }
    if doc != want {
        let diff: Vec<String> = doc
            .lines()
            .zip(want.lines())
            .filter(|(a, b)| a != b)
            .map(|(a, b)| format!("  has:  {a}\n  want: {b}"))
            .collect();
        panic!(
            "docs/DESIGN.md's crate sizes are stale:\n{}\nregenerate with `{REGENERATE}`",
            diff.join("\n")
        );
    }
}
