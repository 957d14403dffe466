//! The link pipeline of the guest blob, the way the arm64 kernel links its
//! nVHE hyp. ONE implementation, used by the guest's `build.rs` and callable
//! at run time on any set of objects (e.g. a
//! kernel tree's own library objects):
//!
//! 1. partial link (`-r`) of the objects into one relocatable object;
//! 2. every symbol prefixed with [`SYMBOL_PREFIX`] (`objcopy
//!    --prefix-symbols`, like `__kvm_nvhe_`);
//! 3. final link at address 0 with the C-preprocessed linker script plus one
//!    assignment per alias (`__hypclear_<alias> = __hypclear_<target>;`, the
//!    analogue of `KVM_NVHE_ALIAS_HYP`), keeping relocations
//!    (`--emit-relocs`);
//! 4. the relocation policy ([`super::hyprel::police`]) and the relocation
//!    list stored in the blob's `.hyp.reloc` section;
//! 5. optionally a flat image (`objcopy -O binary`, the aarch64 Image).
use super::hyprel;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Namespace prefix of every blob symbol (the analogue of `__kvm_nvhe_`).
pub const SYMBOL_PREFIX: &str = "__hypclear_";

/// Why a link failed; each names the command or file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("cannot run {cmd}: {source} (is a C toolchain with binutils installed?)")]
    Spawn {
        cmd: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{cmd} failed ({status}):\n{output}")]
    Failed {
        cmd: String,
        status: String,
        output: String,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot parse `{line}` in {}: expected HYP_ALIAS(alias, target)", path.display())]
    AliasSyntax { path: PathBuf, line: String },
    #[error("{}: {source}", path.display())]
    Policy {
        path: PathBuf,
        #[source]
        source: hyprel::PolicyError,
    },
}

/// The C compiler driver (used for `-r`, `-E` and the final link) and the
/// matching objcopy.
#[derive(Debug, Clone)]
pub struct Toolchain {
    pub cc: PathBuf,
    pub objcopy: PathBuf,
}

impl Toolchain {
    /// `aarch64-linux-gnu-gcc` -> `aarch64-linux-gnu-objcopy`, `cc` -> `objcopy`.
    pub fn from_cc(cc: &Path) -> Toolchain {
        let name = cc
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let prefix = name
            .strip_suffix("gcc")
            .or_else(|| name.strip_suffix("cc"))
            .unwrap_or("");
        let cand = cc.with_file_name(format!("{prefix}objcopy"));
        let objcopy = if cand.exists() {
            cand
        } else {
            PathBuf::from(format!("{prefix}objcopy"))
        };
        Toolchain {
            cc: cc.to_path_buf(),
            objcopy,
        }
    }
}

/// One hyp alias: `alias` reaches `target` (both without the prefix).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alias {
    pub alias: String,
    pub target: String,
}

/// What to link.
#[derive(Debug, Clone)]
pub struct LinkSpec<'a> {
    /// Relocatable objects, in link order.
    pub objects: &'a [PathBuf],
    pub aliases: &'a [Alias],
    /// Linker script template, run through the C preprocessor.
    pub script: &'a Path,
    /// `-I` directories and `-D` definitions for the preprocessor.
    pub includes: &'a [PathBuf],
    pub defines: &'a [String],
    /// Directory for the intermediate files (`<name>.o`, `<name>.lds`, ...).
    pub work_dir: &'a Path,
    pub name: &'a str,
    /// The final ELF (with `.hyp.reloc`).
    pub out: &'a Path,
    /// Also write the flat image here (aarch64 Image for the PE loader).
    pub flat_image: Option<&'a Path>,
    /// Extra non-allocated sections added to the final ELF: (name, file).
    pub extra_sections: &'a [(&'a str, &'a Path)],
}

/// A linked blob: its ELF and the relocation list stored in it.
#[derive(Debug, Clone)]
pub struct Linked {
    pub elf: PathBuf,
    pub relocs: Vec<u32>,
}

/// Run the whole pipeline (see the module docs).
pub fn link(tc: &Toolchain, spec: &LinkSpec) -> Result<Linked, LinkError> {
    let hyp_o = prefixed_object(tc, spec)?;
    let lds = script_with_aliases(tc, spec)?;
    let mut link = Command::new(&tc.cc);
    link.args([
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
    .arg(spec.out)
    .arg(&hyp_o);
    exec(link)?;
    let relocs = attach_relocs(tc, spec)?;
    if let Some(image) = spec.flat_image {
        let mut bin = Command::new(&tc.objcopy);
        bin.args(["-O", "binary"]).arg(spec.out).arg(image);
        exec(bin)?;
    }
    Ok(Linked {
        elf: spec.out.to_path_buf(),
        relocs,
    })
}

/// The objects combined into one (`ld -r`) with every symbol prefixed, as
/// the nVHE hyp's `kvm_nvhe.o` is.
fn prefixed_object(tc: &Toolchain, spec: &LinkSpec) -> Result<PathBuf, LinkError> {
    let hyp_o = spec.work_dir.join(format!("{}.o", spec.name));
    let mut ld_r = Command::new(&tc.cc);
    ld_r.args(["-nostdlib", "-r", "-o"])
        .arg(&hyp_o)
        .args(spec.objects);
    exec(ld_r)?;
    let mut prefix = Command::new(&tc.objcopy);
    prefix
        .arg(format!("--prefix-symbols={SYMBOL_PREFIX}"))
        .arg(&hyp_o);
    exec(prefix)?;
    Ok(hyp_o)
}

/// The preprocessed linker script with the hyp aliases appended.
fn script_with_aliases(tc: &Toolchain, spec: &LinkSpec) -> Result<PathBuf, LinkError> {
    let lds = spec.work_dir.join(format!("{}.lds", spec.name));
    preprocess(tc, spec.script, spec.includes, spec.defines, &lds)?;
    let mut script = read(&lds)?;
    script.push_str("\n/* hyp aliases */\n");
    // An alias naming its own target needs no assignment (the kernel's
    // `clear_page_erms` is reached as itself).
    for a in spec.aliases.iter().filter(|a| a.alias != a.target) {
        let _ = writeln!(
            script,
            "{SYMBOL_PREFIX}{} = {SYMBOL_PREFIX}{};",
            a.alias, a.target
        );
    }
    write(&lds, script.as_bytes())?;
    Ok(lds)
}

/// The linked image's relocations under the relocation policy, added to
/// it as a section (with the spec's extra sections).
fn attach_relocs(tc: &Toolchain, spec: &LinkSpec) -> Result<Vec<u32>, LinkError> {
    let bytes = std::fs::read(spec.out).map_err(|source| LinkError::Io {
        path: spec.out.to_path_buf(),
        source,
    })?;
    let relocs = hyprel::police(&bytes).map_err(|source| LinkError::Policy {
        path: spec.out.to_path_buf(),
        source,
    })?;
    let list = spec.work_dir.join(format!("{}.reloc", spec.name));
    write(&list, &hyprel::encode(&relocs))?;
    let mut add = Command::new(&tc.objcopy);
    add.arg(format!(
        "--add-section={}={}",
        hyprel::RELOC_SECTION,
        list.display()
    ));
    for (name, file) in spec.extra_sections {
        add.arg(format!("--add-section={name}={}", file.display()));
    }
    add.arg(spec.out);
    exec(add)?;
    Ok(relocs)
}

/// Read an alias list (`HYP_ALIAS(alias, target)` lines, e.g.
/// `guest/<arch>/aliases.h`) as the preprocessor sees it with `defines`.
pub fn read_aliases(
    tc: &Toolchain,
    list: &Path,
    defines: &[String],
    work: &Path,
) -> Result<Vec<Alias>, LinkError> {
    preprocess(tc, list, &[], defines, work)?;
    parse_aliases(&read(work)?, list)
}

/// `HYP_ALIAS(alias, target)` lines of preprocessed text.
pub fn parse_aliases(text: &str, origin: &Path) -> Result<Vec<Alias>, LinkError> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(args) = line
            .trim()
            .strip_prefix("HYP_ALIAS(")
            .and_then(|r| r.strip_suffix(')'))
        else {
            continue;
        };
        let Some((alias, target)) = args.split_once(',') else {
            return Err(LinkError::AliasSyntax {
                path: origin.to_path_buf(),
                line: line.to_string(),
            });
        };
        out.push(Alias {
            alias: alias.trim().to_string(),
            target: target.trim().to_string(),
        });
    }
    Ok(out)
}

fn preprocess(
    tc: &Toolchain,
    input: &Path,
    includes: &[PathBuf],
    defines: &[String],
    out: &Path,
) -> Result<(), LinkError> {
    let mut cpp = Command::new(&tc.cc);
    cpp.args(["-E", "-P", "-undef", "-x", "c"]);
    for i in includes {
        cpp.arg("-I").arg(i);
    }
    for d in defines {
        cpp.arg(format!("-D{d}"));
    }
    cpp.arg(input).arg("-o").arg(out);
    exec(cpp)
}

fn read(path: &Path) -> Result<String, LinkError> {
    std::fs::read_to_string(path).map_err(|source| LinkError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), LinkError> {
    std::fs::write(path, bytes).map_err(|source| LinkError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn exec(mut cmd: Command) -> Result<(), LinkError> {
    let shown = format!("{cmd:?}");
    let out = cmd.output().map_err(|source| LinkError::Spawn {
        cmd: shown.clone(),
        source,
    })?;
    if !out.status.success() {
        return Err(LinkError::Failed {
            cmd: shown,
            status: out.status.to_string(),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alias_lines_parse_and_bad_ones_are_named() {
        let text = "x\nHYP_ALIAS(memset_erms, __pi_memset_erms)\n  HYP_ALIAS( a ,b )\n";
        let got = parse_aliases(text, Path::new("aliases.h")).unwrap();
        assert_eq!(
            got,
            vec![
                Alias {
                    alias: "memset_erms".into(),
                    target: "__pi_memset_erms".into()
                },
                Alias {
                    alias: "a".into(),
                    target: "b".into()
                }
            ]
        );
        let e = parse_aliases("HYP_ALIAS(nocomma)", Path::new("l.h")).unwrap_err();
        assert!(e.to_string().contains("l.h"), "{e}");
    }

    /// The pipeline at run time, on an object that is not part of the blob:
    /// the alias lands in the prefixed namespace and the one absolute word
    /// becomes the relocation list.
    #[test]
    fn links_objects_at_run_time() {
        let dir = std::env::temp_dir().join(format!("hypclear-link-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let c = dir.join("lib.c");
        std::fs::write(
            &c,
            "__attribute__((section(\".text.__pi\"))) long __pi_answer(void) { return 42; }\n\
             extern long answer(void);\n\
             long (*const table[1])(void) __attribute__((section(\".data\"))) = { answer };\n",
        )
        .unwrap();
        let obj = dir.join("lib.o");
        let tc = Toolchain::from_cc(Path::new("cc"));
        let mut cc = Command::new(&tc.cc);
        cc.args([
            "-c",
            "-O2",
            "-fno-pic",
            "-ffreestanding",
            "-fno-asynchronous-unwind-tables",
        ])
        .arg(&c)
        .arg("-o")
        .arg(&obj);
        exec(cc).unwrap();
        let script = dir.join("t.lds.S");
        std::fs::write(
            &script,
            "SECTIONS { . = 0; .text : { *(.text) } . = ALIGN(64); \
             .pi.text : { *(.text.__pi) } . = ALIGN(4096); .data : { *(.data) } \
             /DISCARD/ : { *(.note*) *(.comment) *(.eh_frame) } }\n",
        )
        .unwrap();
        let out = dir.join("t.elf");
        let linked = link(
            &tc,
            &LinkSpec {
                objects: std::slice::from_ref(&obj),
                aliases: &[Alias {
                    alias: "answer".into(),
                    target: "__pi_answer".into(),
                }],
                script: &script,
                includes: &[],
                defines: &[],
                work_dir: &dir,
                name: "t",
                out: &out,
                flat_image: None,
                extra_sections: &[],
            },
        )
        .unwrap();
        assert_eq!(linked.relocs.len(), 1, "{:?}", linked.relocs);
        let bytes = std::fs::read(&out).unwrap();
        let elf = object::File::parse(&*bytes).unwrap();
        use object::{Object, ObjectSymbol};
        let sym = |n: &str| {
            elf.symbols()
                .find(|s| s.name() == Ok(n))
                .map(|s| s.address())
        };
        assert!(sym("__hypclear___pi_answer").is_some());
        assert_eq!(sym("__hypclear_answer"), sym("__hypclear___pi_answer"));
        assert!(elf.section_by_name(hyprel::RELOC_SECTION).is_some());
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn objcopy_is_the_compilers_sibling() {
        let t = Toolchain::from_cc(Path::new("aarch64-linux-gnu-gcc"));
        assert_eq!(t.objcopy, PathBuf::from("aarch64-linux-gnu-objcopy"));
        let t = Toolchain::from_cc(Path::new("cc"));
        assert_eq!(t.objcopy, PathBuf::from("objcopy"));
    }
}
