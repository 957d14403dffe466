//! A user's kernel source tree: is it one, which architectures it carries,
//! its identity, and how its arm64 nVHE hyp links `clear_page`.
//!
//! Nothing here modifies the tree; kbuild output goes to a separate build
//! directory (see [`super::kbuild`]).
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use thiserror::Error;

/// The architectures hypclear can build kernel objects for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Arch {
    #[serde(rename = "x86_64")]
    X86_64,
    #[serde(rename = "aarch64")]
    Aarch64,
}

impl Arch {
    /// The architecture hypclear itself was built for.
    pub fn host() -> Option<Arch> {
        match std::env::consts::ARCH {
            "x86_64" => Some(Arch::X86_64),
            "aarch64" => Some(Arch::Aarch64),
            _ => None,
        }
    }

    /// The kernel's name for it (`arch/<name>`, `ARCH=<name>`).
    pub fn kernel_name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86",
            Arch::Aarch64 => "arm64",
        }
    }

    /// The kbuild `CONFIG_` symbol a .config for this architecture sets.
    fn config_symbol(self) -> &'static str {
        match self {
            Arch::X86_64 => "CONFIG_X86_64=y",
            Arch::Aarch64 => "CONFIG_ARM64=y",
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
        })
    }
}

/// How the tree's nVHE hyp gets its `clear_page`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkConfig {
    /// `clear_page` is an out-of-line routine with a hyp alias.
    Vanilla,
    /// `clear_page` is an inline `memset()` (the "clear_page\[s\] using
    /// memset" patch): no clear_page object, no alias.
    Memset,
}

impl fmt::Display for LinkConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LinkConfig::Vanilla => "vanilla",
            LinkConfig::Memset => "memset",
        })
    }
}

/// Where a tree defines the `clear_page()` its kernel calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClearPageShape {
    /// Out-of-line routines of arch/*/lib (arm64 clear_page.S; x86 6.x
    /// clear_page_orig/rep/erms, chosen in C by asm/page_64.h's
    /// alternative_call_2), or none at all (the memset configuration).
    #[default]
    OutOfLine,
    /// x86 7.x: `clear_pages()` is inline asm in asm/page_64.h (an
    /// ALTERNATIVE_2 of `call __clear_pages_unrolled`, `rep stosq` on
    /// REP_GOOD and `rep stosb` on ERMS) and `clear_page()` is
    /// `clear_pages(addr, 1)`: hypclear compiles both out of line from its
    /// C shim with the tree's headers and kbuild flags.
    Inline,
}

/// The detected link configuration and the evidence for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkDetection {
    pub config: LinkConfig,
    pub clear_page: ClearPageShape,
    /// x86 6.x: the C that chooses among the out-of-line routines (`None`
    /// elsewhere, or where the tree's header could not be read).
    pub clear_page_choice: Option<CallChoice>,
    pub reason: String,
}

/// A choice written in C as `alternative_call_2(default, f1, FEATURE1,
/// f2, FEATURE2, ...)` (x86 6.x asm/page_64.h's clear_page()): the routine
/// of the last alternative whose feature is present, else the default, as
/// ALTERNATIVE_2 patches them in order.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CallChoice {
    /// The header it was read from.
    pub file: String,
    pub default: String,
    /// `(routine, feature)` in the order the call lists them; features
    /// named as in /proc/cpuinfo (`rep_good`).
    pub alternatives: Vec<(String, String)>,
}

impl CallChoice {
    /// The `alternative_call`/`alternative_call_2` in the body of C
    /// function `function` of header `h`; `None` if there is none or its
    /// arguments are not plain names.
    pub(crate) fn parse(h: &str, function: &str, file: &str) -> Option<CallChoice> {
        let start = h.find(&format!("void {function}("))?;
        let body = &h[start..];
        let body = &body[..body.find("\n}").unwrap_or(body.len())];
        let at = body.find("alternative_call")?;
        let args = &body[at..];
        let args = &args[args.find('(')? + 1..];
        // The routine and feature arguments come before the asm constraints.
        let args = &args[..args.find('"').unwrap_or(args.len())];
        let names: Vec<&str> = args
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .collect();
        let ident = |a: &&str| a.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if names.len() < 3 || names.len().is_multiple_of(2) || !names.iter().all(ident) {
            return None;
        }
        let alternatives = names[1..]
            .chunks(2)
            .map(|p| {
                let feature = p[1].strip_prefix("X86_FEATURE_")?;
                Some((p[0].to_string(), feature.to_ascii_lowercase()))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(CallChoice {
            file: file.to_string(),
            default: names[0].to_string(),
            alternatives,
        })
    }

    /// The routine chosen with `present` features, and why: `("clear_page_erms",
    /// "ERMS")` or `("clear_page_orig", "no REP_GOOD, ERMS")`.
    pub fn pick(&self, present: &std::collections::BTreeSet<String>) -> (&str, String) {
        match self
            .alternatives
            .iter()
            .rev()
            .find(|(_, f)| present.contains(f))
        {
            Some((routine, f)) => (routine, f.to_uppercase()),
            None => {
                let all: Vec<String> = self
                    .alternatives
                    .iter()
                    .map(|(_, f)| f.to_uppercase())
                    .collect();
                (&self.default, format!("no {}", all.join(", ")))
            }
        }
    }
}

/// What identifies the tree in reports.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Identity {
    pub path: PathBuf,
    /// `make -s kernelversion`.
    pub kernelversion: String,
    /// `git rev-parse HEAD` when the tree is a git checkout.
    pub git_head: Option<String>,
}

#[derive(Debug, Error)]
pub enum TreeError {
    #[error(
        "{path} is not a kernel source tree ({why}); pass the top directory of a Linux source tree \
         (the one with Makefile, arch/ and kernel/)"
    )]
    NotATree { path: PathBuf, why: String },
    #[error(
        "the kernel tree {path} has no arch/{arch_dir} directory; use a tree that supports {arch}"
    )]
    ArchMissing {
        path: PathBuf,
        arch: Arch,
        arch_dir: &'static str,
    },
    #[error(
        "the kernel tree {path} is configured for {tree_arch} ({evidence}) but this host is {host}; \
         pass --arch {tree_arch} to cross-build, or --arch {host} with --kernel-config defconfig"
    )]
    OtherArch {
        path: PathBuf,
        tree_arch: Arch,
        host: Arch,
        evidence: String,
    },
    #[error("hypclear runs on x86_64 and aarch64 only; pass --arch")]
    UnknownHost,
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the link configuration of {path} is neither vanilla nor memset: {why}; hypclear knows \
         clear_page as an out-of-line routine with a hyp alias, or as memset()"
    )]
    UnknownLink { path: PathBuf, why: String },
    #[error(
        "cannot find the clear_page of the kernel tree {path}: looked for {looked_for} in {files}; \
         hypclear knows x86 clear_page as clear_page_orig/rep/erms of arch/x86/lib/clear_page_64.S \
         (Linux 6.x) or as the inline clear_pages() of arch/x86/include/asm/page_64.h (7.x)"
    )]
    NoClearPage {
        path: PathBuf,
        looked_for: String,
        files: String,
    },
    #[error(
        "`make -s kernelversion` in {path} failed: {detail}; install make (Debian package make)"
    )]
    KernelVersion { path: PathBuf, detail: String },
}

/// A validated kernel source tree.
#[derive(Debug, Clone)]
pub struct KernelTree {
    root: PathBuf,
    version: (u32, u32, u32),
}

fn read(path: &Path) -> Result<String, TreeError> {
    fs::read_to_string(path).map_err(|source| TreeError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The value of a top-level `NAME = value` assignment in a Makefile.
fn make_var(makefile: &str, name: &str) -> Option<String> {
    makefile.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == name).then(|| v.trim().to_string())
    })
}

/// Join backslash-continued lines and drop comments, so that a Makefile
/// assignment can be read as one line.
fn logical_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for raw in text.lines() {
        let line = raw.split('#').next().unwrap_or("");
        if let Some(stripped) = line.strip_suffix('\\') {
            cur.push_str(stripped);
            cur.push(' ');
        } else {
            cur.push_str(line);
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

impl KernelTree {
    /// Validate `path` as a kernel source tree (top-level Makefile with
    /// VERSION/PATCHLEVEL, an `arch/` directory).
    pub fn open(path: &Path) -> Result<Self, TreeError> {
        let root = path.canonicalize().map_err(|e| TreeError::NotATree {
            path: path.to_path_buf(),
            why: e.to_string(),
        })?;
        let not = |why: &str| TreeError::NotATree {
            path: root.clone(),
            why: why.to_string(),
        };
        let makefile = fs::read_to_string(root.join("Makefile"))
            .map_err(|_| not("no readable top-level Makefile"))?;
        let num = |name: &str| -> Result<u32, TreeError> {
            make_var(&makefile, name)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| not(&format!("the Makefile sets no numeric {name}")))
        };
        let version = (
            num("VERSION")?,
            num("PATCHLEVEL")?,
            num("SUBLEVEL").unwrap_or(0),
        );
        if !root.join("arch").is_dir() {
            return Err(not("no arch/ directory"));
        }
        Ok(KernelTree { root, version })
    }

    /// The canonical path of the tree.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// VERSION, PATCHLEVEL, SUBLEVEL from the top-level Makefile.
    pub fn version(&self) -> (u32, u32, u32) {
        self.version
    }

    /// The architectures hypclear knows that this tree has sources for.
    pub fn arches(&self) -> Vec<Arch> {
        [Arch::X86_64, Arch::Aarch64]
            .into_iter()
            .filter(|a| self.root.join("arch").join(a.kernel_name()).is_dir())
            .collect()
    }

    /// The architecture the tree's existing `.config` was made for, if any.
    pub fn configured_arch(&self) -> Option<Arch> {
        let cfg = fs::read_to_string(self.root.join(".config")).ok()?;
        [Arch::X86_64, Arch::Aarch64]
            .into_iter()
            .find(|a| cfg.lines().any(|l| l.trim() == a.config_symbol()))
    }

    /// The architecture to build for: `requested` (--arch) if given, else
    /// the host's, refusing a tree that only fits the other architecture.
    pub fn resolve_arch(&self, requested: Option<Arch>) -> Result<Arch, TreeError> {
        let arch = match requested {
            Some(a) => a,
            None => {
                let host = Arch::host().ok_or(TreeError::UnknownHost)?;
                if let Some(tree_arch) = self.configured_arch().filter(|a| *a != host) {
                    return Err(TreeError::OtherArch {
                        path: self.root.clone(),
                        tree_arch,
                        host,
                        evidence: format!("its .config sets {}", tree_arch.config_symbol()),
                    });
                }
                if let [only] = self.arches()[..]
                    && only != host
                {
                    return Err(TreeError::OtherArch {
                        path: self.root.clone(),
                        tree_arch: only,
                        host,
                        evidence: format!("it only has arch/{}", only.kernel_name()),
                    });
                }
                host
            }
        };
        if !self.root.join("arch").join(arch.kernel_name()).is_dir() {
            return Err(TreeError::ArchMissing {
                path: self.root.clone(),
                arch,
                arch_dir: arch.kernel_name(),
            });
        }
        Ok(arch)
    }

    /// `make -s kernelversion` and the git HEAD if the tree is a checkout.
    pub fn identity(&self) -> Result<Identity, TreeError> {
        let out = Command::new("make")
            .args(["-s", "--no-print-directory", "kernelversion"])
            .current_dir(&self.root)
            .output()
            .map_err(|e| TreeError::KernelVersion {
                path: self.root.clone(),
                detail: e.to_string(),
            })?;
        if !out.status.success() {
            return Err(TreeError::KernelVersion {
                path: self.root.clone(),
                detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        let kernelversion = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let git_head = if self.root.join(".git").exists() {
            Command::new("git")
                .args(["rev-parse", "HEAD"])
                .current_dir(&self.root)
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        } else {
            None
        };
        Ok(Identity {
            path: self.root.clone(),
            kernelversion,
            git_head,
        })
    }

    /// The library objects the arm64 nVHE hyp links, as listed by
    /// `lib-objs` in arch/arm64/kvm/hyp/nvhe/Makefile (`clear_page.o`,
    /// `memset.o`, ...: names relative to arch/arm64/lib/).
    pub fn nvhe_lib_objects(&self) -> Result<Vec<String>, TreeError> {
        let path = self.root.join("arch/arm64/kvm/hyp/nvhe/Makefile");
        let text = read(&path)?;
        let objs = parse_lib_objs(&text);
        if objs.is_empty() {
            return Err(TreeError::UnknownLink {
                path,
                why: "no `lib-objs :=` list of ../../../lib objects".into(),
            });
        }
        Ok(objs)
    }

    /// Detect the link configuration for `arch` and say why.
    pub fn link_config(&self, arch: Arch) -> Result<LinkDetection, TreeError> {
        match arch {
            Arch::X86_64 => self.x86_link_config(),
            Arch::Aarch64 => self.arm64_link_config(),
        }
    }

    /// x86 has no hyp alias: the configuration is vanilla, and what
    /// differs between trees is where clear_page lives.
    fn x86_link_config(&self) -> Result<LinkDetection, TreeError> {
        const S: &str = "arch/x86/lib/clear_page_64.S";
        const H: &str = "arch/x86/include/asm/page_64.h";
        const OUT_OF_LINE: [&str; 3] = ["clear_page_orig", "clear_page_rep", "clear_page_erms"];
        // A missing file defines nothing; the error names both.
        let s = fs::read_to_string(self.root.join(S)).unwrap_or_default();
        let h = fs::read_to_string(self.root.join(H)).unwrap_or_default();
        if OUT_OF_LINE.iter().all(|f| asm_defines(&s, f)) {
            let choice = CallChoice::parse(&h, "clear_page", H);
            let how = match &choice {
                Some(c) => format!(
                    "{H} picks one with alternative_call_2: {}",
                    c.alternatives
                        .iter()
                        .rev()
                        .map(|(r, f)| format!("{r} on {}", f.to_uppercase()))
                        .chain([format!("else {}", c.default)])
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                None => format!(
                    "{H}'s choice among them could not be read: the kernel's pick is unknown"
                ),
            };
            return Ok(LinkDetection {
                config: LinkConfig::Vanilla,
                clear_page: ClearPageShape::OutOfLine,
                clear_page_choice: choice,
                reason: format!(
                    "{S} defines clear_page_orig, clear_page_rep and clear_page_erms (out of \
                     line; {how})"
                ),
            });
        }
        if !(c_defines_inline(&h, "clear_pages") && c_defines_inline(&h, "clear_page")) {
            return Err(TreeError::NoClearPage {
                path: self.root.clone(),
                looked_for: format!(
                    "{} (out of line) and inline clear_pages()/clear_page()",
                    OUT_OF_LINE.join(", ")
                ),
                files: format!("{S} and {H}"),
            });
        }
        let unrolled = if asm_defines(&s, "__clear_pages_unrolled") {
            "__clear_pages_unrolled"
        } else {
            "no __clear_pages_unrolled"
        };
        Ok(LinkDetection {
            config: LinkConfig::Vanilla,
            clear_page: ClearPageShape::Inline,
            clear_page_choice: None,
            reason: format!(
                "{H} defines clear_pages() and clear_page() inline (clear_page_64.S has \
                 {unrolled}); compiled out of line from hypclear's shim"
            ),
        })
    }

    fn arm64_link_config(&self) -> Result<LinkDetection, TreeError> {
        let source = self.root.join("arch/arm64/lib/clear_page.S").is_file();
        let vars = read(&self.root.join("arch/arm64/kernel/image-vars.h"))?;
        let alias = vars.lines().any(|l| {
            let l = l.trim();
            l.starts_with("KVM_NVHE_ALIAS_HYP(clear_page,")
                || l.starts_with("KVM_NVHE_ALIAS_HYP(clear_page ,")
        });
        let in_nvhe = self.nvhe_lib_objects()?.iter().any(|o| o == "clear_page.o");
        let page_h = read(&self.root.join("arch/arm64/include/asm/page.h"))?;
        let inline_memset = clear_page_calls_memset(&page_h);
        let facts = format!(
            "arch/arm64/lib/clear_page.S {}, image-vars.h {} clear_page hyp alias, the nVHE \
             Makefile {} lib/clear_page.o, asm/page.h clear_page {}",
            if source { "present" } else { "absent" },
            if alias { "has a" } else { "has no" },
            if in_nvhe { "links" } else { "does not link" },
            if inline_memset {
                "is an inline memset()"
            } else {
                "is an extern routine"
            }
        );
        match (source, alias, in_nvhe, inline_memset) {
            (true, true, true, false) => Ok(LinkDetection {
                config: LinkConfig::Vanilla,
                clear_page: ClearPageShape::OutOfLine,
                clear_page_choice: None,
                reason: facts,
            }),
            (false, false, false, true) => Ok(LinkDetection {
                config: LinkConfig::Memset,
                clear_page: ClearPageShape::OutOfLine,
                clear_page_choice: None,
                reason: facts,
            }),
            _ => Err(TreeError::UnknownLink {
                path: self.root.clone(),
                why: facts,
            }),
        }
    }
}

/// The `../../../lib/X.o` objects named by `lib-objs :=` / `lib-objs +=`
/// assignments of the nVHE Makefile, without the prefix.
pub(crate) fn parse_lib_objs(makefile: &str) -> Vec<String> {
    let mut objs = Vec::new();
    for line in logical_lines(makefile) {
        let Some((lhs, rhs)) = line.split_once('=') else {
            continue;
        };
        let lhs = lhs.trim_end_matches([':', '+', '?']).trim();
        if lhs != "lib-objs" {
            continue;
        }
        // `lib-objs := $(addprefix ../../../lib/, $(lib-objs))` only
        // relocates the list; plain words are object names.
        for w in rhs.split_whitespace() {
            if w.ends_with(".o") && !w.contains('$') && !w.contains('/') {
                let w = w.to_string();
                if !objs.contains(&w) {
                    objs.push(w);
                }
            }
        }
    }
    objs
}

/// Whether assembly source `s` starts function `name` (SYM_FUNC_START and
/// its typed / local forms).
pub(crate) fn asm_defines(s: &str, name: &str) -> bool {
    s.lines().any(|l| {
        let l = l.trim_start();
        l.starts_with("SYM_")
            && l.contains("FUNC_START")
            && l.split_once('(').is_some_and(|(_, rest)| {
                rest.trim_start().starts_with(name) && {
                    let after = rest.trim_start()[name.len()..].trim_start();
                    after.starts_with(')') || after.starts_with(',')
                }
            })
    })
}

/// Whether C header `h` defines `name` as an inline function with a body
/// (`static inline void name(...)` followed by `{`), not a prototype.
pub(crate) fn c_defines_inline(h: &str, name: &str) -> bool {
    let head = format!("inline void {name}(");
    h.match_indices(&head).any(|(at, _)| {
        let rest = &h[at + head.len()..];
        let close = rest.find(')').unwrap_or(rest.len());
        rest[close..]
            .trim_start_matches(')')
            .trim_start()
            .starts_with('{')
    })
}

/// Whether asm/page.h defines clear_page() as a call to memset() (an inline
/// function or macro whose body, directly or via clear_pages(), is memset).
pub(crate) fn clear_page_calls_memset(page_h: &str) -> bool {
    let defines = |name: &str| -> Option<String> {
        // The text from the definition of `name` to its closing brace.
        let pos = page_h
            .find(&format!("void {name}(void *"))
            .or_else(|| page_h.find(&format!("#define {name}(")))?;
        let rest = &page_h[pos..];
        let head_end = rest.find(';').unwrap_or(rest.len());
        let brace = rest.find('{');
        match brace {
            Some(b) if b < head_end || rest.starts_with("#define") => {
                let end = rest[b..].find('}').map(|e| b + e).unwrap_or(rest.len());
                Some(rest[..end].to_string())
            }
            _ if rest.starts_with("#define") => Some(rest[..head_end.min(200)].to_string()),
            _ => None, // a prototype: extern routine
        }
    };
    match defines("clear_page") {
        Some(body) if body.contains("memset(") => true,
        Some(body) if body.contains("clear_pages(") => {
            defines("clear_pages").is_some_and(|b| b.contains("memset("))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lib_objs_from_the_nvhe_makefile() {
        let mk = "# comment\nlib-objs := clear_page.o copy_page.o memcpy.o \\\n\tmemset.o\n\
                  lib-objs := $(addprefix ../../../lib/, $(lib-objs))\nhyp-obj-y += x.o\n";
        assert_eq!(
            parse_lib_objs(mk),
            ["clear_page.o", "copy_page.o", "memcpy.o", "memset.o"]
        );
        let seed = "lib-objs := copy_page.o memcpy.o memset.o tishift.o\n";
        assert_eq!(parse_lib_objs(seed).len(), 4);
        assert!(parse_lib_objs("obj-y := a.o\n").is_empty());
    }

    #[test]
    fn page_h_shapes() {
        let vanilla = "extern void clear_page(void *to);\nextern void copy_page(void *to, const void *from);\n";
        assert!(!clear_page_calls_memset(vanilla));
        let patched = "static inline void clear_pages(void *addr, unsigned int npages)\n{\n\
                       \tmemset(addr, 0, npages * PAGE_SIZE);\n}\n#define clear_pages clear_pages\n\
                       static inline void clear_page(void *addr)\n{\n\tclear_pages(addr, 1);\n}\n";
        assert!(clear_page_calls_memset(patched));
        let direct =
            "static inline void clear_page(void *addr)\n{\n\tmemset(addr, 0, PAGE_SIZE);\n}\n";
        assert!(clear_page_calls_memset(direct));
    }

    fn fake_tree(dir: &Path, patched: bool) {
        let w = |p: &str, s: &str| {
            let p = dir.join(p);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, s).unwrap();
        };
        w("Makefile", "VERSION = 6\nPATCHLEVEL = 12\nSUBLEVEL = 7\n");
        w(
            "arch/x86/lib/clear_page_64.S",
            "SYM_FUNC_START(clear_page_rep)\nSYM_FUNC_START(clear_page_orig)\n\
             SYM_FUNC_START(clear_page_erms)\n",
        );
        if patched {
            w(
                "arch/arm64/kvm/hyp/nvhe/Makefile",
                "lib-objs := copy_page.o memset.o\n",
            );
            w(
                "arch/arm64/kernel/image-vars.h",
                "KVM_NVHE_ALIAS_HYP(memset, __pi_memset);\n",
            );
            w(
                "arch/arm64/include/asm/page.h",
                "static inline void clear_page(void *addr)\n{\n\tmemset(addr, 0, PAGE_SIZE);\n}\n",
            );
        } else {
            w("arch/arm64/lib/clear_page.S", "");
            w(
                "arch/arm64/kvm/hyp/nvhe/Makefile",
                "lib-objs := clear_page.o copy_page.o memset.o\n",
            );
            w(
                "arch/arm64/kernel/image-vars.h",
                "KVM_NVHE_ALIAS_HYP(clear_page, __pi_clear_page);\n",
            );
            w(
                "arch/arm64/include/asm/page.h",
                "extern void clear_page(void *to);\n",
            );
        }
    }

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("hypclear-tree-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn detects_vanilla_and_memset() {
        let d = tmpdir("vanilla");
        fake_tree(&d, false);
        let t = KernelTree::open(&d).unwrap();
        assert_eq!(t.version(), (6, 12, 7));
        assert_eq!(t.arches(), [Arch::X86_64, Arch::Aarch64]);
        let v = t.link_config(Arch::Aarch64).unwrap();
        assert_eq!(v.config, LinkConfig::Vanilla);
        assert!(v.reason.contains("clear_page.S present"), "{}", v.reason);
        assert_eq!(
            t.link_config(Arch::X86_64).unwrap().config,
            LinkConfig::Vanilla
        );

        let d2 = tmpdir("memset");
        fake_tree(&d2, true);
        let m = KernelTree::open(&d2)
            .unwrap()
            .link_config(Arch::Aarch64)
            .unwrap();
        assert_eq!(m.config, LinkConfig::Memset);
        assert!(m.reason.contains("inline memset()"), "{}", m.reason);

        // Half-patched: the alias is gone but clear_page.S still linked.
        fs::write(
            d.join("arch/arm64/kernel/image-vars.h"),
            "KVM_NVHE_ALIAS_HYP(memset, __pi_memset);\n",
        )
        .unwrap();
        assert!(matches!(
            t.link_config(Arch::Aarch64),
            Err(TreeError::UnknownLink { .. })
        ));
        fs::remove_dir_all(&d).unwrap();
        fs::remove_dir_all(&d2).unwrap();
    }

    /// 6.x: three out-of-line routines; 7.x: the inline clear_pages() of
    /// asm/page_64.h; neither: an error naming what was looked for where.
    #[test]
    fn x86_clear_page_is_found_where_the_tree_defines_it() {
        let d = tmpdir("x86-shapes");
        fake_tree(&d, false);
        let t = KernelTree::open(&d).unwrap();
        let six = t.link_config(Arch::X86_64).unwrap();
        assert_eq!(
            (six.config, six.clear_page),
            (LinkConfig::Vanilla, ClearPageShape::OutOfLine)
        );
        // 7.3's shape: only __clear_pages_unrolled out of line.
        let w = |p: &str, s: &str| fs::write(d.join(p), s).unwrap();
        w(
            "arch/x86/lib/clear_page_64.S",
            "SYM_TYPED_FUNC_START(__clear_pages_unrolled)\n\tshrq $6, %rcx\n",
        );
        fs::create_dir_all(d.join("arch/x86/include/asm")).unwrap();
        w(
            "arch/x86/include/asm/page_64.h",
            "void __clear_pages_unrolled(void *page);\n\
             static inline void clear_pages(void *addr, unsigned int npages)\n{\n\
             \tasm volatile(ALTERNATIVE_2(\"call __clear_pages_unrolled\", ...));\n}\n\
             static inline void clear_page(void *addr)\n{\n\tclear_pages(addr, 1);\n}\n",
        );
        let seven = t.link_config(Arch::X86_64).unwrap();
        assert_eq!(seven.clear_page, ClearPageShape::Inline);
        assert!(
            seven.reason.contains("__clear_pages_unrolled"),
            "{}",
            seven.reason
        );
        // A prototype is not a definition.
        w(
            "arch/x86/include/asm/page_64.h",
            "void clear_pages(void *addr, unsigned int npages);\nvoid clear_page(void *addr);\n",
        );
        let e = t.link_config(Arch::X86_64).unwrap_err().to_string();
        assert!(
            e.contains("clear_page_erms")
                && e.contains("arch/x86/lib/clear_page_64.S")
                && e.contains("asm/page_64.h"),
            "{e}"
        );
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn asm_and_c_definitions() {
        assert!(asm_defines("SYM_FUNC_START(memset)\n", "memset"));
        assert!(asm_defines(
            "  SYM_FUNC_START_LOCAL(memset_orig)",
            "memset_orig"
        ));
        assert!(!asm_defines("SYM_FUNC_START(memset_orig)", "memset"));
        assert!(!asm_defines("\tcall memset\n", "memset"));
        assert!(c_defines_inline(
            "static inline void clear_page(void *p)\n{ }",
            "clear_page"
        ));
        assert!(!c_defines_inline(
            "static inline void clear_pages(void *p, int n);",
            "clear_pages"
        ));
    }

    #[test]
    fn rejects_non_trees_and_other_arch() {
        let d = tmpdir("bad");
        assert!(matches!(
            KernelTree::open(&d),
            Err(TreeError::NotATree { .. })
        ));
        fs::write(d.join("Makefile"), "all:\n").unwrap();
        let e = KernelTree::open(&d).unwrap_err().to_string();
        assert!(e.contains("VERSION"), "{e}");
        fake_tree(&d, false);
        let host = Arch::host().unwrap();
        let other = if host == Arch::X86_64 {
            Arch::Aarch64
        } else {
            Arch::X86_64
        };
        fs::write(d.join(".config"), format!("{}\n", other.config_symbol())).unwrap();
        let t = KernelTree::open(&d).unwrap();
        assert!(matches!(
            t.resolve_arch(None),
            Err(TreeError::OtherArch { .. })
        ));
        assert_eq!(t.resolve_arch(Some(other)).unwrap(), other);
        fs::remove_file(d.join(".config")).unwrap();
        assert_eq!(t.resolve_arch(None).unwrap(), host);
        fs::remove_dir_all(&d).unwrap();
    }
}
