//! KTAP output read by a parser nobody here wrote: the kernel's own
//! `tools/testing/kunit/kunit.py parse` (from a kernel tree named by
//! HYPCLEAR_KERNEL_TREE, as CI's Debian linux-source), which must count the
//! same passed / failed / skipped tests as hypclear's `# Totals:` line.
mod common;
use common::{hypclear, kvm_available, text};
use std::path::PathBuf;
use std::process::Command;

/// (pass, fail, skip) from kselftest's `# Totals:` line.
fn totals(ktap: &str) -> (u64, u64, u64) {
    let line = ktap
        .lines()
        .find(|l| l.starts_with("# Totals:"))
        .unwrap_or_else(|| panic!("no # Totals line in\n{ktap}"));
    let field = |name: &str| -> u64 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{name}:")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {line}"))
    };
    (field("pass"), field("fail"), field("skip"))
}

fn kunit_py() -> Option<PathBuf> {
    let tree = std::env::var_os("HYPCLEAR_KERNEL_TREE")?;
    let p = PathBuf::from(tree).join("tools/testing/kunit/kunit.py");
    p.exists().then_some(p)
}

/// (pass, fail, skip) as kunit.py parse counts them.
fn kunit_counts(kunit: &PathBuf, name: &str, ktap: &str) -> (u64, u64, u64) {
    let dir = std::env::temp_dir().join(format!("hypclear-ktap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    // One file per caller: the tests of this binary run in parallel.
    let file = dir.join(format!("{name}.ktap"));
    std::fs::write(&file, ktap).expect("write ktap");
    let o = Command::new("python3")
        .arg(kunit)
        .arg("parse")
        .arg(&file)
        .output()
        .expect("python3 kunit.py parse");
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    let line = out
        .lines()
        .find(|l| l.contains("Testing complete."))
        .unwrap_or_else(|| panic!("kunit.py parse printed no summary:\n{out}"));
    let count = |name: &str| -> u64 {
        line.split(&format!("{name}: "))
            .nth(1)
            .and_then(|r| {
                r.split(|c: char| !c.is_ascii_digit())
                    .next()
                    .and_then(|n| n.parse().ok())
            })
            .unwrap_or(0)
    };
    assert!(
        !line.contains("errors:") && !out.contains("[ERROR]"),
        "kunit.py found KTAP errors:\n{out}"
    );
    (count("passed"), count("failed"), count("skipped"))
}

fn check_with_kunit(name: &str, ktap: &str) {
    match kunit_py() {
        Some(k) => {
            let ours = totals(ktap);
            let theirs = kunit_counts(&k, name, ktap);
            assert_eq!(ours, theirs, "{name}: hypclear vs kunit.py parse\n{ktap}");
            eprintln!("{name}: kunit.py parse agrees: pass/fail/skip {ours:?}");
        }
        None if std::env::var("HYPCLEAR_REQUIRE_KVM").as_deref() == Ok("1") => {
            panic!("{name}: set HYPCLEAR_KERNEL_TREE to a kernel tree so kunit.py can parse KTAP");
        }
        None => common::skip(&format!(
            "{name}: kunit.py parse (HYPCLEAR_KERNEL_TREE unset)"
        )),
    }
}

#[test]
fn verify_and_selftest_ktap_parse_with_kunit() {
    if !kvm_available("verify_and_selftest_ktap_parse_with_kunit") {
        return;
    }
    let o = hypclear(&[
        "verify",
        "--format",
        "ktap",
        "-r",
        "memset,clear_page",
        "-s",
        "4KB,8KB",
        "--config",
        "both",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let ktap = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(ktap.starts_with("KTAP version 1\n1..2\n"), "{ktap}");
    assert!(!ktap.contains("not ok"), "{ktap}");
    // Human lines went to stderr, not into the KTAP stream.
    assert!(!ktap.contains("hypclear verify:"), "{ktap}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("hypclear verify: PASS"));
    let (pass, fail, _) = totals(&ktap);
    assert!(pass >= 4 && fail == 0, "{ktap}");
    check_with_kunit("verify", &ktap);

    let o = hypclear(&["selftest", "--format", "ktap", "--config", "vanilla"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let ktap = String::from_utf8_lossy(&o.stdout).to_string();
    // The memory cases, the contract's (x86_64 has DF too), the stray
    // write, the overrun against the unmapped page, the truncated pointer
    // and W^X's two.
    let cases = if cfg!(target_arch = "x86_64") { 17 } else { 16 };
    assert_eq!(totals(&ktap), (cases, 0, 0), "{ktap}");
    assert!(
        ktap.contains("# vanilla/fault: expected Exception"),
        "{ktap}"
    );
    check_with_kunit("selftest", &ktap);

    // The hostile guests in KTAP: one leaf per case; guest log text stays
    // out of the stream (it goes to stderr, sanitized).
    let o = hypclear(&[
        "selftest",
        "--hostile",
        "--case",
        "log_escape,log_forge,done_early,doorbell_4",
        "--format",
        "ktap",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let ktap = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(totals(&ktap), (4, 0, 0), "{ktap}");
    assert!(ktap.contains("ok 4 doorbell_4"), "{ktap}");
    assert!(!ktap.contains("hypclear run: PASS"), "{ktap}");
    check_with_kunit("selftest --hostile", &ktap);
}

#[test]
fn bench_ktap_one_test_per_cell() {
    if !kvm_available("bench_ktap_one_test_per_cell") {
        return;
    }
    let o = hypclear(&[
        "bench",
        "memset",
        "-f",
        "orig",
        "-s",
        "64KB",
        "-k",
        "4KB,64KB",
        "--sessions",
        "2",
        "--repeats",
        "2",
        "--config",
        "both",
        "--format",
        "ktap",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let ktap = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(ktap.starts_with("KTAP version 1\n1..2\n"), "{ktap}");
    // Two configurations x two chunk sizes, each a leaf with its medians.
    assert_eq!(totals(&ktap), (4, 0, 0), "{ktap}");
    assert!(ktap.contains("guest median"), "{ktap}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("hypclear bench memset"));
    check_with_kunit("bench", &ktap);
}

#[test]
fn no_kvm_is_a_ktap_skip_with_exit_4() {
    let o = common::hypclear_env(
        &["--format", "ktap", "run"],
        "HYPCLEAR_KVM_DEVICE",
        "/nonexistent",
    );
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.starts_with("KTAP version 1\n1..0 # SKIP cannot open the KVM device /nonexistent"),
        "{out}"
    );
    // Text mode keeps the environment-error exit status.
    let o = common::hypclear_env(&["run"], "HYPCLEAR_KVM_DEVICE", "/nonexistent");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn formats_a_command_cannot_print_are_usage_errors() {
    let o = hypclear(&["info", "--format", "ktap"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("`info` does not print --format ktap"));
}

#[test]
fn completions_and_man_page() {
    for (shell, needle) in [
        ("bash", "_hypclear()"),
        ("zsh", "#compdef hypclear"),
        ("fish", "complete -c hypclear"),
    ] {
        let o = hypclear(&["completions", shell]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let s = String::from_utf8_lossy(&o.stdout);
        assert!(s.contains(needle), "{shell}: {s}");
        assert!(s.contains("selftest"), "{shell}");
    }
    let o = hypclear(&["man"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains(".TH hypclear 1"), "{s}");
    assert!(s.contains("selftest"), "{s}");
}
