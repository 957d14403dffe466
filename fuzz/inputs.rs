//! The inputs `cargo test` replays for a fuzz target: the files of
//! `fuzz/corpus/<target>` and `fuzz/regressions/<target>`, in name order.
//! Included (`#[path]`) by the replay tests of the crates that hold the
//! harnesses; not part of the fuzz crate's build.
use std::path::PathBuf;

pub(crate) fn inputs(target: &str) -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut out = Vec::new();
    for dir in ["corpus", "regressions"] {
        let Ok(rd) = std::fs::read_dir(root.join(dir).join(target)) else {
            continue;
        };
        out.extend(rd.filter_map(|e| e.ok()).map(|e| e.path()));
    }
    out.sort();
    out
}
