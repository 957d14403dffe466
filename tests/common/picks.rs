//! What `info --kernel-tree` says a tree's kernel would run on this guest,
//! checked against the picks the hand table (removed in issue 39 item 6)
//! gave for the versions it knew: 6.1 and 6.12, and 7.x, whose memset,
//! memcpy, copy_page are 6.12's and whose inline clear_pages() chooses as
//! 6.x's clear_page(). The table lives on here as the tests' expectation
//! only; hypclear reads the tree.
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// `info --kernel-tree TREE --json`: the document (`kernel_picks`, `cpu`).
pub(crate) fn info(tree: &Path, name: &str) -> serde_json::Value {
    let t = tree.display().to_string();
    let (doc, out) = super::run_json(name, &["info", "--kernel-tree", &t]);
    println!("{out}");
    doc
}

/// The guest's features (CPUID with REP_GOOD) and whether it is AMD.
pub(crate) fn guest(doc: &serde_json::Value) -> (BTreeSet<String>, bool) {
    let mut f = BTreeSet::new();
    for pair in doc["cpu"]["features"].as_array().expect("cpu.features") {
        if pair[1] == true {
            f.insert(pair[0].as_str().expect("a name").to_string());
        }
    }
    (f, doc["cpu"]["x86_vendor"] == "amd")
}

/// The first tree's picks: family -> variant (`unknown` where it is).
pub(crate) fn picks(doc: &serde_json::Value) -> BTreeMap<String, String> {
    let t = &doc["kernel_picks"][0];
    let mut out = BTreeMap::new();
    for p in t["picks"].as_array().expect("kernel_picks[0].picks") {
        let v = p["variant"].as_str().unwrap_or("unknown");
        out.insert(p["family"].as_str().unwrap().to_string(), v.to_string());
    }
    out
}

/// The old table's pick of `family` for a kernel `version` on a guest with
/// `f` (`None`: a version it did not know).
fn table(version: &str, family: &str, f: &BTreeSet<String>, amd: bool) -> Option<&'static str> {
    let has = |x: &str| f.contains(x);
    let v612 = version.starts_with("6.12.") || version.starts_with("7.");
    let v61 = version.starts_with("6.1.");
    if !(v612 || v61) {
        return None;
    }
    Some(match family {
        "clear_page" if has("erms") => "erms",
        "clear_page" if has("rep_good") => "rep",
        "clear_page" => "orig",
        "copy_page" if has("rep_good") => "rep",
        "copy_page" => "regs",
        // 6.12: FSRS (AMD: implied by FSRM); 6.1: ERMS, then REP_GOOD.
        "memset" if v612 && (has("fsrs") || (amd && has("fsrm"))) => "erms",
        "memset" if v612 => "orig",
        "memset" if has("erms") => "erms",
        "memset" if has("rep_good") => "rep_good",
        "memset" => "orig",
        "memcpy" if v612 && has("fsrm") => "fsrm",
        "memcpy" if v612 => "orig",
        "memcpy" if has("erms") => "fsrm",
        "memcpy" if has("rep_good") => "rep_good",
        _ => "orig",
    })
}

/// `Ok` when the document's picks are the table's for its tree's version
/// (for a version the table did not know: when none is unknown), else
/// the differences.
pub(crate) fn check(doc: &serde_json::Value) -> Result<(), String> {
    let version = doc["kernel_picks"][0]["kernel"].as_str().unwrap_or("");
    let (f, amd) = guest(doc);
    let got = picks(doc);
    if got.is_empty() {
        return Err("no kernel_picks".into());
    }
    let mut diffs = Vec::new();
    for (family, variant) in &got {
        let want = table(version, family, &f, amd).unwrap_or(variant);
        if variant == "unknown" || variant != want {
            diffs.push(format!("{family}: {variant}, the table says {want}"));
        }
    }
    match diffs.is_empty() {
        true => Ok(()),
        false => Err(format!("kernel {version} on {f:?}: {}", diffs.join("; "))),
    }
}

/// Whether the tree's amd.c sets FSRS from FSRM exactly when the blob
/// recorded that implication (the text searched for here independently).
pub(crate) fn check_setup(tree: &Path, doc: &serde_json::Value) {
    let amd = std::fs::read_to_string(tree.join("arch/x86/kernel/cpu/amd.c")).expect("amd.c");
    let in_text = amd.contains("set_cpu_cap(c, X86_FEATURE_FSRS)");
    let setup = &doc["kernel"]["cpu_setup"];
    let recorded = setup["implied"]
        .as_array()
        .expect("kernel.cpu_setup.implied")
        .iter()
        .any(|i| i["when"] == "fsrm" && i["sets"] == "fsrs");
    assert_eq!(in_text, recorded, "{setup}");
    assert!(
        setup["files"]
            .to_string()
            .contains("arch/x86/kernel/cpu/amd.c"),
        "{setup}"
    );
}
