//! Build the library objects of a real kernel tree and parse their
//! alternatives. Needs HYPCLEAR_KERNEL_TREE (prints SKIP without it);
//! HYPCLEAR_KERNEL_ARCH=aarch64 cross-builds the nVHE objects, and
//! HYPCLEAR_KERNEL_BUILD_DIR overrides the cache directory.
mod common;
use hypclear_kernel::alternatives::{Image, feature_names, host_features};
use hypclear_kernel::blob::{MakeRequest, make, read_meta};
use hypclear_kernel::kbuild::{self, ConfigSource, Request, Step, StepEvent};
use hypclear_kernel::tree::{Arch, KernelTree};
use std::path::PathBuf;

#[test]
fn builds_and_parses_a_real_tree() {
    let Some(path) = std::env::var_os("HYPCLEAR_KERNEL_TREE") else {
        common::skip("set HYPCLEAR_KERNEL_TREE to a kernel source tree");
        return;
    };
    let tree = KernelTree::open(&PathBuf::from(path)).expect("a kernel tree");
    let arch = match std::env::var("HYPCLEAR_KERNEL_ARCH").as_deref() {
        Ok("aarch64") => Some(Arch::Aarch64),
        Ok("x86_64") => Some(Arch::X86_64),
        _ => None,
    };
    let arch = tree.resolve_arch(arch).expect("an architecture");
    let link = tree.link_config(arch).expect("a known link configuration");
    println!(
        "{arch} link configuration: {} ({})",
        link.config, link.reason
    );
    let id = tree.identity().expect("identity");
    println!(
        "tree {} kernelversion {} git {:?}",
        id.path.display(),
        id.kernelversion,
        id.git_head
    );
    let req = Request {
        arch,
        config: ConfigSource::Defconfig,
        build_dir: std::env::var_os("HYPCLEAR_KERNEL_BUILD_DIR").map(PathBuf::from),
    };
    let report = |step: Step, ev: StepEvent| println!("  {step}: {ev:?}");
    let out = kbuild::build(&tree, &req, report).expect("kbuild");
    println!(
        "build dir {} config {}",
        out.build_dir.display(),
        out.config_hash
    );
    for (step, t) in &out.timings {
        println!("  timing {step}: {t:?}");
    }
    // A second run with nothing changed runs no make step.
    let t = std::time::Instant::now();
    let again = kbuild::build(&tree, &req, |_, _| {}).expect("kbuild again");
    println!("second run: {:?}", t.elapsed());
    assert!(
        again.timings.iter().all(|(_, t)| t.is_none()),
        "second run rebuilt: {:?}",
        again.timings
    );

    parse_and_apply_the_objects(&tree, arch, &out);
    link_with_the_pipeline(&tree, arch);
}

/// Every built object parses, its alternatives apply (with the host's
/// features when it is the host's architecture), and no replacement is
/// longer than its site.
fn parse_and_apply_the_objects(tree: &KernelTree, arch: Arch, out: &kbuild::Output) {
    let machine = match arch {
        Arch::X86_64 => object::elf::EM_X86_64,
        Arch::Aarch64 => object::elf::EM_AARCH64,
    };
    let names = feature_names(machine, tree.root(), &out.build_dir).expect("feature names");
    assert!(!names.names.is_empty());
    let host = host_features(machine);
    let mut total = 0;
    for o in &out.objects {
        let bytes = std::fs::read(&o.path).expect("object");
        let mut img = Image::from_elf(&bytes, None).expect("parse");
        let returns = img.return_sites.len();
        let applied = if img.machine == machine && Arch::host() == Some(arch) {
            img.patch_returns().expect("return sites");
            img.apply(&names, &host).expect("apply")
        } else {
            img.apply(&names, &Default::default()).expect("apply")
        };
        println!(
            "{}: {} alternatives, {returns} return sites",
            o.name,
            img.sites.len()
        );
        for a in &applied {
            println!("    {a}");
        }
        total += img.sites.len();
        for s in &img.sites {
            assert!(s.repl_len <= s.orig_len, "{}: {s:?}", o.name);
        }
    }
    if arch == Arch::X86_64 {
        assert!(total > 0, "x86 memset/memcpy/copy_page carry alternatives");
        // 6.x: the tree's C chooses among clear_page_{orig,rep,erms}.
        let detected = tree.link_config(arch).expect("link configuration");
        let choice = detected
            .clear_page_choice
            .expect("the tree's alternative_call_2 in asm/page_64.h is read");
        assert_eq!(choice.default, "clear_page_orig", "{choice:?}");
        let (pick, why) = choice.pick(&host);
        println!(
            "clear_page: {pick} ({why}, alternative_call_2 in {})",
            choice.file
        );
    }
}

/// The runtime link (the one pipeline of blob/link.rs) on the built
/// objects: the blob file passes the relocation policy again on reading,
/// and its alternatives apply.
fn link_with_the_pipeline(tree: &KernelTree, arch: Arch) {
    let file = std::env::temp_dir().join(format!("hypclear-kt-{}-{arch}.blob", std::process::id()));
    let req = MakeRequest {
        tree: tree.root().to_path_buf(),
        arch: Some(arch),
        config: Some("defconfig".into()),
        build_dir: std::env::var_os("HYPCLEAR_KERNEL_BUILD_DIR").map(PathBuf::from),
    };
    let made = make(&req, Some(&file), |l| println!("  {l}")).expect("blob");
    let bytes = std::fs::read(&made.file).expect("blob file");
    // A side's blob (no -o) stays readable when the next hypclear to link
    // the tree removes the link files (a CI run read it after they were
    // gone): the same bytes, at a name of their own.
    let side = make(&req, None, |_| {}).expect("the side's blob").file;
    let work = side.with_file_name("hypclear-blob");
    assert!(work.is_dir(), "{} is beside the link files", side.display());
    std::fs::remove_dir_all(&work).unwrap();
    assert_eq!(std::fs::read(&side).expect("the side's blob"), bytes);
    let again = make(&req, None, |_| {}).expect("the side's blob").file;
    assert_eq!(again, side, "the same blob, the same file");
    let meta = read_meta(&made.file, &bytes).expect("valid blob");
    assert_eq!(meta, made.meta);
    println!(
        "linked {}: {} configuration ({}), rows {:?}",
        made.file.display(),
        meta.link_config,
        meta.link_reason,
        meta.rows
    );
    let mut img = Image::from_elf(&bytes, None).expect("linked image");
    // The image the loader builds from the ELF (the aarch64 flat Image)
    // is what objcopy -O binary makes of it.
    let objcopy = match (Arch::host(), arch) {
        (Some(h), a) if h == a => "objcopy".to_string(),
        (_, Arch::Aarch64) => "aarch64-linux-gnu-objcopy".into(),
        (_, Arch::X86_64) => "x86_64-linux-gnu-objcopy".into(),
    };
    let flat = made.file.with_extension("bin");
    let st = std::process::Command::new(&objcopy)
        .args(["-O", "binary"])
        .arg(&made.file)
        .arg(&flat)
        .status()
        .expect("objcopy");
    assert!(st.success());
    let want = std::fs::read(&flat).unwrap();
    assert!(
        img.bytes.len() >= want.len(),
        "image shorter than objcopy's"
    );
    assert_eq!(
        &img.bytes[..want.len()],
        &want[..],
        "image differs from objcopy -O binary"
    );
    std::fs::remove_file(&flat).ok();
    img.strip_symbol_prefix("__hypclear_");
    for s in &img.sites {
        assert_ne!(
            img.function_at(s.orig).unwrap_or("?"),
            "?",
            "alternative outside any routine: {s:?}"
        );
    }
    std::fs::remove_file(&made.file).ok();
}

fn tree_env() -> Option<PathBuf> {
    match std::env::var_os("HYPCLEAR_KERNEL_TREE") {
        Some(p) => Some(PathBuf::from(p)),
        None => {
            common::skip("set HYPCLEAR_KERNEL_TREE to a kernel source tree");
            None
        }
    }
}

/// `verify --kernel-tree` end to end (kbuild, link, alternatives, the
/// suite), then the same blob as a file with `--blob`, and a damaged file.
#[test]
fn verify_kernel_tree_end_to_end() {
    let Some(tree) = tree_env() else { return };
    if !common::kvm_available("verify_kernel_tree_end_to_end") {
        return;
    }
    let t = tree.to_str().expect("UTF-8 path");
    let json = common::tmp_json("kernel-verify");
    let o = common::hypclear(&[
        "verify",
        "--kernel-tree",
        t,
        "--json",
        json.to_str().unwrap(),
    ]);
    let out = common::text(&o);
    println!("{out}");
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(
        out.contains("memset: "),
        "the memset path is reported: {out}"
    );
    assert!(out.contains("link configuration "), "{out}");
    let doc = common::read_json(&json);
    let k = &doc["kernel"];
    assert!(
        k["tree"]["kernelversion"]
            .as_str()
            .is_some_and(|v| !v.is_empty()),
        "{k}"
    );
    assert!(k["paths"].as_array().is_some_and(|p| !p.is_empty()), "{k}");
    assert_eq!(doc["summary"]["failed"], 0);

    let file = json.with_extension("blob");
    let f = file.to_str().unwrap();
    let o = common::hypclear(&["blob", "--kernel-tree", t, "-o", f]);
    assert_eq!(o.status.code(), Some(0), "{}", common::text(&o));
    let o = common::hypclear(&[
        "--blob",
        f,
        "verify",
        "--routine",
        "memset",
        "--size",
        "4KB",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", common::text(&o));
    // A file name is text hypclear did not write: its table column, label
    // and messages show the escape and the bidi override escaped.
    let hostile = json.with_file_name("evil\x1b]0;owned\x07\u{202e}name.blob");
    std::fs::copy(&file, &hostile).unwrap();
    let h = hostile.to_str().unwrap();
    let o = common::hypclear(&["--blob", h, "verify", "--routine", "memset", "-s", "4KB"]);
    let out = common::text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(
        !out.contains('\x1b') && !out.contains('\u{202e}') && !out.contains('\x07'),
        "raw control characters reach the terminal: {out:?}"
    );
    std::fs::write(&hostile, b"not a blob\x1b[2J").unwrap();
    let o = common::hypclear(&["--blob", h, "run"]);
    let out = common::text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(
        !out.contains('\x1b'),
        "the error quotes the name raw: {out:?}"
    );
    std::fs::remove_file(&hostile).unwrap();

    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let o = common::hypclear(&["--blob", f, "run"]);
    let out = common::text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(
        out.contains("hypclear blob --kernel-tree"),
        "names the fix: {out}"
    );
}

/// A copy of the tree (hard links) whose memset_orig drops the last store
/// of its 64-byte loop must fail verification at offset 56; the unmodified
/// tree passes the same checks. `--alternatives none` makes memset take
/// memset_orig whatever the CPU.
#[test]
fn broken_kernel_memset_is_caught() {
    let Some(tree) = tree_env() else { return };
    if std::env::consts::ARCH != "x86_64" {
        common::skip("the mutation is in arch/x86/lib/memset_64.S");
        return;
    }
    if !common::kvm_available("broken_kernel_memset_is_caught") {
        return;
    }
    // The patch: one tail store of memset_orig's 64-byte loop removed.
    let store = "movq  %rax,56(%rdi)";
    let copy = mutant(&tree, "kernel-mutant", "arch/x86/lib/memset_64.S", |text| {
        assert_eq!(text.matches(store).count(), 1, "memset_64.S changed shape");
        text.lines()
            .filter(|l| l.trim() != store)
            .map(|l| format!("{l}\n"))
            .collect()
    });

    let args = |t: &PathBuf| {
        vec![
            "verify".to_string(),
            "--kernel-tree".into(),
            t.display().to_string(),
            "--routine".into(),
            "memset".into(),
            "--alternatives".into(),
            "none".into(),
        ]
    };
    let run = |t: &PathBuf| {
        let a = args(t);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        common::hypclear(&a)
    };
    let o = run(&copy);
    let out = common::text(&o);
    println!("{out}");
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("first at offset 56"), "{out}");
    let o = run(&tree);
    assert_eq!(o.status.code(), Some(0), "{}", common::text(&o));
    std::fs::remove_dir_all(&copy).ok();
}

/// `info --kernel-tree` says what the tree's kernel would run on this
/// guest, read from the tree's alternatives: the picks the removed hand
/// table gave for 6.1 and 6.12, and amd.c's FSRM -> FSRS recorded exactly
/// when the tree has it. A copy whose memset alternative tests another
/// feature (6.12: FSRS -> REP_GOOD; 6.1: REP_GOOD -> FSRM) changes the
/// memset pick, and the same check fails on it.
#[test]
fn info_reports_the_trees_own_picks() {
    let Some(tree) = tree_env() else { return };
    if std::env::consts::ARCH != "x86_64" {
        common::skip("the picks checked are x86's");
        return;
    }
    if !common::kvm_available("info_reports_the_trees_own_picks") {
        return;
    }
    let doc = common::picks::info(&tree, "info-picks");
    common::picks::check(&doc).expect("the picks the table gave");
    common::picks::check_setup(&tree, &doc);
    let (guest, _) = common::picks::guest(&doc);
    if !guest.contains("rep_good") {
        common::skip("the mutation needs a guest with REP_GOOD");
        return;
    }
    let rel = "arch/x86/lib/memset_64.S";
    let text = std::fs::read_to_string(tree.join(rel)).expect("memset_64.S");
    let (from, to, want) = match text.contains("X86_FEATURE_FSRS") {
        true => ("X86_FEATURE_FSRS", "X86_FEATURE_REP_GOOD", "rep_good"),
        false => ("X86_FEATURE_REP_GOOD", "X86_FEATURE_FSRM", "orig"),
    };
    // Named per tree: kbuild's cache directory is keyed by the path.
    let leaf = tree
        .file_name()
        .map_or("tree".into(), |n| n.to_string_lossy());
    let copy = mutant(&tree, &format!("kernel-mutant-picks-{leaf}"), rel, |t| {
        assert!(t.contains(from), "memset_64.S changed shape");
        t.replacen(from, to, 1)
    });
    let m = common::picks::info(&copy, "info-picks-mutant");
    let e = common::picks::check(&m).expect_err("the swapped feature shows in the picks");
    println!("mutant: {e}");
    assert!(e.contains("memset: ") && !e.contains("memcpy: "), "{e}");
    assert_eq!(common::picks::picks(&m)["memset"], want, "{e}");
    std::fs::remove_dir_all(&copy).ok();
}

/// A copy of `tree` (hard links) in the test's temporary directory `name`
/// whose file `rel` is `edit` of the original (written as a new file, so
/// the original tree keeps its inode).
fn mutant(tree: &PathBuf, name: &str, rel: &str, edit: impl Fn(&str) -> String) -> PathBuf {
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
    let text = std::fs::read_to_string(tree.join(rel)).expect("the file to mutate");
    std::fs::remove_file(copy.join(rel)).unwrap();
    std::fs::write(copy.join(rel), edit(&text)).unwrap();
    copy
}

/// A tree whose x86 `__memset` FSRS path (`rep stosb`) stores one byte
/// short for odd sizes: default `verify --kernel-tree` checks every
/// alternatives path, so it fails on the FSRS row even on a CPU without
/// FSRS (where `--alternatives host` never runs that path and passes);
/// the unmodified tree passes the same default run.
#[test]
fn every_alternatives_path_is_verified() {
    let Some(tree) = tree_env() else { return };
    if std::env::consts::ARCH != "x86_64" {
        println!("SKIP: the mutation is in arch/x86/lib/memset_64.S");
        return;
    }
    if !common::kvm_available("every_alternatives_path_is_verified") {
        return;
    }
    let count = "\tmovq %rdx,%rcx\n";
    let copy = mutant(
        &tree,
        "kernel-mutant-fsrs",
        "arch/x86/lib/memset_64.S",
        |text| {
            assert_eq!(text.matches(count).count(), 1, "memset_64.S changed shape");
            text.replace(count, &format!("{count}\tandq $-2,%rcx\n"))
        },
    );
    let verify = |t: &PathBuf, extra: &[&str], json: &PathBuf| {
        let t = t.display().to_string();
        let j = json.display().to_string();
        let mut a = vec!["verify", "--kernel-tree", &t, "--json", &j];
        a.extend(extra);
        common::hypclear(&a)
    };
    let json = common::tmp_json("kernel-every-path");
    let o = verify(&copy, &[], &json);
    let out = common::text(&o);
    println!("{out}");
    assert_eq!(o.status.code(), Some(1), "{out}");
    let doc = common::read_json(&json);
    let rows = |doc: &serde_json::Value, verdict: &str| -> std::collections::BTreeSet<String> {
        doc["checks"]
            .as_array()
            .expect("checks")
            .iter()
            .filter(|c| c["verdict"] == verdict)
            .map(|c| {
                format!(
                    "{} {}",
                    c["routine"].as_str().unwrap(),
                    c["variant"].as_str().unwrap()
                )
            })
            .collect()
    };
    let failed = rows(&doc, "fail");
    assert_eq!(
        failed.iter().map(String::as_str).collect::<Vec<_>>(),
        ["memset kernel: FSRS alternative"],
        "only the FSRS path fails: {out}"
    );
    assert!(
        out.lines()
            .any(|l| l.contains("kernel: FSRS alternative") && l.contains("size 1 dst+0")),
        "the row names the path and the first bad check: {out}"
    );
    assert!(
        rows(&doc, "pass")
            .iter()
            .any(|r| r.starts_with("memset kernel: fallback memset_orig")),
        "the memset_orig path passes: {out}"
    );
    let host = hypclear_kernel::alternatives::host_features(object::elf::EM_X86_64);
    if !host.contains("fsrs") {
        // The blind spot this closes: the host's single path passes.
        let o = verify(&copy, &["--alternatives", "host"], &json);
        assert_eq!(o.status.code(), Some(0), "{}", common::text(&o));
    }
    let o = verify(&tree, &[], &json);
    let out = common::text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    let passed = rows(&common::read_json(&json), "pass");
    assert!(
        passed.contains("memset kernel: FSRS alternative"),
        "the unmodified FSRS path runs and passes: {out}"
    );
    std::fs::remove_dir_all(&copy).ok();
}

/// A tree whose x86 `__memcpy` FSRM path (`rep movsb`) copies one byte
/// short: every check of that path with at least one byte must fail, short
/// by exactly its last byte. A copy's pre-image is the complement of its
/// source (or a passed copy's result at a shift up to 64 bytes away, which
/// the source stream never repeats within), so no unwritten byte can match
/// what it should have become. With the pre-image the suite used before
/// (the target pattern, which equals a random source byte 1 time in 256)
/// this test fails: the short copy passes about that share of the checks
/// (first at size 7, dst+1, src+63 in the run that proved it).
#[test]
fn a_copy_short_by_one_fails_at_every_size() {
    let Some(tree) = tree_env() else { return };
    if std::env::consts::ARCH != "x86_64" {
        println!("SKIP: the mutation is in arch/x86/lib/memcpy_64.S");
        return;
    }
    if !common::kvm_available("a_copy_short_by_one_fails_at_every_size") {
        return;
    }
    let count = "\tmovq %rdx, %rcx\n\trep movsb\n";
    let copy = mutant(
        &tree,
        "kernel-mutant-memcpy",
        "arch/x86/lib/memcpy_64.S",
        |text| {
            assert_eq!(text.matches(count).count(), 1, "memcpy_64.S changed shape");
            // rcx = max(n - 1, 0)
            text.replace(
                count,
                "\tmovq %rdx, %rcx\n\tsubq $1, %rcx\n\tadcq $0, %rcx\n\trep movsb\n",
            )
        },
    );
    let json = common::tmp_json("kernel-memcpy-short");
    let t = copy.display().to_string();
    let j = json.display().to_string();
    let o = common::hypclear(&["verify", "--kernel-tree", &t, "-r", "memcpy", "--json", &j]);
    let out = common::text(&o);
    println!("{out}");
    assert_eq!(o.status.code(), Some(1), "{out}");
    let doc = common::read_json(&json);
    let fsrm: Vec<&serde_json::Value> = doc["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| {
            c["variant"]
                .as_str()
                .is_some_and(|v| v.contains("FSRM alternative"))
        })
        .collect();
    assert!(fsrm.len() > 1000, "the FSRM path ran: {out}");
    for c in &fsrm {
        let size = c["size"].as_u64().unwrap();
        if size == 0 {
            assert_eq!(c["verdict"], "pass", "{c}");
            continue;
        }
        assert_eq!(c["verdict"], "fail", "a short copy passed: {c}");
        assert_eq!(c["first_bad_offset"].as_u64(), Some(size - 1), "{c}");
        assert_eq!(c["breakdown"]["not_written"], 1, "{c}");
        assert_eq!(c["bad_bytes"], 1, "{c}");
    }
    std::fs::remove_dir_all(&copy).ok();
}

/// `bench --every-path` times each memset path the guest can run as its
/// own side, the host's pick first; without it bench times the pick only.
#[test]
fn bench_every_path_times_each_path() {
    let Some(tree) = tree_env() else { return };
    if std::env::consts::ARCH != "x86_64" {
        println!("SKIP: the x86 6.12 memset paths are checked by name");
        return;
    }
    if !common::kvm_available("bench_every_path_times_each_path") {
        return;
    }
    let t = tree.display().to_string();
    let json = common::tmp_json("kernel-bench-every-path");
    let j = json.display().to_string();
    let bench = |extra: &[&str]| {
        let mut a = vec![
            "bench",
            "memset",
            "-s",
            "1MB",
            "-k",
            "4KB",
            "--sessions",
            "1",
            "--repeats",
            "1",
            "--kernel-tree",
            &t,
            "--json",
            &j,
        ];
        a.extend(extra);
        let o = common::hypclear(&a);
        assert_eq!(o.status.code(), Some(0), "{}", common::text(&o));
        let doc = common::read_json(&json);
        let names: Vec<String> = doc["sides"]
            .as_array()
            .expect("sides")
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_string())
            .collect();
        names
    };
    let every = bench(&["--every-path"]);
    println!("{every:?}");
    assert_eq!(every.len(), 2, "{every:?}");
    assert!(every[0].ends_with("[host pick])"), "{every:?}");
    assert!(
        every.iter().any(|n| n.contains("(FSRS alternative")),
        "{every:?}"
    );
    let pick = bench(&[]);
    assert_eq!(pick.len(), 1, "{pick:?}");
    let o = common::hypclear(&[
        "bench",
        "memset",
        "--every-path",
        "--kernel-tree",
        &t,
        "--alternatives",
        "host",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", common::text(&o));
}

/// Bugs only the call contract sees, each in one routine of the 6.12
/// tree, the memory every routine writes still right: memset_orig keeps
/// dst in the callee-saved %rbx instead of %r10 (clobbering the caller's
/// %rbx), the FSRS path of `__memset` returns `dst + n` (it reloads %rdi
/// after `rep stosb` advanced it), and memcpy_orig's 0..3-byte tail
/// returns with DF set. A default verify fails each routine for its own
/// breach and nothing else; the unmutated tree passes the same run
/// (`verify_kernel_tree_end_to_end`).
#[test]
fn call_contract_breaches_in_a_tree_are_caught() {
    let Some(tree) = tree_env() else { return };
    if std::env::consts::ARCH != "x86_64" {
        common::skip("the mutations are in arch/x86/lib/mem{set,cpy}_64.S");
        return;
    }
    if !common::kvm_available("call_contract_breaches_in_a_tree_are_caught") {
        return;
    }
    let copy = mutant(
        &tree,
        "kernel-mutant-contract",
        "arch/x86/lib/memset_64.S",
        |t| {
            let edits = [
                ("\tmovq %rdi,%r10\n", "\tmovq %rdi,%rbx\n"),
                ("\tmovq\t%r10,%rax\n", "\tmovq\t%rbx,%rax\n"),
                ("\tmovq %r9,%rax\n", "\tmovq %rdi,%rax\n"),
            ];
            edits.iter().fold(t.to_string(), |t, (a, b)| {
                assert_eq!(t.matches(a).count(), 1, "memset_64.S changed shape: {a:?}");
                t.replace(a, b)
            })
        },
    );
    let rel = "arch/x86/lib/memcpy_64.S";
    let text = std::fs::read_to_string(tree.join(rel)).expect("memcpy_64.S");
    let end = ".Lend:\n\tRET\n";
    assert_eq!(text.matches(end).count(), 1, "memcpy_64.S changed shape");
    std::fs::remove_file(copy.join(rel)).unwrap();
    std::fs::write(copy.join(rel), text.replace(end, ".Lend:\n\tstd\n\tRET\n")).unwrap();

    let json = common::tmp_json("kernel-contract");
    let (t, j) = (copy.display().to_string(), json.display().to_string());
    let o = common::hypclear(&[
        "verify",
        "--kernel-tree",
        &t,
        "-r",
        "memset,memcpy",
        "--json",
        &j,
    ]);
    let out = common::text(&o);
    println!("{out}");
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("callee-saved %rbx changed"), "{out}");
    assert!(out.contains("returned with DF=1"), "{out}");
    assert!(out.contains(", want dst 0x"), "{out}");
    let doc = common::read_json(&json);
    let checks = doc["checks"].as_array().expect("checks");
    // The breach kinds of a row's checks, by size (0 for every size).
    let kinds = |routine: &str, variant: &str| {
        let mut by_size =
            std::collections::BTreeMap::<u64, std::collections::BTreeSet<String>>::new();
        for c in checks.iter().filter(|c| {
            c["routine"] == routine && c["variant"].as_str().is_some_and(|v| v.contains(variant))
        }) {
            assert_eq!(c["bad_bytes"], 0, "the memory is right: {c}");
            let kind = c["contract"]["kind"].as_str().unwrap_or("none").to_string();
            by_size
                .entry(c["size"].as_u64().unwrap())
                .or_default()
                .insert(kind);
        }
        by_size
    };
    let only = |rows: &std::collections::BTreeMap<u64, std::collections::BTreeSet<String>>,
                sizes: &dyn Fn(u64) -> bool,
                kind: &str| {
        assert!(!rows.is_empty());
        for (size, k) in rows {
            let want = if sizes(*size) { kind } else { "none" };
            assert!(
                k.len() == 1 && k.contains(want),
                "size {size}: {k:?}, want {want}"
            );
        }
    };
    // memset_orig (the FSRS row's fallback) at every size; the FSRS path
    // returns dst + n, right only for n = 0.
    only(&kinds("memset", "memset_orig"), &|_| true, "callee_saved");
    only(&kinds("memset", "FSRS alternative"), &|n| n > 0, "return");
    // memcpy_orig ends at .Lend for 0..3 bytes and for some sizes whose
    // tail is empty; its other ends keep DF clear.
    let memcpy = kinds("memcpy", "memcpy_orig");
    for (size, k) in &memcpy {
        let flags = k.len() == 1 && k.contains("flags");
        assert!(
            flags || *size > 3 && k.len() == 1 && k.contains("none"),
            "size {size}: {k:?}"
        );
    }
    assert!(memcpy.values().any(|k| k.contains("none")), "{memcpy:?}");
    for c in checks.iter().filter(|c| c["contract"]["kind"] == "return") {
        let (got, want) = (
            c["contract"]["got"].as_u64(),
            c["contract"]["want"].as_u64(),
        );
        assert_eq!(got, want.map(|w| w + c["size"].as_u64().unwrap()), "{c}");
    }
    std::fs::remove_dir_all(&copy).ok();
}

/// A routine that writes one byte 64 KiB past the end of its target (in
/// the 6.12 tree's memset_orig, after its last store): beyond every guard,
/// so only the dirty-page log sees it. A default verify fails every
/// memset_orig check for exactly that byte, located ("stray write: 1 bytes
/// at ..., 65536 bytes past the target end"), also where the batch packed
/// another check's window there: the batch is re-run check by check, so
/// the neighbour (the FSRS path's checks) is never blamed.
#[test]
fn a_stray_write_far_past_the_target_is_caught_and_located() {
    let Some(tree) = tree_env() else { return };
    if std::env::consts::ARCH != "x86_64" {
        common::skip("the mutation is in arch/x86/lib/memset_64.S");
        return;
    }
    if !common::kvm_available("a_stray_write_far_past_the_target_is_caught_and_located") {
        return;
    }
    let end = ".Lende:\n\tmovq\t%r10,%rax\n";
    let copy = mutant(
        &tree,
        "kernel-mutant-stray",
        "arch/x86/lib/memset_64.S",
        |t| {
            assert_eq!(t.matches(end).count(), 1, "memset_64.S changed shape");
            t.replace(
                end,
                ".Lende:\n\tmovb %al,0x10000(%rdi)\n\tmovq\t%r10,%rax\n",
            )
        },
    );
    let json = common::tmp_json("kernel-stray");
    let (t, j) = (copy.display().to_string(), json.display().to_string());
    let o = common::hypclear(&["verify", "--kernel-tree", &t, "-r", "memset", "--json", &j]);
    let out = common::text(&o);
    println!("{out}");
    assert_eq!(o.status.code(), Some(1), "{out}");
    let doc = common::read_json(&json);
    let checks = doc["checks"].as_array().expect("checks");
    let (mut orig, mut fsrs) = (0, 0);
    for c in checks {
        let variant = c["variant"].as_str().unwrap_or_default();
        if variant.contains("memset_orig") {
            orig += 1;
            assert_eq!(c["verdict"], "fail", "{c}");
            assert_eq!(c["breakdown"]["outside"], 1, "{c}");
            assert_eq!(c["bad_bytes"], 1, "{c}");
            let reason = c["reason"].as_str().unwrap_or_default();
            assert!(reason.starts_with("stray write: 1 bytes at 0x"), "{c}");
            assert!(reason.contains("(65536 bytes past the target end)"), "{c}");
        } else if variant.contains("FSRS alternative") {
            fsrs += 1;
            assert_eq!(c["verdict"], "pass", "a neighbour was blamed: {c}");
        }
    }
    assert!(
        orig > 1000 && fsrs > 1000,
        "{orig} memset_orig, {fsrs} FSRS checks"
    );
    std::fs::remove_dir_all(&copy).ok();
}

/// memcpy_orig's 4..7-byte path loading its last word 8 bytes wide (the
/// store stays 4 bytes, so every copy is right): it reads up to 4 bytes past
/// the end of its source, which one big mapping never notices and the
/// hyp's sparse mappings turn into a panic. The default geometry puts a
/// copy's source end on the unmapped page at every residue mod 64: the
/// sizes 4..7 there fault ("over-read: faulted 0 bytes past the source
/// end"), every other check passes.
#[test]
fn an_over_read_past_the_source_faults_at_the_edge() {
    let Some(tree) = tree_env() else { return };
    if std::env::consts::ARCH != "x86_64" {
        common::skip("the mutation is in arch/x86/lib/memcpy_64.S");
        return;
    }
    if !common::kvm_available("an_over_read_past_the_source_faults_at_the_edge") {
        return;
    }
    let load = "\tmovl -4(%rsi, %rdx), %r8d\n";
    let copy = mutant(
        &tree,
        "kernel-mutant-overread",
        "arch/x86/lib/memcpy_64.S",
        |t| {
            assert_eq!(t.matches(load).count(), 1, "memcpy_64.S changed shape");
            t.replace(load, "\tmovq -4(%rsi, %rdx), %r8\n")
        },
    );
    let json = common::tmp_json("kernel-overread");
    let (t, j) = (copy.display().to_string(), json.display().to_string());
    let o = common::hypclear(&["verify", "--kernel-tree", &t, "-r", "memcpy", "--json", &j]);
    let out = common::text(&o);
    println!("{out}");
    assert_eq!(o.status.code(), Some(1), "{out}");
    let doc = common::read_json(&json);
    let mut faulted = std::collections::BTreeSet::new();
    for c in doc["checks"].as_array().expect("checks") {
        let orig = c["variant"]
            .as_str()
            .is_some_and(|v| v.contains("memcpy_orig"));
        if c["verdict"] == "pass" {
            continue;
        }
        assert!(orig, "only memcpy_orig reads past its source: {c}");
        assert_eq!(c["edge"], "source_end", "{c}");
        assert_eq!(c["contract"]["kind"], "fault", "{c}");
        let reason = c["reason"].as_str().unwrap_or_default();
        assert!(
            reason.starts_with("over-read: faulted 0 bytes past the source end"),
            "{c}"
        );
        faulted.insert(c["size"].as_u64().unwrap());
    }
    assert_eq!(faulted, (4..8).collect(), "{out}");
    std::fs::remove_dir_all(&copy).ok();
}

/// The memset_orig path of the kernel's `__memset` with a tail one byte
/// short when the length left after its 8-byte head alignment is 37 mod 64
/// and above 1024 bytes, then with its fill byte sign-extended before the
/// 0x0101010101010101 multiplication: default `verify --kernel-tree`
/// (its geometry alone: every residue mod 64 from 1 KiB, 0xff among the
/// fills) fails each on that path only, at a seed whose own fill byte has
/// its top bit clear; the unmodified tree passes the same run. Before the
/// residues and 0xff were in the default geometry, both passed (sizes
/// above 1024 had residues 0, 1 and 63 only; the fills were 0 and the
/// seed's).
#[test]
fn default_geometry_catches_a_tail_residue_and_a_sign_extended_fill() {
    let Some(tree) = tree_env() else { return };
    if std::env::consts::ARCH != "x86_64" {
        common::skip("the mutations are in arch/x86/lib/memset_64.S");
        return;
    }
    if !common::kvm_available("default_geometry_catches_a_tail_residue_and_a_sign_extended_fill") {
        return;
    }
    // A seed whose fill byte alone cannot show a sign extension.
    let seed = (1..)
        .find(|&s| hypclear_check::checker::Patterns::new(s, 0).fill < 0x80)
        .unwrap();
    let (short, signed) = memset_orig_mutants(&tree);
    let json = common::tmp_json("kernel-geometry-mutants");
    let verify = |t: &PathBuf| {
        let (t, j, s) = (
            t.display().to_string(),
            json.display().to_string(),
            seed.to_string(),
        );
        let o = common::hypclear(&[
            "verify",
            "--kernel-tree",
            &t,
            "-r",
            "memset",
            "--seed",
            &s,
            "--json",
            &j,
        ]);
        (o, common::read_json(&json))
    };
    let (o, doc) = verify(&short);
    let out = common::text(&o);
    println!("{out}");
    assert_eq!(o.status.code(), Some(1), "{out}");
    let bad = failures(&doc);
    assert!(!bad.is_empty(), "{out}");
    for c in &bad {
        let (size, d) = (
            c["size"].as_u64().unwrap(),
            c["dst_offset"].as_u64().unwrap(),
        );
        let head = (8 - d % 8) % 8;
        assert!(on_orig(c), "{c}");
        assert!(size > 1024 && (size - head) % 64 == 37, "{c}");
        assert_eq!(c["first_bad_offset"].as_u64(), Some(size - 1), "{c}");
        assert_eq!(c["breakdown"]["not_written"], 1, "{c}");
    }
    // Every magnitude's residue 37 at dst+0, whatever the seed.
    for base in [1024u64, 4096, 65536, 2 << 20] {
        assert!(
            bad.iter()
                .any(|c| c["size"] == base + 37 && c["dst_offset"] == 0),
            "{base}+37: {out}"
        );
    }

    let (o, doc) = verify(&signed);
    let out = common::text(&o);
    println!("{out}");
    assert_eq!(o.status.code(), Some(1), "{out}");
    let bad = failures(&doc);
    assert!(bad.len() > 100, "{out}");
    assert!(bad.iter().all(|c| on_orig(c) && c["fill"] == 0xff), "{out}");

    let (o, doc) = verify(&tree);
    assert_eq!(o.status.code(), Some(0), "{}", common::text(&o));
    assert_eq!(doc["summary"]["failed"], 0);
    std::fs::remove_dir_all(&short).ok();
    std::fs::remove_dir_all(&signed).ok();
}

/// Two copies of `tree` whose memset_orig (arch/x86/lib/memset_64.S) has
/// a tail one byte short when the bytes left after the head alignment
/// (rdx at .Lhandle_tail) are 37 mod 64 and more than 1024, and a fill
/// byte sign-extended (movsbq) before the 0x0101010101010101 multiply.
fn memset_orig_mutants(tree: &PathBuf) -> (PathBuf, PathBuf) {
    const FILE: &str = "arch/x86/lib/memset_64.S";
    let tail = "\tmovl\t%edx,%ecx\n\tandl    $63&(~7),%ecx\n";
    let short = mutant(tree, "kernel-mutant-tail37", FILE, |t| {
        assert_eq!(t.matches(tail).count(), 1, "memset_64.S changed shape");
        // rdx: the bytes left after the head; one fewer when 37 mod 64
        // and more than 1024.
        let bug = "\tmovl\t%edx,%ecx\n\tandl\t$63,%ecx\n\tcmpl\t$37,%ecx\n\tjne\t1f\n\
                   \tcmpq\t$1024,%rdx\n\tjbe\t1f\n\tdecq\t%rdx\n1:\n";
        t.replace(tail, &format!("{bug}{tail}"))
    });
    let zext = "\tmovzbl %sil,%ecx\n";
    let signed = mutant(tree, "kernel-mutant-sext", FILE, |t| {
        assert_eq!(t.matches(zext).count(), 1, "memset_64.S changed shape");
        t.replace(zext, "\tmovsbq %sil,%rcx\n")
    });
    (short, signed)
}

/// The failed checks of a run's JSON.
fn failures(doc: &serde_json::Value) -> Vec<serde_json::Value> {
    let checks = doc["checks"].as_array().expect("checks");
    checks
        .iter()
        .filter(|c| c["verdict"] == "fail")
        .cloned()
        .collect()
}

/// Whether a check ran the tree's memset_orig path.
fn on_orig(c: &serde_json::Value) -> bool {
    c["variant"]
        .as_str()
        .is_some_and(|v| v.contains("memset_orig"))
}
