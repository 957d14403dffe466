//! Differential check of the built-ins against the kernel's own objects
//! (faithful built-ins): the verification suite on a kernel tree's
//! routines and on the built-in variants that follow the same kernel path
//! with the same alternatives decision must give the same checks with the
//! same results; and one bench with both sides interleaved prints the
//! kernel/built-in ratio (printed, no threshold: benchmarks are noisy).
//! Needs HYPCLEAR_KERNEL_TREE (prints SKIP without it) and KVM.
mod common;
use common::*;
use serde_json::Value;
use std::collections::BTreeMap;

/// The two tests build and link the same tree into the same cache
/// directory: one at a time (two hypclear processes linking one tree's
/// cache at once race on its files).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn tree() -> Option<String> {
    match std::env::var("HYPCLEAR_KERNEL_TREE") {
        Ok(t) => Some(t),
        Err(_) => {
            common::skip("set HYPCLEAR_KERNEL_TREE to a kernel source tree");
            None
        }
    }
}

/// Each check's identity and outcome (everything but the variant name and
/// the timing), per routine.
type Checks = BTreeMap<String, Vec<(u64, u64, u64, Value, Value, Value, Value)>>;

fn checks(doc: &Value, pick: impl Fn(&str, &str) -> bool) -> Checks {
    let mut out: Checks = BTreeMap::new();
    for c in doc["checks"].as_array().expect("checks") {
        let (r, v) = (
            c["routine"].as_str().unwrap(),
            c["variant"].as_str().unwrap(),
        );
        if !pick(r, v) {
            continue;
        }
        out.entry(r.to_string()).or_default().push((
            c["size"].as_u64().unwrap(),
            c["count"].as_u64().unwrap(),
            c["dst_offset"].as_u64().unwrap(),
            c["src_offset"].clone(),
            c["verdict"].clone(),
            c["first_bad_offset"].clone(),
            c["bad_bytes"].clone(),
        ));
    }
    for v in out.values_mut() {
        v.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    }
    out
}

fn family(routine: &str) -> &str {
    match routine {
        "clear_pages" => "clear_page",
        r => r,
    }
}

#[test]
fn kernel_objects_and_their_builtin_paths_verify_alike() {
    let Some(tree) = tree() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !kvm_available("differential") {
        return;
    }
    // The guest's CPUID view decides the alternatives: the built-in
    // variants it picks are the ones the guest may run (PVM hides ERMS).
    let kj = tmp_json("differential-kernel");
    let o = hypclear(&[
        "verify",
        "--kernel-tree",
        &tree,
        "--alternatives",
        "guest",
        "--seed",
        "9",
        "--json",
        kj.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let k = read_json(&kj);
    let paths: BTreeMap<String, String> =
        serde_json::from_value(k["kernel_paths"].clone()).expect("kernel_paths in the JSON");
    assert!(!paths.is_empty(), "no kernel paths: {k}");
    let config = k["kernel"]["link_config"].as_str().unwrap().to_string();
    let mut names: Vec<&str> = paths.values().map(String::as_str).collect();
    names.sort();
    names.dedup();
    let bj = tmp_json("differential-builtin");
    let o = hypclear(&[
        "verify",
        "--config",
        &config,
        "-f",
        &names.join(","),
        "--seed",
        "9",
        "--json",
        bj.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let b = read_json(&bj);
    let path = |r: &str| paths.get(family(r)).map(String::as_str);
    // The kernel's routine of each family: its `kernel` variant, or (x86
    // clear_page, three routines) the one the kernel picks.
    let kernel = checks(&k, |r, v| {
        v == "kernel" || (family(r) == "clear_page" && Some(v) == path(r))
    });
    let builtin = checks(&b, |r, v| Some(v) == path(r));
    for (r, kc) in &kernel {
        let bc = builtin
            .get(r)
            .unwrap_or_else(|| panic!("{r}: no built-in {:?} checks", path(r)));
        let pass = |v: &[(u64, u64, u64, Value, Value, Value, Value)]| {
            v.iter().filter(|c| c.4 == "pass").count()
        };
        println!(
            "{r}: kernel {} checks ({} pass) vs built-in {} {} checks ({} pass)",
            kc.len(),
            pass(kc),
            path(r).unwrap_or("?"),
            bc.len(),
            pass(bc)
        );
        assert!(!kc.is_empty());
        assert_eq!(
            kc,
            bc,
            "{r}: the kernel object and built-in {:?} differ check by check",
            path(r)
        );
    }
    assert!(kernel.len() >= 4, "routines compared: {:?}", kernel.keys());
}

#[test]
fn one_bench_interleaves_kernel_and_builtin_and_prints_the_ratio() {
    let Some(tree) = tree() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !kvm_available("differential bench") {
        return;
    }
    let j = tmp_json("differential-bench");
    let o = hypclear(&[
        "bench",
        "memset",
        "-s",
        "1MB",
        "-k",
        "4KB",
        "--sessions",
        "2",
        "--repeats",
        "3",
        "--max-warmup",
        "0",
        "--kernel-tree",
        &tree,
        "--builtin",
        "--json",
        j.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let ratio = out
        .lines()
        .find(|l| l.contains(" kernel / ") && l.contains(" = "))
        .unwrap_or_else(|| panic!("no kernel/built-in ratio line:\n{out}"));
    println!("{ratio}");
    let d = read_json(&j);
    let sides = d["sides"].as_array().expect("sides");
    assert_eq!(sides.len(), 2, "{d}");
    assert_eq!(sides[0]["kind"], "builtin");
    assert_eq!(sides[1]["kind"], "kernel-tree");
    assert!(sides[1]["kernel"]["tree"]["kernelversion"].is_string());
    // Sessions interleave: both sides ran every session.
    for c in d["cells"].as_array().unwrap() {
        let sessions: std::collections::BTreeSet<u64> = c["guest"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["session"].as_u64().unwrap())
            .collect();
        assert_eq!(sessions.len(), 2, "{}", c["axes"]);
    }
    // compare FILE pairs the kernel side with the built-in variant of its path.
    let o = hypclear(&["compare", j.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let cmp = String::from_utf8_lossy(&o.stdout);
    assert!(cmp.contains("kernel path"), "{cmp}");
    assert!(cmp.contains("memset path "), "{cmp}");
}
