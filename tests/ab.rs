//! `bench --ab` end to end (real VMs): two sides in one guest (the two
//! link configurations: two blobs side by side), and one side's two
//! variants (one blob), each call timed, the pair's change with its
//! interval and MDE in the JSON and through `compare FILE`, and each
//! side's guest/host on the same buffer and the host copies' own change
//! (none with `--no-host`). Only
//! structure, no wall-clock thresholds beyond the budget.
mod common;
use common::*;

/// memset's variants: one for the two link configurations, two for one
/// blob (arm64's second is MOPS, which not every CPU has).
#[cfg(target_arch = "x86_64")]
const ONE: &str = "orig";
#[cfg(target_arch = "x86_64")]
const TWO: &str = "orig,erms";
#[cfg(target_arch = "aarch64")]
const ONE: &str = "generic";
#[cfg(target_arch = "aarch64")]
const TWO: &str = "generic,mops";

fn has_two() -> bool {
    cfg!(target_arch = "x86_64")
        || std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| c.contains(" mops"))
}

fn ab(name: &str, extra: &[&str]) -> serde_json::Value {
    let json = tmp_json(name);
    let mut args = vec!["bench", "memset", "-s", "64KB", "--seed", "3", "--json"];
    args.push(json.to_str().unwrap());
    args.extend_from_slice(extra);
    let out = hypclear(&args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("MDE"),
        "{}",
        text(&out)
    );
    let cmp = hypclear(&["compare", json.to_str().unwrap()]);
    assert_eq!(cmp.status.code(), Some(0), "{}", text(&cmp));
    let shown = String::from_utf8_lossy(&cmp.stdout);
    assert!(shown.contains("MDE"));
    for line in ["guest/host", "on the same buffers"] {
        assert_eq!(
            shown.contains(line),
            !extra.contains(&"--no-host"),
            "{shown}"
        );
    }
    read_json(&json)
}

fn rows(v: &serde_json::Value) -> &Vec<serde_json::Value> {
    let rows = v["ab"].as_array().expect("ab rows");
    assert!(!rows.is_empty());
    assert!(v["cells"].as_array().is_some_and(|c| c.is_empty()));
    for r in rows {
        assert!(r["blocks"].as_u64().unwrap() >= 6, "{r}");
        let [lo, hi] = [0, 1].map(|i| r["interval_pct"][i].as_f64().unwrap());
        let c = r["change_pct"].as_f64().unwrap();
        assert!(lo <= c && c <= hi, "{r}");
        assert!(r["mde_pct"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["a_ns"].as_f64().unwrap() > 0.0 && r["b_ns"].as_f64().unwrap() > 0.0);
        let guests = r["guests"].as_u64().unwrap();
        assert!(guests >= 4, "{r}");
        assert!(r["guest_shifts"].as_array().unwrap().len() as u64 <= guests);
    }
    rows
}

#[test]
fn two_blobs_in_one_guest_and_two_variants_of_one() {
    if !kvm_available("bench --ab") {
        return;
    }
    let v = ab(
        "ab-configs",
        &["--config", "both", "-f", ONE, "--ab", "--budget", "1"],
    );
    let r = &rows(&v)[0];
    let verdicts = ["slower", "faster", "equivalent", "unresolved"];
    assert!(
        verdicts.contains(&r["verdict"].as_str().unwrap_or("")),
        "{r}"
    );
    assert!(r["wall_s"].as_f64().unwrap() < 10.0, "{r}");
    // Built-in sides: each has its host baseline on the guest's buffer.
    for gh in r["guest_host"].as_array().unwrap() {
        let est = gh["estimate"].as_f64().unwrap_or(0.0);
        assert!(est > 0.0 && est.is_finite(), "{r}");
        assert_eq!(
            gh["sessions"].as_array().unwrap().len() as u64,
            r["guests"].as_u64().unwrap()
        );
    }
    // And the host copies' own B against A, from the same buffers.
    let h = &r["host_change"];
    let [lo, hi] = [0, 1].map(|i| h["interval_pct"][i].as_f64().unwrap_or(f64::NAN));
    let c = h["change_pct"].as_f64().unwrap_or(f64::NAN);
    assert!(lo <= c && c <= hi && h["guests"].as_u64() >= Some(3), "{r}");
    let no_host = ab(
        "ab-no-host",
        &[
            "--config",
            "both",
            "-f",
            ONE,
            "--ab",
            "--budget",
            "1",
            "--no-host",
        ],
    );
    assert_eq!(
        rows(&no_host)[0]["guest_host"],
        serde_json::json!([null, null])
    );
    assert!(rows(&no_host)[0]["host_change"].is_null());
    if !has_two() {
        eprintln!("SKIP: one blob's two memset variants: this CPU has no MOPS");
        return;
    }
    // One blob, two variants; --detect stops at a verdict or the budget.
    let v = ab(
        "ab-variants",
        &[
            "--config", "vanilla", "-f", TWO, "--detect", "5%", "--budget", "2",
        ],
    );
    let r = &rows(&v)[0];
    assert!(
        r["looks"].as_u64().unwrap() >= 1 || r["verdict"] == "unresolved",
        "{r}"
    );
    assert_eq!(r["margin"].as_f64(), Some(0.05));
}
