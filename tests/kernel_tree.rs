//! Build the library objects of a real kernel tree and parse their
//! alternatives. Needs HYPCLEAR_KERNEL_TREE (prints SKIP without it);
//! HYPCLEAR_KERNEL_ARCH=aarch64 cross-builds the nVHE objects, and
//! HYPCLEAR_KERNEL_BUILD_DIR overrides the cache directory.
use hypclear::kernel::alternatives::{Image, feature_names, host_features};
use hypclear::kernel::kbuild::{self, ConfigSource, Request, Step, StepEvent};
use hypclear::kernel::tree::{Arch, KernelTree};
use std::path::PathBuf;

#[test]
fn builds_and_parses_a_real_tree() {
    let Some(path) = std::env::var_os("HYPCLEAR_KERNEL_TREE") else {
        println!("SKIP: set HYPCLEAR_KERNEL_TREE to a kernel source tree");
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
    let again = kbuild::build(&tree, &req, |_, _| {}).expect("kbuild again");
    assert!(
        again.timings.iter().all(|(_, t)| t.is_none()),
        "second run rebuilt: {:?}",
        again.timings
    );

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
    }
}
