//! Linux 7.x x86 trees: clear_page / clear_pages are inline asm in
//! asm/page_64.h, compiled out of line from hypclear's shim and checked on
//! every alternatives path. Needs HYPCLEAR_KERNEL_TREE_7 (a 7.x tree, e.g.
//! `bash ci/kernel-source.sh 7.3 | tail -n1`; prints SKIP without it).
mod common;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn tree7() -> Option<PathBuf> {
    match std::env::var_os("HYPCLEAR_KERNEL_TREE_7") {
        Some(p) => Some(PathBuf::from(p)),
        None => {
            common::skip("set HYPCLEAR_KERNEL_TREE_7 to a Linux 7.x source tree");
            None
        }
    }
}

/// Whether this host can run the x86 tree's objects.
fn x86_kvm(test: &str) -> bool {
    if std::env::consts::ARCH != "x86_64" {
        common::skip("the inline clear_pages() is x86's");
        return false;
    }
    common::kvm_available(test)
}

/// A file of the tree and how to rewrite it.
type Edit<'a> = (&'a str, &'a dyn Fn(&str) -> String);

/// A copy of `tree` (hard links) in the test's temporary directory `name`
/// whose files `edits` are rewritten (each a new file, so the original
/// tree keeps its inodes).
fn mutant(tree: &Path, name: &str, edits: &[Edit]) -> PathBuf {
    let copy = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    if copy.exists() {
        std::fs::remove_dir_all(&copy).expect("remove the old copy");
    }
    let st = std::process::Command::new("cp")
        .arg("-al")
        .arg(tree)
        .arg(&copy)
        .status()
        .expect("cp");
    assert!(st.success(), "cp -al {} {}", tree.display(), copy.display());
    for (rel, edit) in edits {
        let text = std::fs::read_to_string(tree.join(rel)).expect("the file to mutate");
        let new = edit(&text);
        assert_ne!(new, text, "{rel}: the edit changed nothing");
        std::fs::remove_file(copy.join(rel)).unwrap();
        std::fs::write(copy.join(rel), new).unwrap();
    }
    copy
}

/// `verify --kernel-tree T -r clear_page,clear_pages --json`: the exit
/// status, the output and the `routine variant` rows by verdict.
fn verify_clear(tree: &Path, json: &Path) -> (Option<i32>, String, Rows) {
    let t = tree.display().to_string();
    let j = json.display().to_string();
    let o = common::hypclear(&[
        "verify",
        "--kernel-tree",
        &t,
        "-r",
        "clear_page,clear_pages",
        "--json",
        &j,
    ]);
    let out = common::text(&o);
    println!("{out}");
    let rows = match o.status.code() {
        Some(0 | 1) => Rows::of(&common::read_json(&json.to_path_buf())),
        _ => Rows::default(),
    };
    (o.status.code(), out, rows)
}

#[derive(Default)]
struct Rows {
    pass: BTreeSet<String>,
    fail: BTreeSet<String>,
    /// clear_pages' sizes checked.
    sizes: BTreeSet<u64>,
}

impl Rows {
    fn of(doc: &serde_json::Value) -> Rows {
        let mut r = Rows::default();
        for c in doc["checks"].as_array().expect("checks") {
            let name = format!(
                "{} {}",
                c["routine"].as_str().unwrap(),
                c["variant"]
                    .as_str()
                    .unwrap()
                    .trim_end_matches(" [host pick]")
            );
            match c["verdict"].as_str() {
                Some("pass") => r.pass.insert(name),
                Some("fail") => r.fail.insert(name),
                _ => false,
            };
            if c["routine"] == "clear_pages" {
                r.sizes.insert(c["size"].as_u64().unwrap_or(0));
            }
        }
        r.pass.retain(|p| !r.fail.contains(p));
        r
    }
}

const ERMS: &str = "kernel: ERMS alternative";
const REP_GOOD: &str = "kernel: REP_GOOD alternative";
const UNROLLED: &str = "kernel: fallback __clear_pages_unrolled (no REP_GOOD, ERMS)";

fn row(routine: &str, path: &str) -> String {
    format!("{routine} {path}")
}

/// The 7.x tree's inline clear_pages(): each of its three paths is a row
/// of clear_page and of clear_pages, every one passes, clear_pages runs
/// the kernel's extents (one page, odd counts, 2 MiB, the 32 MiB batch).
#[test]
fn a_7x_tree_checks_every_path_of_its_inline_clear_pages() {
    let Some(tree) = tree7() else { return };
    if !x86_kvm("a_7x_tree_checks_every_path_of_its_inline_clear_pages") {
        return;
    }
    let json = common::tmp_json("kernel7-clear");
    let (code, out, rows) = verify_clear(&tree, &json);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("defines clear_pages() and clear_page() inline"),
        "{out}"
    );
    for routine in ["clear_page", "clear_pages"] {
        for path in [ERMS, REP_GOOD, UNROLLED] {
            assert!(
                rows.pass.contains(&row(routine, path)),
                "{routine} {path}: {out}"
            );
        }
    }
    for n in [1, 3, 512, 8192] {
        assert!(
            rows.sizes.contains(&(n * 4096)),
            "clear_pages of {n} pages: {out}"
        );
    }
    let doc = common::read_json(&json);
    assert_eq!(doc["kernel"]["clear_page"], "inline", "{}", doc["kernel"]);
    // The host's path, lined up with the built-in that runs it, read from
    // the tree's alternative (this host's features decide which).
    let paths = doc["kernel"]["paths"].to_string();
    assert!(
        paths.contains("built-in equivalents: clear_page "),
        "{paths}"
    );
    // The tree is unchanged: kbuild (the shim included) rebuilds nothing.
    let blob = common::tmp_json("kernel7-blob");
    let t = tree.display().to_string();
    let o = common::hypclear(&[
        "blob",
        "--kernel-tree",
        &t,
        "-o",
        &blob.display().to_string(),
    ]);
    let again = common::text(&o);
    assert_eq!(o.status.code(), Some(0), "{again}");
    for step in ["config", "prepare", "objects"] {
        assert!(
            again.contains(&format!("kbuild: {step} up to date")),
            "{again}"
        );
    }
    let _ = std::fs::remove_file(&blob);
}

/// `info --kernel-tree` on a 7.x tree: what its kernel would run here,
/// read from its alternatives (the inline clear_pages()' ALTERNATIVE_2
/// for clear_page), is what the removed table's 6.12 rules give. A copy
/// whose clear_pages() tests FSRM instead of REP_GOOD for its `rep stosq`
/// path changes the clear_page pick (on a guest without FSRM or ERMS: the
/// unrolled loop), and the same check fails on it.
#[test]
fn info_reports_a_7x_trees_own_picks() {
    let Some(tree) = tree7() else { return };
    if !x86_kvm("info_reports_a_7x_trees_own_picks") {
        return;
    }
    let doc = common::picks::info(&tree, "info-picks-7");
    common::picks::check(&doc).expect("the picks of the 6.12 rules");
    common::picks::check_setup(&tree, &doc);
    let (guest, _) = common::picks::guest(&doc);
    if !guest.contains("rep_good") || guest.contains("erms") || guest.contains("fsrm") {
        common::skip("the mutation needs a guest with REP_GOOD and without ERMS and FSRM");
        return;
    }
    let swap = |t: &str| {
        let from = "stosq\", X86_FEATURE_REP_GOOD";
        assert_eq!(t.matches(from).count(), 1, "asm/page_64.h changed shape");
        t.replace(from, "stosq\", X86_FEATURE_FSRM")
    };
    let copy = mutant(
        &tree,
        "kernel7-mutant-picks",
        &[("arch/x86/include/asm/page_64.h", &swap)],
    );
    let m = common::picks::info(&copy, "info-picks-7-mutant");
    let e = common::picks::check(&m).expect_err("the swapped feature shows in the picks");
    println!("mutant: {e}");
    assert!(e.contains("clear_page: orig, the table says rep"), "{e}");
    std::fs::remove_dir_all(&copy).ok();
}

/// Two bugs in one copy, each on paths of its own, each caught by a
/// default verify: the inline ERMS path one byte short (`rep stosb` with
/// rcx - 1: clear_page and clear_pages fail on ERMS), and
/// __clear_pages_unrolled skipping its first cache line when clearing
/// more than one page (only clear_pages' unrolled path fails; clear_page,
/// one page, passes). REP_GOOD passes.
#[test]
fn mutated_7x_clear_pages_paths_are_caught() {
    let Some(tree) = tree7() else { return };
    if !x86_kvm("mutated_7x_clear_pages_paths_are_caught") {
        return;
    }
    let erms = "\"rep stosb\", X86_FEATURE_ERMS";
    let short = |t: &str| {
        assert_eq!(t.matches(erms).count(), 1, "asm/page_64.h changed shape");
        t.replace(erms, "\"decq %%rcx; rep stosb\", X86_FEATURE_ERMS")
    };
    let lines = "\tshrq   $6, %rcx\n";
    let skip = |t: &str| {
        assert_eq!(t.matches(lines).count(), 1, "clear_page_64.S changed shape");
        t.replace(
            lines,
            &format!("{lines}\tcmpq $64, %rcx\n\tjbe 1f\n\taddq $64, %rdi\n\tdecq %rcx\n1:\n"),
        )
    };
    let copy = mutant(
        &tree,
        "kernel7-mutant",
        &[
            ("arch/x86/include/asm/page_64.h", &short),
            ("arch/x86/lib/clear_page_64.S", &skip),
        ],
    );
    let json = common::tmp_json("kernel7-mutant");
    let (code, out, rows) = verify_clear(&copy, &json);
    assert_eq!(code, Some(1), "{out}");
    let want: BTreeSet<String> = [
        row("clear_page", ERMS),
        row("clear_pages", ERMS),
        row("clear_pages", UNROLLED),
    ]
    .into();
    assert_eq!(rows.fail, want, "{out}");
    for r in [
        row("clear_page", UNROLLED),
        row("clear_page", REP_GOOD),
        row("clear_pages", REP_GOOD),
    ] {
        assert!(rows.pass.contains(&r), "{r}: {out}");
    }
    std::fs::remove_dir_all(&copy).ok();
}

/// A tree whose clear_page hypclear cannot find (here: the inline
/// clear_pages() renamed) exits 2 before kbuild, naming what it looked for
/// and the files it read.
#[test]
fn a_clear_page_that_cannot_be_found_is_named() {
    let Some(tree) = tree7() else { return };
    if std::env::consts::ARCH != "x86_64" {
        common::skip("the inline clear_pages() is x86's");
        return;
    }
    let rename = |t: &str| t.replace("inline void clear_pages(", "inline void clear_pages_x(");
    let copy = mutant(
        &tree,
        "kernel7-no-clear-page",
        &[("arch/x86/include/asm/page_64.h", &rename)],
    );
    let t = copy.display().to_string();
    let o = common::hypclear(&["verify", "--kernel-tree", &t]);
    let out = common::text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    for needle in [
        "clear_page_erms",
        "clear_pages()",
        "arch/x86/lib/clear_page_64.S",
        "arch/x86/include/asm/page_64.h",
    ] {
        assert!(out.contains(needle), "names {needle}: {out}");
    }
    assert!(!out.contains("undefined reference"), "{out}");
    std::fs::remove_dir_all(&copy).ok();
}
