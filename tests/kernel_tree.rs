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
    let t = std::time::Instant::now();
    let again = kbuild::build(&tree, &req, |_, _| {}).expect("kbuild again");
    println!("second run: {:?}", t.elapsed());
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
        println!(
            "clear_page: {} (alternative_call_2 in C)",
            hypclear::kernel::alternatives::x86_clear_page_pick(&host)
        );
    }
    link_like_build_rs(&out, arch, &names);
}

/// The linker script of the experiment: kernel text into `.pi.text` (with a
/// `ret; int3` return thunk), the alternative tables kept for load time,
/// ksymtab / ORC / .export_symbol / __ex_table discarded.
const LDS: &str = "ENTRY(__hypclear___pi_entry)
SECTIONS
{
	. = 0;
	.pi.text : {
		__hypclear___pi_entry = .;
		*(.text) *(.noinstr.text)
		__hypclear___x86_return_thunk = .;
		BYTE(0xc3) BYTE(0xcc)
	}
	. = ALIGN(64);
	.altinstr_replacement : { *(.altinstr_replacement) }
	.altinstructions : { *(.altinstructions) }
	.return_sites : { *(.return_sites) }
	. = ALIGN(4096);
	.data : { *(.data .data.*) }
	.bss : { *(.bss .bss.*) }
	/DISCARD/ : { *(.export_symbol) *(__ex_table) *(__ksymtab*) *(___ksymtab*)
		*(.orc_unwind*) *(.orc_header) *(.discard*) *(.note .note.*) *(.comment)
		*(.eh_frame) *(.debug*) }
}
";

/// Partial link, `--prefix-symbols`, final link at 0 with `--emit-relocs`
/// (the flags build.rs uses), then the relocation policy and the
/// alternatives on the linked image.
fn link_like_build_rs(
    out: &kbuild::Output,
    arch: Arch,
    names: &hypclear::kernel::alternatives::FeatureNames,
) {
    use std::process::Command;
    let prefix = match (Arch::host(), arch) {
        (Some(h), a) if h == a => "",
        (_, Arch::Aarch64) => "aarch64-linux-gnu-",
        (_, Arch::X86_64) => "x86_64-linux-gnu-",
    };
    let dir = out.build_dir.join("hypclear-link-test");
    std::fs::create_dir_all(&dir).unwrap();
    let run = |cmd: &mut Command| {
        let o = cmd.output().expect("tool");
        assert!(
            o.status.success(),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    let hyp_o = dir.join("kernel-hyp.o");
    run(Command::new(format!("{prefix}ld"))
        .arg("-r")
        .arg("-o")
        .arg(&hyp_o)
        .args(out.objects.iter().map(|o| &o.path)));
    run(Command::new(format!("{prefix}objcopy"))
        .arg("--prefix-symbols=__hypclear_")
        .arg(&hyp_o));
    let lds = dir.join("kernel.lds");
    std::fs::write(&lds, LDS).unwrap();
    let elf = dir.join("kernel-blob.elf");
    run(Command::new(format!("{prefix}gcc"))
        .args([
            "-nostdlib",
            "-static",
            "-no-pie",
            "-Wl,--emit-relocs",
            "-Wl,--build-id=none",
            "-Wl,-z,max-page-size=4096",
            "-Wl,-z,noexecstack",
            "-Wl,--no-warn-rwx-segments",
        ])
        .arg(format!("-Wl,-T,{}", lds.display()))
        .arg("-o")
        .arg(&elf)
        .arg(&hyp_o));
    let bytes = std::fs::read(&elf).unwrap();
    let relocs = hypclear::blob::hyprel::police(&bytes).unwrap_or_else(|e| panic!("policy: {e}"));
    println!(
        "linked {}: policy ok, {} absolute words",
        elf.display(),
        relocs.len()
    );
    let mut img = Image::from_elf(&bytes, None).expect("linked image");
    img.strip_symbol_prefix("__hypclear_");
    let returns = img.patch_returns().expect("return sites");
    let present = if Arch::host() == Some(arch) {
        host_features(img.machine)
    } else {
        Default::default()
    };
    let applied = img.apply(names, &present).expect("apply");
    println!("  linked image: {returns} return sites patched");
    for a in &applied {
        println!("    {a}");
        assert_ne!(a.routine, "?", "alternative outside any routine: {a:?}");
    }
}
