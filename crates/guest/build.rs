//! Builds the guest blob (both link configurations) with the system C
//! toolchain, mirroring how the arm64 kernel builds its nVHE hyp:
//!
//! 1. assemble one object per routine (`guest/<arch>/lib/*.S`), the entry /
//!    dispatcher, the selftest routines and the alias tables;
//! 2. link them with the one link pipeline, `hypclear-link` (partial link,
//!    `objcopy --prefix-symbols=__hypclear_`, preprocessed linker script plus
//!    the alias list `guest/<arch>/aliases.h`, `--emit-relocs`, and the
//!    relocation policy of `hypclear_link::hyprel`, the analogue of `gen-hyprel`),
//!    which the library also calls at run time.
//!
//! It also writes `hypclear_abi.h` from `hypclear-abi`, and compiles the same
//! routine objects into the host binary for the native baseline.

use hypclear_abi as abi;
use hypclear_link::{catalog, link};
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

type BuildResult<T> = Result<T, String>;

fn main() {
    if let Err(e) = run() {
        // A build script reports failure by exiting non-zero; the message is
        // shown by cargo.
        eprintln!("error: building the hypclear guest blob failed:\n{e}");
        std::process::exit(1);
    }
}

/// A guest link configuration: `vanilla` has the clear_page aliases,
/// `memset` has none (clear_page is memset there).
struct Config {
    name: &'static str,
    clear_page: bool,
}

const CONFIGS: [Config; 2] = [
    Config {
        name: "vanilla",
        clear_page: true,
    },
    Config {
        name: "memset",
        clear_page: false,
    },
];

/// Where the build reads and writes.
struct Dirs {
    arch: String,
    out: PathBuf,
    root: PathBuf,
    guest: PathBuf,
    arch_dir: PathBuf,
    /// Generated headers (`hypclear_abi.h`).
    inc: PathBuf,
}

/// The guest sources of the target architecture.
struct Sources {
    lib: Vec<PathBuf>,
    /// Selftest and hostile guests (`hypclear selftest --hostile`): the same table.
    selftest: Vec<PathBuf>,
    entry: Vec<PathBuf>,
}

fn run() -> BuildResult<()> {
    let dirs = dirs()?;
    println!("cargo:rerun-if-changed={}", dirs.guest.display());
    emit_git_commit(&dirs.root);
    // The variant tables of both architectures (the pure arch modules and
    // their tests compile on every host).
    for a in &guest_arches(&dirs.guest)? {
        write_variants(
            &dirs.guest.join(a),
            &dirs.out.join(format!("variants_{a}.rs")),
        )?;
    }
    fs::create_dir_all(&dirs.inc).map_err(|e| e.to_string())?;
    write_abi_header(&dirs.inc.join("hypclear_abi.h"))?;
    let src = guest_sources(&dirs.arch_dir)?;

    // The host baseline: the very same routine sources, linked into hypclear.
    let mut host = dirs.cc("host-routines");
    host.cargo_metadata(true)
        .files(&src.lib)
        .compile("hypclear_routines");
    write_host_table(
        &dirs.arch_dir.join("aliases.h"),
        &dirs.out.join("host_routines.rs"),
    )?;

    let tc = link::Toolchain::from_cc(dirs.cc("probe").get_compiler().path());
    for config in &CONFIGS {
        let objs = compile_config(&dirs, &src, config);
        link_config(&tc, &dirs, config, &objs)?;
    }
    Ok(())
}

/// The target architecture (one with a guest) and the directories.
fn dirs() -> BuildResult<Dirs> {
    let arch = env::var("CARGO_CFG_TARGET_ARCH").map_err(|e| e.to_string())?;
    let out = PathBuf::from(env::var("OUT_DIR").map_err(|e| e.to_string())?);
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?);
    // The guest sources live at the top of the repository, beside the crates.
    let root = manifest.join("../..");
    let guest = root.join("guest");
    // The supported architectures are the guest/<arch>/ directories with an
    // alias list: a new architecture brings its own, nothing is listed here.
    let arches = guest_arches(&guest)?;
    if !arches.contains(&arch) {
        return Err(format!(
            "hypclear supports {} targets (guest/<arch>/aliases.h), not {arch}",
            arches.join(" and ")
        ));
    }
    Ok(Dirs {
        arch_dir: guest.join(&arch),
        inc: out.join("include"),
        arch,
        out,
        root,
        guest,
    })
}

/// `HYPCLEAR_GIT_COMMIT` for the binary (`unknown` outside a checkout).
fn emit_git_commit(root: &Path) {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(root)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=HYPCLEAR_GIT_COMMIT={commit}");
    if root.join(".git/HEAD").exists() {
        println!(
            "cargo:rerun-if-changed={}",
            root.join(".git/HEAD").display()
        );
    }
}

fn guest_sources(arch_dir: &Path) -> BuildResult<Sources> {
    let lib = sources(&arch_dir.join("lib"))?;
    let mut selftest = sources(&arch_dir.join("selftest"))?;
    selftest.extend(sources(&arch_dir.join("hostile"))?);
    let mut entry = sources(arch_dir)?;
    entry.retain(|p| p.extension().is_some_and(|e| e == "S"));
    if lib.is_empty() || entry.is_empty() {
        return Err(format!(
            "no guest sources found under {}",
            arch_dir.display()
        ));
    }
    Ok(Sources {
        lib,
        selftest,
        entry,
    })
}

impl Dirs {
    /// A freestanding compiler setup writing its objects to `OUT_DIR/<dir>`.
    fn cc(&self, dir: &str) -> cc::Build {
        let mut b = cc::Build::new();
        b.include(self.guest.join("include"))
            .include(&self.inc)
            .include(&self.arch_dir)
            // Freestanding: no builtins, and no loop-to-memset/memcpy
            // conversion should any C ever join the blob.
            .flag("-ffreestanding")
            .flag("-fno-builtin")
            .flag("-fno-tree-loop-distribute-patterns")
            .debug(false)
            .warnings(true)
            .cargo_metadata(false)
            .out_dir(self.out.join(dir));
        b
    }
}

/// One configuration's objects: its alias tables, the entry, its routines
/// (no clear_page ones in `memset`) and the selftests.
fn compile_config(dirs: &Dirs, src: &Sources, config: &Config) -> Vec<PathBuf> {
    let mut tables = dirs.cc(&format!("{}-tables", config.name));
    if config.clear_page {
        tables.define("CONFIG_CLEAR_PAGE_ALIAS", None);
    }
    tables.file(dirs.guest.join("common/tables.S"));
    let mut objs = tables.compile_intermediates();
    let lib_cfg: Vec<PathBuf> = src
        .lib
        .iter()
        .filter(|p| config.clear_page || !file_name(p).starts_with("clear_page"))
        .cloned()
        .collect();
    let mut rest = dirs.cc(&format!("{}-objs", config.name));
    rest.files(&src.entry).files(&lib_cfg).files(&src.selftest);
    objs.extend(rest.compile_intermediates());
    objs
}

/// Link one configuration's objects into `blob-<config>.elf` (and `.bin`).
fn link_config(
    tc: &link::Toolchain,
    dirs: &Dirs,
    config: &Config,
    objs: &[PathBuf],
) -> BuildResult<()> {
    let (arch_dir, out, name) = (&dirs.arch_dir, &dirs.out, config.name);
    let defines: Vec<String> = if config.clear_page {
        vec!["CONFIG_CLEAR_PAGE_ALIAS".into()]
    } else {
        vec![]
    };
    let aliases = link::read_aliases(
        tc,
        &arch_dir.join("aliases.h"),
        &defines,
        &out.join(format!("aliases-{name}.txt")),
    )
    .map_err(|e| e.to_string())?;
    let image = out.join(format!("blob-{name}.bin"));
    link::link(
        tc,
        &link::LinkSpec {
            objects: objs,
            aliases: &aliases,
            script: &dirs.guest.join("common/hyp.lds.S"),
            includes: &[dirs.guest.join("include"), arch_dir.clone()],
            defines: &defines,
            work_dir: out,
            name: &format!("hyp-{name}"),
            out: &out.join(format!("blob-{name}.elf")),
            // linux-loader's PE loader takes the flat Image (header at offset 0).
            flat_image: (dirs.arch == "aarch64").then_some(image.as_path()),
            extra_sections: &[],
        },
    )
    .map_err(|e| format!("{name} configuration: {e}"))?;
    Ok(())
}

/// Architectures with a guest: `guest/<arch>/aliases.h` exists.
fn guest_arches(guest: &Path) -> BuildResult<Vec<String>> {
    let mut v = Vec::new();
    for ent in fs::read_dir(guest).map_err(|e| format!("{}: {e}", guest.display()))? {
        let p = ent.map_err(|e| e.to_string())?.path();
        if p.join("aliases.h").is_file()
            && let Some(name) = p.file_name().and_then(|n| n.to_str())
        {
            v.push(name.to_string());
        }
    }
    v.sort();
    Ok(v)
}

/// The variant table of one architecture, from its alias list and the
/// headers of its routine files (see `hypclear_link::catalog`).
fn write_variants(arch_dir: &Path, out: &Path) -> BuildResult<()> {
    let aliases = arch_dir.join("aliases.h");
    let text = fs::read_to_string(&aliases).map_err(|e| format!("{}: {e}", aliases.display()))?;
    let names: Vec<String> = link::parse_aliases(&text, &aliases)
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|a| a.alias)
        .collect();
    let mut headers = Vec::new();
    for f in sources(&arch_dir.join("lib"))? {
        let origin = f.display().to_string();
        let text = fs::read_to_string(&f).map_err(|e| format!("{origin}: {e}"))?;
        headers.push((
            origin.clone(),
            catalog::parse_header(&text, &origin).map_err(|e| e.to_string())?,
        ));
    }
    let variants = catalog::catalog(&headers, &names, &aliases.display().to_string())
        .map_err(|e| e.to_string())?;
    let src = catalog::render(
        &variants,
        &format!("{} and {}/lib/*.S", aliases.display(), arch_dir.display()),
    );
    fs::write(out, src).map_err(|e| format!("{}: {e}", out.display()))
}

/// Rust declarations of the routines linked into the host, from the alias
/// list (both configurations' entries).
fn write_host_table(aliases: &Path, out: &Path) -> BuildResult<()> {
    let text = fs::read_to_string(aliases).map_err(|e| format!("{}: {e}", aliases.display()))?;
    let mut decls = String::new();
    let mut rows = String::new();
    // The same `HYP_ALIAS(alias, target)` parser the link uses.
    for link::Alias { alias, target } in
        link::parse_aliases(&text, aliases).map_err(|e| e.to_string())?
    {
        decls.push_str(&format!("    fn {target}();\n"));
        rows.push_str(&format!(
            "    (\"{alias}\", {target} as unsafe extern \"C\" fn()),\n"
        ));
    }
    let src = format!(
        "// Generated by build.rs from {}: do not edit.\n\
         unsafe extern \"C\" {{\n{decls}}}\n\
         /// (alias name, host address of the same routine object)\n\
         pub static HOST_ROUTINES: &[(&str, unsafe extern \"C\" fn())] = &[\n{rows}];\n",
        aliases.display()
    );
    fs::write(out, src).map_err(|e| format!("{}: {e}", out.display()))
}

fn write_abi_header(path: &Path) -> BuildResult<()> {
    let mut s = String::from(
        "/* Generated by build.rs from crates/abi: do not edit. */\n\
         #ifndef HYPCLEAR_ABI_H\n#define HYPCLEAR_ABI_H\n",
    );
    for (name, value) in abi::ALL {
        s.push_str(&format!("#define {name} {value:#x}\n"));
    }
    s.push_str("#endif\n");
    fs::write(path, s).map_err(|e| format!("{}: {e}", path.display()))
}

fn sources(dir: &Path) -> BuildResult<Vec<PathBuf>> {
    let mut v = Vec::new();
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(v),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    };
    for ent in rd {
        let p = ent.map_err(|e| e.to_string())?.path();
        if p.is_file() && p.extension().is_some_and(|e| e == "S") {
            v.push(p);
        }
    }
    v.sort();
    Ok(v)
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}
