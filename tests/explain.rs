//! `bench --explain` end to end (real VMs). A test binary of its own:
//! its CPL0 variant keeps both cores of a small runner busy under
//! emulation, which would disturb the timing-sensitive tests of
//! tests/bench.rs running beside it (the +-50% precision case needed 6
//! sessions instead of 4 in CI with it there).
mod common;
use common::*;

/// `--explain=all`: every cell measured again under each variant, each
/// row changing exactly its own setting and measured under it (what the
/// backing granted says which pages it ran on), the verdict following
/// from the intervals.
#[test]
fn explain_all_measures_each_variant_under_its_setting() {
    if !kvm_available("bench --explain") {
        return;
    }
    let (j, out) = run_json(
        "explain-all",
        &[
            "bench",
            "clear_pages",
            "-f",
            "erms",
            "-s",
            "1MB",
            "--config",
            "vanilla",
            "--sessions",
            "2",
            "--explain=all",
        ],
    );
    let e = j["explain"].as_array().unwrap();
    assert_eq!(e.len(), 1, "the one cell, in the band or not: {out}");
    assert!(out.contains("explain clear_pages erms"), "{out}");
    let est = e[0]["bench_guest_host"]["estimate"].as_f64().unwrap();
    let place = match (0.95..=1.05).contains(&est) {
        true => "is inside (--explain=all) 0.95-1.05",
        false => "is outside 0.95-1.05",
    };
    assert!(out.contains(place), "{est}: {out}");
    let rows = e[0]["rows"].as_array().unwrap();
    let base = &rows[0];
    assert!(base["variant"].is_null(), "{base}");
    assert_eq!(
        base["settings"]["backing"], "thp",
        "bench's default: {base}"
    );
    let field = |cause: &str| match cause {
        "backing" => "backing",
        "prefault" => "prefault",
        "cache" => "cache",
        _ => "privilege",
    };
    let mut causes = Vec::new();
    for r in &rows[1..] {
        let cause = r["variant"]["cause"].as_str().unwrap();
        causes.push(cause.to_string());
        for f in ["backing", "prefault", "cache", "privilege"] {
            let changed = r["settings"][f] != base["settings"][f];
            assert_eq!(changed, f == field(cause), "{f} in {r}");
        }
        let measured = !r["guest_host"].is_null();
        assert_eq!(measured, r["note"].is_null(), "measured or says why: {r}");
        let (b, v) = (
            &base["guest_host"]["interval"],
            &r["guest_host"]["interval"],
        );
        if let (Some(b), Some(v)) = (b.as_array(), v.as_array()) {
            let f = |x: &serde_json::Value| x.as_f64().unwrap();
            let disjoint = f(&v[0]) > f(&b[1]) || f(&v[1]) < f(&b[0]);
            let delta = r["delta_pct"].as_f64().unwrap().abs();
            let moves = disjoint && delta >= 2.0;
            assert_eq!(r["verdict"] == "moves-it", moves, "{r}");
        }
    }
    assert!(
        causes.iter().filter(|c| *c == "backing").count() == 2,
        "{causes:?}"
    );
    assert!(causes.contains(&"prefault".into()) && causes.contains(&"cache".into()));
    // Each backing row ran on its own pages: anon on none, thp on huge
    // ones where the host grants them.
    let row = |cause: &str, setting: serde_json::Value| {
        rows.iter()
            .find(|r| r["variant"]["cause"] == cause && r["variant"]["setting"] == setting)
            .unwrap()
    };
    let anon = row("backing", "anon".into());
    assert_eq!(anon["huge_share"]["guest"], 0.0, "{anon}");
    assert_eq!(anon["huge_share"]["host"], 0.0, "{anon}");
    let thp_refused = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .is_ok_and(|s| s.contains("[never]"));
    if !thp_refused {
        let g = |r: &serde_json::Value| r["huge_share"]["guest"].as_f64().unwrap();
        assert!(g(base) > 0.0, "{base}");
        // Prefaulted thp is populated after its advice: all huge.
        assert!(g(row("prefault", true.into())) >= g(base), "{rows:?}");
    }
    let hugetlb = row("backing", "hugetlb".into());
    if hugetlb["guest_host"].is_null() {
        let note = hugetlb["note"].as_str().unwrap();
        assert!(note.contains("nr_hugepages"), "{note}");
    }
}
