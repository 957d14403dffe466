//! Boot real VMs and verify every variant of each routine, in both link
//! configurations, through the CLI (`hypclear verify --routine R --json`).
mod common;
use common::*;

fn verify_routine(routine: &str) {
    if !kvm_available(routine) {
        return;
    }
    let json = tmp_json(&format!("verify-{routine}"));
    let out = hypclear(&[
        "verify",
        "--routine",
        routine,
        "--seed",
        "7",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let doc = read_json(&json);
    let checks = doc["checks"].as_array().expect("checks array");
    assert!(!checks.is_empty());
    let mut configs = std::collections::BTreeSet::new();
    for c in checks {
        assert_eq!(c["routine"], routine, "{c}");
        configs.insert(c["config"].as_str().unwrap().to_string());
        match c["verdict"].as_str().unwrap() {
            "pass" => assert_eq!(c["bad_bytes"], 0),
            "skipped" => assert!(c["reason"].is_string()),
            other => panic!("check did not pass: {other} {c}"),
        }
    }
    assert_eq!(configs.len(), 2, "both link configurations ran");
    assert_eq!(doc["summary"]["failed"], 0);
    assert!(doc["summary"]["passed"].as_u64().unwrap() > 0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("hypclear verify: PASS"), "{stdout}");
}

#[test]
fn clear_page() {
    verify_routine("clear_page");
}

#[test]
fn clear_pages() {
    verify_routine("clear_pages");
}

#[test]
fn memset() {
    verify_routine("memset");
}

#[test]
fn memcpy() {
    verify_routine("memcpy");
}

#[test]
fn copy_page() {
    verify_routine("copy_page");
}
