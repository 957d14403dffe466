//! `hypclear compare` against files made to hurt it (issue 38), end to
//! end through the binary: names carrying ESC/OSC/BEL, a newline and an
//! RLO reach the terminal escaped and forge no table row; a newer
//! `schema_version`, a key given twice and a 65 MiB file are usage errors
//! (exit 2) with one short message, at once. The inputs are the fuzz
//! corpus's (fuzz/corpus/compare), so the fuzzer starts from them too. No
//! KVM needed.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn corpus(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus/compare")
        .join(name)
}

fn compare(files: &[&Path], format: &str) -> (Output, Duration) {
    let t = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_hypclear"))
        .arg("compare")
        .args(files)
        .args(["--format", format])
        .output()
        .expect("run hypclear compare");
    (out, t.elapsed())
}

/// Raw control characters (but newline and tab) and bidi overrides.
fn raw_controls(s: &str) -> Vec<char> {
    s.chars()
        .filter(|&c| {
            (c.is_control() && c != '\n' && c != '\t') || ('\u{202a}'..='\u{202e}').contains(&c)
        })
        .collect()
}

#[test]
fn hostile_names_reach_the_terminal_escaped() {
    let file = corpus("hostile-strings.json");
    for format in ["text", "markdown", "rst"] {
        let (out, _) = compare(&[&file], format);
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(out.status.success(), "{format}: {stderr}");
        assert_eq!(raw_controls(&stdout), vec![], "{format}: {stdout}");
        assert_eq!(raw_controls(&stderr), vec![], "{format}: {stderr}");
        assert!(
            stdout.contains("\\x1b"),
            "{format}: ESC not shown escaped: {stdout}"
        );
        // The newline in a side's name would start a line of its own.
        assert!(
            !stdout
                .lines()
                .any(|l| l.trim_start().starts_with("(I) forged row")),
            "{format}: a forged row: {stdout}"
        );
    }
}

/// A refusal: exit 2, one message naming the file, at once.
fn refused(file: &Path, want: &str) {
    let (out, took) = compare(&[file], "text");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}: {err}", file.display());
    assert!(err.contains(want), "{}: {err}", file.display());
    assert!(err.len() < 1024, "a {}-byte message: {err}", err.len());
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn newer_schemas_repeated_keys_and_huge_files_are_refused() {
    refused(
        &corpus("schema-v99.json"),
        "schema_version 99, newer than this hypclear reads",
    );
    refused(&corpus("duplicate-key.json"), "given twice");
    let tmp = tempfile::tempdir().unwrap();
    let big = tmp.path().join("big.json");
    let mut text = String::from("{\"schema_version\": 1");
    text.push_str(&" ".repeat(65 << 20));
    text.push('}');
    std::fs::write(&big, text).unwrap();
    refused(&big, "larger than 64 MiB");
}
