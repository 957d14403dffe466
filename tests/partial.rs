//! Results written as they complete: bench rewrites its --json after every
//! finished cell (marked partial), so a run killed outright (SIGKILL, as
//! the OOM killer sends) keeps what it finished, and compare reads it.
mod common;
use common::*;
use std::time::{Duration, Instant};

#[cfg(target_arch = "x86_64")]
const PORTABLE: &str = "orig";
#[cfg(target_arch = "aarch64")]
const PORTABLE: &str = "generic";

/// A generous bound for the first cell (catches a hang, not a speed).
const FIRST_CELL: Duration = Duration::from_secs(120);

/// The JSON at `path` once it parses (the file exists but is empty until
/// the first cell finishes).
fn parsed(path: &std::path::Path) -> Option<serde_json::Value> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

#[test]
fn a_killed_bench_leaves_partial_json_that_compare_reads() {
    if !kvm_available("partial bench JSON") {
        return;
    }
    let json = tmp_json("bench-killed");
    // Many sessions: the run cannot finish between two polls. Killed once
    // two sessions' cells are in (compare needs two per side).
    let args = [
        "bench",
        "memset",
        "-s",
        "4MB",
        "-k",
        "4KB,64KB",
        "-f",
        PORTABLE,
        "--sessions",
        "40",
        "--repeats",
        "2",
        "--config",
        "both",
        "--cache",
        "warm",
        "--seed",
        "1",
    ];
    // A temporary file an earlier killed run left (issue 38: nothing
    // removed them): the first checkpoint write sweeps it, its process
    // having ended.
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    let stale = json.with_file_name(format!(".bench-killed.json.tmp-{}-0", dead.id()));
    dead.wait().unwrap();
    std::fs::write(&stale, "{").unwrap();
    let doc = kill_once(&args, &json, |doc| {
        let cells = doc["cells"].as_array();
        let done = cells
            .into_iter()
            .flatten()
            .filter(|c| c["guest"].as_array().is_some_and(|g| g.len() >= 4));
        done.count() == 4
    });
    // What is on disk after the kill is whole JSON, still marked partial.
    assert_eq!(doc["partial"], true, "{doc}");
    // Issue 38: checkpoints said `partial_reason: null`.
    let reason = doc["partial_reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("in progress"), "{reason}");
    assert!(!stale.exists(), "the stale temporary file was not swept");
    assert_eq!(doc["cells"].as_array().unwrap().len(), 4);
    let leftovers: Vec<_> = std::fs::read_dir(json.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .contains("bench-killed.json.tmp")
        })
        .collect();
    assert!(leftovers.len() <= 1, "temporary files: {leftovers:?}");

    let out = hypclear(&["compare", json.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("is partial"), "{s}");
    assert!(s.contains("vanilla (A) vs memset (B)"), "{s}");
    assert!(s.contains("guest bytes/sec"), "{s}");
}

/// Whether process `pid` has a SIGINT handler (SigCgt in /proc/PID/status).
fn catches_sigint(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .is_some_and(|m| m & (1 << (libc::SIGINT - 1)) != 0)
}

/// Run `hypclear ARGS`, send it `sig` `delay` after its handler is in
/// place (the first thing the command does; before it, in exec and the
/// runtime's start, a signal kills any program), and wait for it.
fn signal_after(args: &[&str], sig: libc::c_int, delay: Duration) -> std::process::Output {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_hypclear"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("cannot run the hypclear binary");
    let t = Instant::now();
    while !catches_sigint(child.id()) {
        assert!(t.elapsed() < FIRST_CELL, "SIGINT never caught");
        std::thread::sleep(Duration::from_micros(200));
    }
    std::thread::sleep(delay);
    // SAFETY: kill(2) on our own child's pid, which has not been reaped.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, sig) };
    assert_eq!(rc, 0);
    child.wait_with_output().unwrap()
}

/// Ctrl-C at any moment of the start (CPU probe, calibration, VM boot, the
/// first checks) stops with exit 130 and says so: the partial table and JSON
/// when anything ran, else that nothing was taken. Never a silent kill.
#[test]
fn ctrl_c_during_start_and_boot_exits_130_with_what_it_has() {
    if !kvm_available("Ctrl-C during boot") {
        return;
    }
    for (i, delay_ms) in [0u64, 2, 10, 30, 100].into_iter().enumerate() {
        let json = tmp_json(&format!("run-interrupted-{i}"));
        let _ = std::fs::remove_file(&json);
        let args = ["run", "--json", json.to_str().unwrap()];
        let out = signal_after(&args, libc::SIGINT, Duration::from_millis(delay_ms));
        let err = String::from_utf8_lossy(&out.stderr);
        let what = format!("SIGINT after {delay_ms} ms: {}", text(&out));
        assert_eq!(out.status.code(), Some(130), "{what}");
        assert!(err.contains("interrupted (SIGINT)"), "{what}");
        if err.contains("nothing was written") {
            assert!(out.stdout.is_empty(), "{what}");
        } else {
            let doc = read_json(&json);
            assert_eq!(doc["partial"], true, "{what}");
            assert!(
                String::from_utf8_lossy(&out.stdout).contains("config"),
                "the table: {what}"
            );
        }
    }
}

/// Start `hypclear ARGS` and SIGKILL it once the JSON at `json` parses with
/// `ready` true (while the process still runs); the document on disk after
/// the kill.
fn kill_once(
    args: &[&str],
    json: &std::path::Path,
    ready: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let _ = std::fs::remove_file(json);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_hypclear"))
        .args(args)
        .args(["--json", json.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("cannot run the hypclear binary");
    let t = Instant::now();
    while !parsed(json).is_some_and(|d| ready(&d)) {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("hypclear {args:?} ended ({status}) before it was killed");
        }
        assert!(t.elapsed() < FIRST_CELL, "no checkpoint in {FIRST_CELL:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL: no handler runs
    let status = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    parsed(json).expect("the JSON on disk is whole after SIGKILL")
}

/// run/verify rewrite their --json as checks complete (at most every
/// second, marked partial "in progress"): a run killed outright keeps the
/// checks it finished, counted per row as the summary says.
#[test]
fn a_killed_run_keeps_the_checks_it_finished() {
    if !kvm_available("partial run JSON") {
        return;
    }
    let json = tmp_json("run-killed");
    // --geometry full: ~2 million checks, seconds here; kill it mid-way.
    let doc = kill_once(&["run", "--geometry", "full", "--seed", "1"], &json, |d| {
        d["summary"]["passed"].as_u64().is_some_and(|n| n > 0)
    });
    assert_eq!(doc["partial"], true, "{doc}");
    let reason = doc["partial_reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("in progress"), "{reason}");
    let passed = doc["summary"]["passed"].as_u64().unwrap();
    let rows: u64 = doc["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["passed"].as_u64().unwrap())
        .sum();
    assert!(
        passed > 0 && rows == passed,
        "summary {passed} vs rows {rows}"
    );
    assert!(
        doc["guest"]["load_addresses"]
            .as_object()
            .is_some_and(|m| !m.is_empty())
    );
    assert!(doc["summary"]["first_hypercall_ms"].as_f64().unwrap() > 0.0);
}

/// SIGTERM (what `timeout` and CI runners send) during selftest ends it
/// with exit 143, the cases that ran in the JSON marked partial, and KTAP
/// that ends in a failing `interrupted` test, so kunit.py never counts a
/// cut run as a passing one.
#[test]
fn sigterm_during_selftest_keeps_the_cases_that_ran() {
    if !kvm_available("SIGTERM during selftest") {
        return;
    }
    let mut kept = 0;
    for (i, delay_ms) in [400u64, 1200].into_iter().enumerate() {
        let json = tmp_json(&format!("selftest-sigterm-{i}"));
        let _ = std::fs::remove_file(&json);
        let args = ["--format", "ktap", "selftest", "--hostile", "--json"];
        let args = [&args[..], &[json.to_str().unwrap()]].concat();
        let out = signal_after(&args, libc::SIGTERM, Duration::from_millis(delay_ms));
        let err = String::from_utf8_lossy(&out.stderr);
        let ktap = String::from_utf8_lossy(&out.stdout);
        let what = format!("SIGTERM after {delay_ms} ms: exit {:?}\n{ktap}", out.status);
        assert_eq!(out.status.code(), Some(143), "{what}");
        assert!(err.contains("interrupted (SIGTERM)"), "{what}");
        let Some(doc) = parsed(&json) else {
            assert!(err.contains("nothing was written"), "{what}");
            continue;
        };
        kept += 1;
        assert_eq!(doc["partial"], true, "{what}");
        assert_eq!(doc["partial_reason"], "SIGTERM", "{what}");
        let cases = doc["cases"].as_array().unwrap().len();
        assert!(cases >= 1, "{what}");
        assert!(ktap.contains("# interrupted: SIGTERM"), "{what}");
        assert!(
            ktap.lines()
                .any(|l| l.starts_with("not ok") && l.ends_with("interrupted")),
            "{what}"
        );
    }
    assert!(kept > 0, "no SIGTERM landed after a case had finished");
}
