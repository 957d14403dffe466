//! A tiny bench end to end (real VMs), its JSON through compare, and the
//! bench/compare usage errors. No wall-clock thresholds: only structure.
mod common;
use common::*;

/// A portable (no CPU feature needed) memset variant of this architecture.
#[cfg(target_arch = "x86_64")]
const PORTABLE: &str = "orig";
#[cfg(target_arch = "aarch64")]
const PORTABLE: &str = "generic";

fn bench(name: &str, extra: &[&str]) -> (serde_json::Value, std::path::PathBuf) {
    let json = tmp_json(name);
    let mut args = vec![
        "bench",
        "memset",
        "-s",
        "4MB",
        "-k",
        "4KB,64KB",
        "-f",
        "all",
        "-l",
        "1",
        "--sessions",
        "2",
        "--repeats",
        "2",
        "--warmup",
        "1",
        "--config",
        "vanilla",
        "--seed",
        "1",
        "--json",
    ];
    args.push(json.to_str().unwrap());
    args.extend_from_slice(extra);
    let out = hypclear(&args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    (read_json(&json), json)
}

#[test]
fn tiny_bench_roundtrips_through_compare() {
    if !kvm_available("bench") {
        return;
    }
    let csv = tmp_json("bench-a").with_extension("csv");
    let svg = tmp_json("bench-a").with_extension("svg");
    let (a, a_path) = bench(
        "bench-a",
        &[
            "--csv",
            csv.to_str().unwrap(),
            "--plot",
            svg.to_str().unwrap(),
        ],
    );
    let cells = a["cells"].as_array().unwrap();
    assert!(cells.len() >= 2, "one cell per variant and chunk: {a}");
    assert_cells_are_measured(cells);
    assert!(a["host"]["counter_khz"].as_u64().unwrap() > 0);
    let csv_text = std::fs::read_to_string(&csv).unwrap();
    // Every measured run, disturbed ones included, one row each.
    let runs: usize = cells
        .iter()
        .map(|c| c["guest"].as_array().unwrap().len() + c["host"].as_array().unwrap().len())
        .sum();
    assert_eq!(csv_text.lines().count(), 1 + runs, "{csv_text}");
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));

    let (_, b_path) = bench("bench-b", &[]);
    compare_in_both_units(&a_path, &b_path);

    // Different axes must be refused.
    let (_, c_path) = bench("bench-c", &["-k", "8KB"]);
    let out = hypclear(&[
        "compare",
        a_path.to_str().unwrap(),
        c_path.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("do not line up"));
}

/// Every cell of the tiny bench: its runs, host baseline, verification,
/// medians and KVM statistics.
fn assert_cells_are_measured(cells: &[serde_json::Value]) {
    for c in cells {
        // The sample rule: 2 sessions x 2 undisturbed repeats on each
        // side; disturbed runs stay in the file, marked, beside them.
        let used = |side: &str| {
            c[side]
                .as_array()
                .unwrap()
                .iter()
                .filter(|s| s["disturbed"] == false)
                .count()
        };
        assert_eq!(used("guest"), 4, "2 sessions x 2 repeats: {c}");
        assert_eq!(used("host"), 4, "host baseline side by side: {c}");
        assert_eq!(c["state"]["state"], "measured", "{c}");
        assert!(
            c["verified_runs"].as_u64().unwrap() >= 2,
            "first and last run verified: {c}"
        );
        assert!(c["guest_bytes_per_sec"]["median"].as_f64().unwrap() > 0.0);
        assert!(c["guest_host_ratio"].as_f64().unwrap() > 0.0);
        assert!(
            c["guest"][0]["kvm_stats"].is_object(),
            "KVM stats deltas per run"
        );
    }
}

/// `compare A B` as markdown, in bytes/sec and in GB/s: the same medians.
fn compare_in_both_units(a_path: &std::path::Path, b_path: &std::path::Path) {
    let out = hypclear(&[
        "compare",
        a_path.to_str().unwrap(),
        b_path.to_str().unwrap(),
        "--format",
        "markdown",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains("Base bytes/sec") && s.contains("q < 0.05") && s.contains("MDE"),
        "{s}"
    );
    // --unit GB/s: the same medians in decimal GB/s, the header says so.
    let out = hypclear(&[
        "compare",
        a_path.to_str().unwrap(),
        b_path.to_str().unwrap(),
        "--format",
        "markdown",
        "--unit",
        "GB/s",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let g = String::from_utf8_lossy(&out.stdout);
    assert!(g.contains("Base GB/s") && g.contains("guest GB/s"), "{g}");
    let base = |t: &str, class: &str| -> f64 {
        let row = t
            .lines()
            .find(|l| l.contains(class))
            .unwrap_or_else(|| panic!("{t}"));
        row.split('|').nth(3).unwrap().trim().parse().unwrap()
    };
    let (bps, gbps) = (base(&s, "guest bytes/sec"), base(&g, "guest GB/s"));
    assert!(
        (bps / 1e9 - gbps).abs() < 0.006,
        "{bps} bytes/sec vs {gbps} GB/s"
    );
    assert!(
        s.contains(&format!("| memset {PORTABLE}")),
        "markdown rows: {s}"
    );
}

#[test]
fn both_configs_in_one_file_compare_paired() {
    if !kvm_available("bench --config both") {
        return;
    }
    let path = tmp_json("bench-both");
    let out = hypclear(&[
        "bench",
        "memset",
        "-s",
        "4MB",
        "-k",
        "64KB",
        "-f",
        PORTABLE,
        "--sessions",
        "2",
        "--repeats",
        "2",
        "--config",
        "both",
        "--cache",
        "warm",
        "--seed",
        "1",
        "--json",
        path.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("variance components"),
        "{}",
        text(&out)
    );
    let d = read_json(&path);
    assert_eq!(d["cache"], "warm", "the precondition is recorded");
    for c in d["cells"].as_array().unwrap() {
        let steady = c["guest_steady"].as_array().unwrap();
        assert_eq!(steady.len(), 2, "warm-up recorded per session: {c}");
        for s in steady {
            let used = s["warmup_used"].as_u64().unwrap();
            assert!((1..=20).contains(&used), "{c}");
            assert!(s["settled"].is_boolean(), "{c}");
        }
        assert_eq!(
            c["guest_warmup"].as_array().unwrap().len() as u64,
            steady
                .iter()
                .map(|s| s["warmup_used"].as_u64().unwrap())
                .sum::<u64>()
        );
        assert!(
            c["guest"]
                .as_array()
                .unwrap()
                .iter()
                .all(|s| s["verified"] == false),
            "no timed run is a verified run: {c}"
        );
    }
    let out = hypclear(&["compare", path.to_str().unwrap(), "--format", "markdown"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let s = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "vanilla (A) vs memset (B)",
        "paired t on per-session-pair log ratios",
        "precondition: warm cache",
        "| q ",
        "MDE",
        "guest rows:",
        "(=) equivalent",
    ] {
        assert!(s.contains(needle), "{needle}: {s}");
    }
    // Two guest rows and two host rows, each with a change and interval.
    assert_eq!(s.lines().filter(|l| l.contains("% [")).count(), 2, "{s}");
}

#[test]
fn demand_fill_and_reverse_order_and_vcpus() {
    if !kvm_available("bench axes") {
        return;
    }
    let json = tmp_json("bench-axes");
    let out = hypclear(&[
        "bench",
        "clear_pages",
        "-s",
        "4MB",
        "-k",
        "4KB",
        "--order",
        "forward,reverse,oneshot",
        "--fill",
        "demand,populate",
        "--sessions",
        "1",
        "--repeats",
        "2",
        "--config",
        "memset",
        "--vcpus",
        "2",
        "-f",
        PORTABLE,
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let d = read_json(&json);
    let cells = d["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 6, "3 orders x 2 fill states");
    for c in cells {
        let s = &c["guest"][0];
        assert_eq!(
            s["per_vcpu_bytes_per_sec"].as_array().unwrap().len(),
            2,
            "{c}"
        );
    }
    // Demand runs fault memory in inside the measurement.
    let demand = cells
        .iter()
        .find(|c| c["axes"]["fill"] == "demand")
        .unwrap();
    let faults: u64 = demand["guest"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            s["kvm_stats"]["pf_taken"].as_u64().unwrap_or(0)
                + s["kvm_stats"]["pf_fixed"].as_u64().unwrap_or(0)
        })
        .sum();
    assert!(faults > 0, "demand fill took no page faults: {demand}");
}

/// Without --sessions, sessions are added two at a time until every
/// interval is within --precision, up to --max-sessions or while the next
/// pair fits --max-seconds: a target no run can reach runs to a cap and
/// says which, a loose one stops at the planned 4.
#[test]
fn precision_adds_sessions_in_pairs_up_to_the_cap() {
    if !kvm_available("bench --precision") {
        return;
    }
    let run = |name: &str, pct: &str, max_sessions: &str, max_seconds: &str| {
        let args = [
            "bench",
            "memset",
            "-s",
            "64KB",
            "-k",
            "64KB",
            "-f",
            PORTABLE,
            "--config",
            "vanilla",
            "--repeats",
            "2",
            "--max-warmup",
            "0",
            "--precision",
            pct,
            "--max-sessions",
            max_sessions,
            "--max-seconds",
            max_seconds,
        ];
        run_json(name, &args)
    };
    // +-0.0001%: unreachable, so the cap.
    let (j, out) = run("precision-cap", "0.0001", "6", "600");
    let p = &j["precision"];
    assert_eq!(j["sessions"], 6, "{out}");
    assert_eq!(p["sessions"], 6, "{p}");
    assert_eq!(p["reached"], false, "{p}");
    assert_eq!(p["planned_sessions"], 4, "{p}");
    assert!(out.contains("NOT reached in 6 session(s)"), "{out}");
    let ratios = j["cells"][0]["guest_host"]["sessions"].as_array().unwrap();
    assert_eq!(ratios.len(), 6, "every added session is paired: {out}");
    // +-50%: usually reached with the planned 4. On a loaded 2-core host
    // (this binary's tests run side by side) a 64 KB cell's session CV can
    // pass 31%, where t(3) puts 4 sessions past +-50%; then one more pair
    // is added. The stopping rule itself is unit-tested in
    // crates/bench/src/precision.rs; here the run must report it truthfully.
    // The time cap: the planned 4 always run, no pair after them fits.
    let (j, out) = run("precision-budget", "0.0001", "100", "0.001");
    let p = &j["precision"];
    assert_eq!(j["sessions"], 4, "{out}");
    assert_eq!(p["limited_by"], "seconds", "{p}");
    assert!(out.contains("would pass --max-seconds 0.001"), "{out}");
    let (j, out) = run("precision-loose", "50", "6", "600");
    let p = &j["precision"];
    let n = j["sessions"].as_u64().unwrap();
    let reached = p["reached"].as_bool().unwrap();
    let w = p["widest"]["half_width_pct"].as_f64().unwrap();
    assert!(
        n == 4 || n == 6,
        "sessions in pairs past the planned 4: {out}"
    );
    assert_eq!(p["sessions"], n, "{p}");
    assert_eq!(
        reached,
        w <= 50.0,
        "reached iff the widest is within: {out}"
    );
    assert!(n == 6 || reached, "stops at 4 only when reached: {out}");
    if n == 6 && !reached {
        assert!(out.contains("NOT reached in 6 session(s)"), "{out}");
    }
}

#[test]
fn bench_usage_errors_exit_2() {
    for (args, needle) in [
        (vec!["bench", "copy_page", "-k", "8KB"], "4KB"),
        (vec!["bench", "memset", "-s", "4097"], "4KB pages"),
        (
            vec!["bench", "memset", "-s", "4MB", "-k", "3MB"],
            "multiple",
        ),
        (vec!["bench", "memset", "-f", "nosuch"], "unknown variant"),
        (
            vec!["bench", "memset", "-s", "1GB", "--mem", "64MB"],
            "--mem",
        ),
        (
            vec!["bench", "memset", "--sessions", "3", "--max-sessions", "8"],
            "cap --precision",
        ),
        (
            vec!["bench", "memset", "--sessions", "3", "--max-seconds", "8"],
            "cap --precision",
        ),
        (
            vec!["bench", "memset", "--max-seconds", "0"],
            "--max-seconds 0 is not usable",
        ),
        (
            vec!["bench", "memset", "--max-sessions", "2"],
            "below the 4 planned",
        ),
        (vec!["bench", "memset", "--precision", "0"], "above 0"),
        (vec!["bench", "memset", "--detect", "0"], "above 0%"),
        (vec!["bench", "memset", "--detect", "200%"], "at most 50%"),
        (
            vec!["bench", "memset", "--precision", "tight"],
            "percentage",
        ),
        (
            vec!["compare", "/nonexistent.json", "/nonexistent2.json"],
            "nonexistent",
        ),
    ] {
        let out = hypclear(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(needle),
            "{args:?}: {}",
            text(&out)
        );
    }
}

/// `--unit` names every figure below the table too: the side ratios are
/// in the unit asked for, not in GB/sec.
#[test]
fn side_ratios_follow_unit() {
    if !kvm_available("bench --unit side ratios") {
        return;
    }
    let out = hypclear(&[
        "bench",
        "memset",
        "-s",
        "1MB",
        "-k",
        "4KB",
        "-f",
        PORTABLE,
        "--sessions",
        "1",
        "--repeats",
        "3",
        "--config",
        "both",
        "--unit",
        "MB/s",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let s = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = s
        .lines()
        .skip_while(|l| !l.starts_with("side ratios"))
        .collect();
    assert!(
        lines
            .first()
            .is_some_and(|l| l.contains("median guest MB/s")),
        "{s}"
    );
    assert!(lines.get(1).is_some_and(|l| l.contains(" MB/s = ")), "{s}");
    assert!(!lines.iter().take(2).any(|l| l.contains("GB/sec")), "{s}");
}
