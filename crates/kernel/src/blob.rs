//! A kernel blob: a user's kernel tree's own library objects linked with
//! hypclear's guest entry, dispatcher and alias table by the one link
//! pipeline ([`hypclear_link::link`]), as a file that any host can produce
//! (cross-compiling) and a KVM host loads without a toolchain.
//!
//! The file is the linked ELF (with `.hyp.reloc`, the kept
//! `.altinstructions` / `.altinstr_replacement` / `.return_sites`, and the
//! emitted relocations) plus a [`META_SECTION`] holding [`Meta`] as JSON:
//! the tree's identity, the link configuration and why, the alias list and
//! the feature numbering the alternatives use.
//!
//! Loading treats the file as untrusted: the metadata is checked against
//! the ELF (architecture, alias rows), the relocation policy is run again
//! and must give the stored `.hyp.reloc`, and the alternatives are applied
//! (with [`alternatives`]) as the host kernel patched its nVHE hyp.
use super::alternatives::{self, AltError, Applied, FeatureNames, Image};
use super::guest_src;
use super::kbuild::{self, ConfigSource, KbuildError, Request, Step, StepEvent};
use super::paths;
use super::picks;
use super::routines;
use super::tree::{
    Arch, ClearPageShape, Identity, KernelTree, LinkConfig, LinkDetection, TreeError,
};
use hypclear_link::hyprel;
use hypclear_link::link::{self, Alias, LinkError, LinkSpec, SYMBOL_PREFIX, Toolchain};
use object::{Object, ObjectSection};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use thiserror::Error;

/// The ELF section holding [`Meta`] as JSON.
pub(crate) const META_SECTION: &str = ".hypclear.kernel";
/// Version of the [`Meta`] layout.
pub(crate) const FORMAT: u32 = 1;
/// Largest blob file accepted.
const MAX_FILE: u64 = 64 << 20;

/// What a blob file records about where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    pub format: u32,
    pub arch: Arch,
    pub tree: Identity,
    /// `defconfig` or the .config file used.
    pub kernel_config: String,
    pub config_hash: String,
    pub link_config: LinkConfig,
    pub link_reason: String,
    /// Where the tree's clear_page lives (absent in files from before
    /// x86 7.x trees: out of line).
    #[serde(default)]
    pub clear_page: ClearPageShape,
    /// x86 6.x: the tree's C choice among its clear_page routines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clear_page_choice: Option<crate::tree::CallChoice>,
    /// The features the tree's CPU-setup C implies from others (absent in
    /// files from before it was recorded: what a kernel runs is unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_setup: Option<crate::setup::CpuSetup>,
    /// The kernel's hyp alias list (`alias -> target`).
    pub aliases: Vec<(String, String)>,
    /// Alias-table rows (`row name -> kernel symbol`).
    pub rows: Vec<(String, String)>,
    /// Feature number -> name, for the alternatives in the image.
    pub features: BTreeMap<u16, String>,
    /// The hypclear that linked it.
    pub hypclear: String,
}

#[derive(Debug, Error)]
pub enum KernelBlobError {
    #[error(transparent)]
    Tree(#[from] TreeError),
    #[error(transparent)]
    Kbuild(#[from] KbuildError),
    /// The link pipeline's error names the command and its output.
    #[error(transparent)]
    Link(#[from] LinkError),
    #[error(
        "{tool} is missing ({why}); install the Debian package {package} (apt-get install {package})"
    )]
    MissingTool {
        tool: String,
        package: &'static str,
        why: String,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path} is not a usable kernel blob: {why}; rebuild it with `hypclear blob --kernel-tree TREE -o FILE`"
    )]
    BadFile { path: PathBuf, why: String },
    #[error(
        "{path} is a kernel blob for {blob}, this host is {host}; run it on an {blob} host, or build one with `hypclear blob --arch {host}`"
    )]
    OtherArch {
        path: PathBuf,
        blob: Arch,
        host: Arch,
    },
    #[error(
        "the kernel tree's objects define no `{symbol}` (the alias-table row `{row}` calls it): \
         looked in {objects}; the tree renames, removes or inlines it, which this hypclear does \
         not know (the objects' symbols: {defined})"
    )]
    MissingSymbol {
        symbol: String,
        row: String,
        objects: String,
        defined: String,
    },
    #[error("alternatives: {0}")]
    Alternatives(#[from] AltError),
    #[error(
        "--alternatives: unknown feature `{0}`; use host, guest, none or feature names of the tree (e.g. erms,fsrm,rep_good or mops)"
    )]
    UnknownFeature(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> KernelBlobError + '_ {
    move |source| KernelBlobError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What `blob` / `--kernel-tree` were asked for.
#[derive(Debug, Clone)]
pub struct MakeRequest {
    pub tree: PathBuf,
    pub arch: Option<Arch>,
    /// `--kernel-config`: `defconfig` or a file (default: the tree's
    /// .config, else defconfig).
    pub config: Option<String>,
    pub build_dir: Option<PathBuf>,
}

/// The result of [`make`].
#[derive(Debug, Clone)]
pub struct Made {
    pub file: PathBuf,
    pub meta: Meta,
    pub timings: Vec<(String, Duration)>,
}

/// The C compiler driver that links for `arch` on this host.
fn toolchain(arch: Arch) -> Result<Toolchain, KernelBlobError> {
    let (cc, package) = match (Arch::host(), arch) {
        (Some(h), a) if h == a => ("gcc", "gcc"),
        (_, Arch::Aarch64) => ("aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu"),
        (_, Arch::X86_64) => ("x86_64-linux-gnu-gcc", "gcc-x86-64-linux-gnu"),
    };
    match Command::new(cc).arg("--version").output() {
        Ok(o) if o.status.success() => Ok(Toolchain::from_cc(Path::new(cc))),
        Ok(o) => Err(KernelBlobError::MissingTool {
            tool: cc.into(),
            package,
            why: format!("`{cc} --version` exited with {}", o.status),
        }),
        Err(e) => Err(KernelBlobError::MissingTool {
            tool: cc.into(),
            package,
            why: e.to_string(),
        }),
    }
}

/// Build the tree's library objects with kbuild and link them into a blob
/// file at `out`. `progress` gets one line per step ("kbuild: prepare ...
/// 4.1 s").
pub fn make(
    req: &MakeRequest,
    out: Option<&Path>,
    mut progress: impl FnMut(&str),
) -> Result<Made, KernelBlobError> {
    let tree = KernelTree::open(&req.tree)?;
    let arch = tree.resolve_arch(req.arch)?;
    let detected = tree.link_config(arch)?;
    let identity = tree.identity()?;
    let tc = toolchain(arch)?;
    let config = match &req.config {
        Some(c) => ConfigSource::parse(c),
        None => ConfigSource::default_for(&tree),
    };
    let kernel_config = match &config {
        ConfigSource::Defconfig => "defconfig".to_string(),
        ConfigSource::File(p) => p.display().to_string(),
    };
    let mut timings = Vec::new();
    let request = Request {
        arch,
        config,
        build_dir: req.build_dir.clone(),
    };
    let built = run_kbuild(&tree, &request, &mut progress, &mut timings)?;
    let machine = match arch {
        Arch::X86_64 => object::elf::EM_X86_64,
        Arch::Aarch64 => object::elf::EM_AARCH64,
    };
    let names = alternatives::feature_names(machine, tree.root(), &built.build_dir)?;

    let t = Instant::now();
    let mut meta = blob_meta(&tree, identity, kernel_config, &built, &detected, &names);
    let (linked, objects) = link_blob(&tc, &built, &mut meta)?;
    // Read while `built` holds the build directory's lock: the next
    // hypclear to link there removes the link files.
    let bytes = std::fs::read(&linked).map_err(io(&linked))?;
    let out = match out {
        Some(out) => {
            crate::files::write_atomically(out, |w| w.write_all(&bytes)).map_err(io(out))?;
            out.to_path_buf()
        }
        None => publish(&built.build_dir, &bytes)?,
    };
    timings.push(("link".into(), t.elapsed()));
    progress(&format!(
        "link: {objects} objects, {} configuration ... {:.1} s",
        detected.config,
        t.elapsed().as_secs_f64()
    ));
    Ok(Made {
        file: out,
        meta,
        timings,
    })
}

/// The blob of a `--kernel-tree` side, where it stays readable after the
/// build directory's lock is released (the side reads it again later, an
/// `info` for its picks): `kernel-<xxh3 of its bytes>.blob` beside the
/// link files, never removed, replaced in one step, so another hypclear
/// linking the same tree (or another hypclear build linking it anew) never
/// takes it from under a reader. One file per distinct blob, about 100 KB.
fn publish(build_dir: &Path, bytes: &[u8]) -> Result<PathBuf, KernelBlobError> {
    let name = format!("kernel-{:016x}.blob", twox_hash::XxHash3_64::oneshot(bytes));
    let path = build_dir.join(name);
    let same = std::fs::metadata(&path).is_ok_and(|m| m.len() == bytes.len() as u64);
    if !same {
        crate::files::write_atomically(&path, |w| w.write_all(bytes)).map_err(io(&path))?;
    }
    Ok(path)
}

/// What the blob built for `built.arch` records: the tree it came from
/// (`identity`, `kernel_config`), how it links (`detected`), its aliases
/// and rows and the tree's feature numbering (`link_blob` narrows it).
fn blob_meta(
    tree: &KernelTree,
    identity: Identity,
    kernel_config: String,
    built: &kbuild::Output,
    detected: &LinkDetection,
    names: &FeatureNames,
) -> Meta {
    let arch = built.arch;
    let pairs = |v: &[routines::AliasPair]| {
        v.iter()
            .map(|(a, t)| (a.to_string(), t.to_string()))
            .collect()
    };
    Meta {
        format: FORMAT,
        arch,
        tree: identity,
        kernel_config,
        config_hash: built.config_hash.clone(),
        link_config: detected.config,
        link_reason: detected.reason.clone(),
        clear_page: detected.clear_page,
        clear_page_choice: detected.clear_page_choice.clone(),
        cpu_setup: Some(crate::setup::CpuSetup::read(tree.root(), arch)),
        aliases: pairs(&routines::kernel_aliases(arch, detected.config)),
        rows: pairs(&routines::table_rows(
            arch,
            detected.config,
            detected.clear_page,
        )),
        features: names.names.clone(),
        hypclear: env!("CARGO_PKG_VERSION").to_string(),
    }
}

/// Link `built`'s objects with hypclear's entry and tables into the blob
/// file (in the build directory's `hypclear-blob/`), `meta` as its
/// metadata section, its features narrowed to those the image uses.
/// Returns the file and the number of objects linked.
fn link_blob(
    tc: &Toolchain,
    built: &kbuild::Output,
    meta: &mut Meta,
) -> Result<(PathBuf, usize), KernelBlobError> {
    let arch = meta.arch;
    let work = built.build_dir.join("hypclear-blob");
    let _ = std::fs::remove_dir_all(&work);
    guest_src::write(arch, &work).map_err(io(&work))?;
    let rows = routines::table_rows(arch, meta.link_config, meta.clear_page);
    let kernel_aliases = routines::kernel_aliases(arch, meta.link_config);
    check_defined(&built.objects, &kernel_aliases, &rows)?;
    let glue = compile_glue(tc, &work, &rows)?;
    let mut objects = glue.objects;
    objects.extend(built.objects.iter().map(|o| o.path.clone()));
    let meta_file = work.join("meta.json");
    write_meta(&meta_file, meta)?;
    let linked_elf = work.join("kernel-blob.elf");
    let link = BlobLink {
        tc,
        arch,
        work: &work,
        objects: &objects,
        aliases: &blob_aliases(&kernel_aliases, &rows),
        includes: &glue.includes,
    };
    link.link(&linked_elf)?;
    // Only the feature numbers this image's alternatives use are kept.
    keep_used_features(meta, &linked_elf)?;
    write_meta(&meta_file, meta)?;
    let blob = add_meta_section(tc, &meta_file, &linked_elf, &work.join("kernel.blob"))?;
    Ok((blob, objects.len()))
}

/// Every symbol the alias list and the table rows name must be a global
/// the tree's objects define: the error names it, its row and the files
/// read, where the link would only print an undefined reference.
fn check_defined(
    objects: &[kbuild::BuiltObject],
    kernel_aliases: &[routines::AliasPair],
    rows: &[routines::AliasPair],
) -> Result<(), KernelBlobError> {
    use object::{Object, ObjectSymbol};
    let mut defined = BTreeSet::new();
    for o in objects {
        let bytes = std::fs::read(&o.path).map_err(io(&o.path))?;
        let file = object::File::parse(&*bytes)
            .map_err(|e| bad(&o.path, format!("kbuild's object is not ELF: {e}")))?;
        defined.extend(
            file.symbols()
                .filter(|s| s.is_definition() && s.is_global())
                .filter_map(|s| s.name().ok().map(str::to_string)),
        );
    }
    let missing = kernel_aliases
        .iter()
        .chain(rows)
        .find(|(_, target)| !defined.contains(*target));
    let Some((row, symbol)) = missing else {
        return Ok(());
    };
    let list = |v: Vec<String>| v.join(", ");
    Err(KernelBlobError::MissingSymbol {
        symbol: symbol.to_string(),
        row: row.to_string(),
        objects: list(
            objects
                .iter()
                .map(|o| o.path.display().to_string())
                .collect(),
        ),
        defined: list(defined.into_iter().collect()),
    })
}

/// kbuild's steps, each reported to `progress` and timed into `timings`.
fn run_kbuild(
    tree: &KernelTree,
    request: &Request,
    progress: &mut impl FnMut(&str),
    timings: &mut Vec<(String, Duration)>,
) -> Result<kbuild::Output, KernelBlobError> {
    Ok(kbuild::build(
        tree,
        request,
        |step: Step, ev: StepEvent| match ev {
            StepEvent::Started => progress(&format!("kbuild: {step} ...")),
            StepEvent::Done(d) => {
                progress(&format!("kbuild: {step} ... {:.1} s", d.as_secs_f64()));
                timings.push((format!("kbuild {step}"), d));
            }
            StepEvent::UpToDate => progress(&format!("kbuild: {step} up to date")),
        },
    )?)
}

/// hypclear's own objects of a kernel blob and the include path they use.
struct Glue {
    objects: Vec<PathBuf>,
    includes: Vec<PathBuf>,
}

/// Write the alias table `rows` as `kernel/aliases.h` under `work` (the
/// guest sources' copy) and compile the entry and the tables.
fn compile_glue(
    tc: &Toolchain,
    work: &Path,
    rows: &[routines::AliasPair],
) -> Result<Glue, KernelBlobError> {
    let mut aliases_h =
        String::from("/* Generated by hypclear: the kernel blob's alias table. */\n");
    for (row, sym) in rows {
        aliases_h.push_str(&format!("HYP_ALIAS({row}, {sym})\n"));
    }
    let kdir = work.join("kernel");
    let ah = kdir.join("aliases.h");
    std::fs::write(&ah, aliases_h).map_err(io(&ah))?;
    let includes = vec![kdir.clone(), work.join("include")];
    let mut objects = Vec::new();
    for src in ["entry.S", "common/tables.S"] {
        let obj = work.join(format!("{}.o", src.replace(['/', '.'], "_")));
        let mut cc = Command::new(&tc.cc);
        cc.args(["-c", "-ffreestanding", "-fno-builtin"]);
        for i in &includes {
            cc.arg("-I").arg(i);
        }
        cc.arg(work.join(src)).arg("-o").arg(&obj);
        run(cc)?;
        objects.push(obj);
    }
    Ok(Glue { objects, includes })
}

/// The link's alias list: the kernel's, then the table rows.
fn blob_aliases(
    kernel_aliases: &[routines::AliasPair],
    rows: &[routines::AliasPair],
) -> Vec<Alias> {
    let mut aliases: Vec<Alias> = kernel_aliases
        .iter()
        .chain(rows.iter())
        .map(|(a, t)| Alias {
            alias: a.to_string(),
            target: t.to_string(),
        })
        .collect();
    aliases.dedup();
    aliases
}

fn write_meta(meta_file: &Path, m: &Meta) -> Result<(), KernelBlobError> {
    let text = serde_json::to_vec_pretty(m).map_err(|e| KernelBlobError::BadFile {
        path: meta_file.to_path_buf(),
        why: e.to_string(),
    })?;
    std::fs::write(meta_file, text).map_err(io(meta_file))
}

/// What the kernel blob's link takes.
struct BlobLink<'a> {
    tc: &'a Toolchain,
    arch: Arch,
    work: &'a Path,
    objects: &'a [PathBuf],
    aliases: &'a [Alias],
    includes: &'a [PathBuf],
}

impl BlobLink<'_> {
    /// Link the objects with the one link pipeline into `linked_elf`.
    fn link(&self, linked_elf: &Path) -> Result<(), KernelBlobError> {
        let mut defines = vec!["HYP_KERNEL_OBJECTS".to_string()];
        if self.arch == Arch::X86_64 {
            defines.push("HYP_X86_RETURN_THUNK".into());
        }
        link::link(
            self.tc,
            &LinkSpec {
                objects: self.objects,
                aliases: self.aliases,
                script: &self.work.join("common/hyp.lds.S"),
                includes: self.includes,
                defines: &defines,
                work_dir: self.work,
                name: "kernel-hyp",
                out: linked_elf,
                flat_image: None,
                extra_sections: &[],
            },
        )?;
        Ok(())
    }
}

/// Keep only the feature names the linked image's alternatives use.
fn keep_used_features(meta: &mut Meta, linked_elf: &Path) -> Result<(), KernelBlobError> {
    let bytes = std::fs::read(linked_elf).map_err(io(linked_elf))?;
    let img = Image::from_elf(&bytes, None)?;
    let used: BTreeSet<u16> = img.sites.iter().map(|s| s.feature).collect();
    meta.features.retain(|n, _| used.contains(n));
    Ok(())
}

/// `linked_elf` plus the metadata section, as `blob`. objcopy writes beside
/// its input; the file asked for is then replaced in one step (objcopy on
/// a device or a missing directory failed with BFD assertions, after the
/// whole build).
fn add_meta_section(
    tc: &Toolchain,
    meta_file: &Path,
    linked_elf: &Path,
    blob: &Path,
) -> Result<PathBuf, KernelBlobError> {
    let mut add = Command::new(&tc.objcopy);
    add.arg(format!(
        "--add-section={META_SECTION}={}",
        meta_file.display()
    ))
    .arg(linked_elf)
    .arg(blob);
    run(add)?;
    Ok(blob.to_path_buf())
}

fn run(cmd: Command) -> Result<(), KernelBlobError> {
    let mut cmd = cmd;
    let shown = format!("{cmd:?}");
    let o = cmd.output().map_err(|e| {
        KernelBlobError::Link(LinkError::Spawn {
            cmd: shown.clone(),
            source: e,
        })
    })?;
    if !o.status.success() {
        return Err(KernelBlobError::Link(LinkError::Failed {
            cmd: shown,
            status: o.status.to_string(),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
        }));
    }
    Ok(())
}

/// `--alternatives`: which features count as present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AltChoice {
    /// What the host kernel decided.
    Host,
    /// The guest's CPUID view (KVM's supported CPUID / ID registers).
    Guest,
    /// No feature: every fallback.
    None,
    /// Exactly these features.
    List(Vec<String>),
}

impl AltChoice {
    pub fn parse(s: &str) -> AltChoice {
        match s {
            "host" => AltChoice::Host,
            "guest" => AltChoice::Guest,
            "none" => AltChoice::None,
            l => AltChoice::List(
                l.split(',')
                    .map(|f| f.trim().to_ascii_lowercase())
                    .filter(|f| !f.is_empty())
                    .collect(),
            ),
        }
    }

    pub fn name(&self) -> String {
        match self {
            AltChoice::Host => "host".into(),
            AltChoice::Guest => "guest".into(),
            AltChoice::None => "none".into(),
            AltChoice::List(l) => l.join(","),
        }
    }
}

/// A kernel blob file, validated, with its alternatives applied.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub path: PathBuf,
    pub meta: Meta,
    /// The patched ELF.
    pub elf: Vec<u8>,
    /// The patched image from address 0 (the aarch64 flat Image).
    pub image: Vec<u8>,
    pub alternatives: String,
    pub features: BTreeSet<String>,
    pub applied: Vec<Applied>,
    /// One line per routine: which path it takes.
    pub paths: Vec<String>,
    /// The alternatives paths this load verifies (`None`: one
    /// `--alternatives` decision for every routine).
    pub load: Option<paths::Load>,
}

fn bad(path: &Path, why: impl Into<String>) -> KernelBlobError {
    KernelBlobError::BadFile {
        path: path.to_path_buf(),
        why: why.into(),
    }
}

/// Read and validate a blob file for this host (see the module docs) and
/// apply its alternatives as `choice` says.
pub fn load(
    path: &Path,
    choice: &AltChoice,
    guest: &picks::GuestCpu,
) -> Result<Loaded, KernelBlobError> {
    let p = prepare(path)?;
    let present = p.present(choice, guest)?;
    p.apply(choice.name(), &|_| &present, &present, None)
}

/// A kernel blob file read and validated for this host, its alternatives
/// not yet applied: one [`Prepared::apply`] per alternatives path.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub path: PathBuf,
    pub meta: Meta,
    elf: Vec<u8>,
    /// Routines named by the kernel's symbols; x86 returns patched.
    pub img: Image,
}

/// Read and validate a blob file for this host (see the module docs).
pub fn prepare(path: &Path) -> Result<Prepared, KernelBlobError> {
    let len = std::fs::metadata(path).map_err(io(path))?.len();
    if len > MAX_FILE {
        return Err(bad(path, format!("{len} bytes, more than {MAX_FILE}")));
    }
    let elf = std::fs::read(path).map_err(io(path))?;
    let meta = read_meta(path, &elf)?;
    let host = Arch::host().ok_or(TreeError::UnknownHost)?;
    if meta.arch != host {
        return Err(KernelBlobError::OtherArch {
            path: path.to_path_buf(),
            blob: meta.arch,
            host,
        });
    }
    let mut img = Image::from_elf(&elf, None).map_err(|e| bad(path, e.to_string()))?;
    img.strip_symbol_prefix(SYMBOL_PREFIX);
    // Name routines by the kernel's symbols, not by hypclear's row aliases.
    img.functions
        .retain(|f| !meta.rows.iter().any(|(r, t)| *r == f.name && r != t));
    if img.machine == object::elf::EM_X86_64 {
        img.patch_returns()?;
    }
    Ok(Prepared {
        path: path.to_path_buf(),
        meta,
        elf,
        img,
    })
}

impl Prepared {
    /// The tree's numbering of the features the image's alternatives use.
    pub fn names(&self) -> FeatureNames {
        FeatureNames {
            names: self.meta.features.clone(),
        }
    }

    /// The features `choice` counts as present: `guest`'s are its CPUID's
    /// plus what the tree's CPU-setup C implies from them (CPUID's alone
    /// where that code was not read).
    pub fn present(
        &self,
        choice: &AltChoice,
        guest: &picks::GuestCpu,
    ) -> Result<BTreeSet<String>, KernelBlobError> {
        Ok(match choice {
            AltChoice::Host => alternatives::host_features(self.img.machine),
            AltChoice::Guest => match &self.meta.cpu_setup {
                Some(s) => s
                    .apply(guest.vendor, &guest.features)
                    .map_or_else(|_| guest.features.clone(), |(f, _)| f),
                None => guest.features.clone(),
            },
            AltChoice::None => BTreeSet::new(),
            AltChoice::List(l) => {
                let known: BTreeSet<&String> = self.meta.features.values().collect();
                let mut s = BTreeSet::new();
                for f in l {
                    let name = if known.contains(f) {
                        f.clone()
                    } else if known.contains(&format!("has_{f}")) {
                        format!("has_{f}")
                    } else if is_feature_name(f) {
                        // Not used by this image's alternatives: harmless.
                        f.clone()
                    } else {
                        return Err(KernelBlobError::UnknownFeature(f.clone()));
                    };
                    s.insert(name);
                }
                s
            }
        })
    }

    /// What the tree's kernel runs for each family on `cpu` (see
    /// [`picks::kernel_picks`]).
    pub fn kernel_picks(&self, cpu: &picks::GuestCpu) -> Result<Vec<picks::Pick>, KernelBlobError> {
        let names = self.names();
        let code = picks::TreeCode {
            arch: self.meta.arch,
            link_config: self.meta.link_config,
            clear_page: self.meta.clear_page,
            img: &self.img,
            names: &names,
            clear_page_choice: self.meta.clear_page_choice.as_ref(),
            cpu_setup: self.meta.cpu_setup.as_ref(),
        };
        Ok(picks::kernel_picks(&code, cpu)?)
    }

    /// Apply the alternatives with `present(routine)` features and patch
    /// them into a copy of the ELF. `features` is what the report shows
    /// as the decision; `load` the alternatives paths it carries, if any.
    pub fn apply<'p>(
        &self,
        alternatives: String,
        present: &dyn Fn(&str) -> &'p BTreeSet<String>,
        features: &BTreeSet<String>,
        load: Option<paths::Load>,
    ) -> Result<Loaded, KernelBlobError> {
        let mut img = self.img.clone();
        let applied = img.apply_by(&self.names(), present)?;
        let mut elf = self.elf.clone();
        patch_sections(&mut elf, &img).map_err(|why| bad(&self.path, why))?;
        let paths = describe(&self.meta, &applied, features);
        Ok(Loaded {
            path: self.path.clone(),
            meta: self.meta.clone(),
            elf,
            image: img.bytes,
            alternatives,
            features: features.clone(),
            applied,
            paths,
            load,
        })
    }
}

fn is_feature_name(f: &str) -> bool {
    !f.is_empty()
        && f.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The metadata of a blob file, checked against its ELF: the relocation
/// policy must give the stored `.hyp.reloc`, every alias row must exist.
pub fn read_meta(path: &Path, elf: &[u8]) -> Result<Meta, KernelBlobError> {
    let file = object::File::parse(elf).map_err(|e| bad(path, format!("not an ELF file: {e}")))?;
    let sec = file.section_by_name(META_SECTION).ok_or_else(|| {
        bad(
            path,
            format!("no {META_SECTION} section (not made by `hypclear blob`)"),
        )
    })?;
    let data = sec.data().map_err(|e| bad(path, e.to_string()))?;
    let meta: Meta = serde_json::from_slice(data)
        .map_err(|e| bad(path, format!("{META_SECTION} is not valid metadata: {e}")))?;
    if meta.format != FORMAT {
        return Err(bad(
            path,
            format!(
                "metadata format {} (this hypclear reads {FORMAT})",
                meta.format
            ),
        ));
    }
    let machine_ok = match meta.arch {
        Arch::X86_64 => file.architecture() == object::Architecture::X86_64,
        Arch::Aarch64 => file.architecture() == object::Architecture::Aarch64,
    };
    if !machine_ok {
        return Err(bad(
            path,
            format!(
                "metadata says {} but the ELF is {:?}",
                meta.arch,
                file.architecture()
            ),
        ));
    }
    let stored = file
        .section_by_name(hyprel::RELOC_SECTION)
        .and_then(|s| s.data().ok())
        .and_then(hyprel::decode)
        .ok_or_else(|| bad(path, format!("no valid {} section", hyprel::RELOC_SECTION)))?;
    let policed = hyprel::police(elf).map_err(|e| bad(path, e.to_string()))?;
    check_relocs(path, &stored, &policed)?;
    let expected = routines::table_rows(meta.arch, meta.link_config, meta.clear_page);
    let rows: Vec<(&str, &str)> = meta
        .rows
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    if rows != expected {
        return Err(bad(
            path,
            format!(
                "alias rows {:?} do not match the {} configuration {:?}",
                meta.rows, meta.link_config, expected
            ),
        ));
    }
    Ok(meta)
}

/// The stored `.hyp.reloc` must be what the relocation policy finds; a
/// mismatch names the first word that differs (the counts alone may agree).
fn check_relocs(path: &Path, stored: &[u32], policed: &[u32]) -> Result<(), KernelBlobError> {
    let hex = |w: Option<&u32>| w.map_or_else(|| "nothing".to_string(), |w| format!("{w:#x}"));
    let Some(i) = (0..stored.len().max(policed.len())).find(|&i| stored.get(i) != policed.get(i))
    else {
        return Ok(());
    };
    Err(bad(
        path,
        format!(
            "{} word {i} is {}, the relocation policy finds {} there ({} words listed, {} found)",
            hyprel::RELOC_SECTION,
            hex(stored.get(i)),
            hex(policed.get(i)),
            stored.len(),
            policed.len()
        ),
    ))
}

/// Copy the patched image back into the ELF's allocated sections.
fn patch_sections(elf: &mut [u8], img: &Image) -> Result<(), String> {
    let file = object::File::parse(&*elf).map_err(|e| e.to_string())?;
    let mut copies = Vec::new();
    for s in file.sections() {
        let Some((off, size)) = s.file_range() else {
            continue;
        };
        let alloc = matches!(
            s.flags(),
            object::SectionFlags::Elf { sh_flags, .. } if sh_flags.0 & object::elf::SHF_ALLOC.0 != 0
        );
        if !alloc {
            continue;
        }
        let from = s
            .address()
            .checked_sub(img.base)
            .ok_or("section below the image")? as usize;
        let to = from + size as usize;
        let src = img.bytes.get(from..to).ok_or("section outside the image")?;
        copies.push((off as usize, src.to_vec()));
    }
    for (off, bytes) in copies {
        let dst = elf
            .get_mut(off..off + bytes.len())
            .ok_or("section outside the file")?;
        dst.copy_from_slice(&bytes);
    }
    Ok(())
}

/// One line per routine: which path it takes.
fn describe(meta: &Meta, applied: &[Applied], present: &BTreeSet<String>) -> Vec<String> {
    let mut out: Vec<String> = applied.iter().map(|a| a.summary.clone()).collect();
    if meta.arch == Arch::X86_64
        && meta.link_config == LinkConfig::Vanilla
        && meta.clear_page == ClearPageShape::OutOfLine
    {
        out.push(match &meta.clear_page_choice {
            Some(c) => {
                let (pick, why) = c.pick(present);
                format!(
                    "clear_page: the kernel picks {pick} ({why}, alternative_call_2 in {}); variants erms, rep, orig offered",
                    c.file
                )
            }
            None => "clear_page: the kernel's pick is unknown (the tree's alternative_call_2 could not be read); variants erms, rep, orig offered".into(),
        });
    }
    if meta.link_config == LinkConfig::Memset {
        out.push("clear_page: memset(p, 0, n * 4096) (no clear_page routine or alias)".into());
    }
    if applied.is_empty() {
        out.push("no alternatives in the routines: every routine runs as linked".into());
    }
    out.push(equivalents_line(meta, applied, present));
    out
}

/// "built-in equivalents: clear_page erms (ERMS), memset orig (no FSRS), ...":
/// the built-in that runs each family's path, or `unknown` with the path.
fn equivalents_line(meta: &Meta, applied: &[Applied], present: &BTreeSet<String>) -> String {
    let families = routines::FAMILIES.into_iter().filter(|f| {
        meta.link_config == LinkConfig::Vanilla || *f != crate::arch::Family::ClearPage
    });
    let parts: Vec<String> = families
        .map(|fam| {
            match picks::equivalent(
                meta.arch,
                fam,
                applied,
                meta.clear_page_choice.as_ref(),
                present,
            ) {
                picks::Equivalent::Builtin { variant, why } => format!("{fam} {variant} ({why})"),
                picks::Equivalent::Unknown { path, why } => {
                    format!("{fam} unknown ({path}, {why}: no built-in lists this path)")
                }
            }
        })
        .collect();
    format!("built-in equivalents: {}", parts.join(", "))
}

/// The guest's CPU from the capabilities KVM offers, as the kernel's
/// alternatives see it.
pub fn guest_cpu(caps: &crate::arch::CpuCaps) -> picks::GuestCpu {
    picks::GuestCpu {
        features: guest_view(caps),
        vendor: caps.x86_vendor,
    }
}

/// The guest's feature view from the capabilities KVM offers (names as in
/// the tree's feature list: `erms`, `fsrm`, `has_mops`).
pub fn guest_view(caps: &crate::arch::CpuCaps) -> BTreeSet<String> {
    let mut s = BTreeSet::new();
    s.insert("always".to_string());
    for (f, on) in &caps.features {
        if *on {
            s.insert(f.clone());
            s.insert(format!("has_{f}"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 25 case 11: one flipped byte said "lists 12 words, the
    /// relocation policy finds 12"; the message names the word.
    #[test]
    fn a_relocation_mismatch_names_the_differing_word() {
        let p = Path::new("k.blob");
        assert!(check_relocs(p, &[8, 16, 24], &[8, 16, 24]).is_ok());
        let m = check_relocs(p, &[8, 0x1010, 24], &[8, 0x10, 24])
            .unwrap_err()
            .to_string();
        assert!(
            m.contains("word 1 is 0x1010") && m.contains("finds 0x10 there"),
            "{m}"
        );
        let m = check_relocs(p, &[8], &[8, 16]).unwrap_err().to_string();
        assert!(m.contains("word 1 is nothing"), "{m}");
    }

    #[test]
    fn alternatives_choice_parses() {
        assert_eq!(AltChoice::parse("host"), AltChoice::Host);
        assert_eq!(AltChoice::parse("guest"), AltChoice::Guest);
        assert_eq!(AltChoice::parse("none"), AltChoice::None);
        assert_eq!(
            AltChoice::parse("ERMS, fsrm"),
            AltChoice::List(vec!["erms".into(), "fsrm".into()])
        );
        assert_eq!(AltChoice::parse("erms,fsrm").name(), "erms,fsrm");
        assert!(is_feature_name("rep_good") && !is_feature_name("rep-good"));
    }

    #[test]
    fn non_blob_files_are_rejected_with_the_fix() {
        let e = read_meta(Path::new("x.blob"), b"not an elf").unwrap_err();
        assert!(e.to_string().contains("hypclear blob --kernel-tree"), "{e}");
        // A real ELF without the metadata note (the built-in blob).
        let elf = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let e = read_meta(Path::new("x.blob"), &elf).unwrap_err();
        assert!(e.to_string().contains(META_SECTION), "{e}");
    }

    /// An object defining `names` (globals in .text).
    fn object_defining(names: &[&str]) -> Vec<u8> {
        use object::write::{Object as W, Symbol, SymbolSection};
        use object::{Architecture, BinaryFormat, Endianness, SymbolFlags, SymbolKind};
        use object::{SymbolScope, write::StandardSection};
        let mut o = W::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
        let text = o.section_id(StandardSection::Text);
        o.append_section_data(text, &[0xc3; 16], 16);
        for (i, n) in names.iter().enumerate() {
            o.add_symbol(Symbol {
                name: n.as_bytes().to_vec(),
                value: i as u64,
                size: 1,
                kind: SymbolKind::Text,
                scope: SymbolScope::Linkage,
                weak: false,
                section: SymbolSection::Section(text),
                flags: SymbolFlags::None,
            });
        }
        o.write().unwrap()
    }

    /// A routine the tree no longer defines (renamed, inlined) is named
    /// with its row and the objects read, before any link.
    #[test]
    fn a_symbol_no_object_defines_is_named_before_the_link() {
        let d = std::env::temp_dir().join(format!("hypclear-defined-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let obj = d.join("memset_64.o");
        std::fs::write(&obj, object_defining(&["__memset", "memset"])).unwrap();
        let objects = [kbuild::BuiltObject {
            name: "memset_64".into(),
            path: obj.clone(),
        }];
        let aliases = [("memset", "__memset")];
        assert!(check_defined(&objects, &aliases, &[("memset_kernel", "memset")]).is_ok());
        let rows = [
            ("memset_kernel", "memset"),
            ("clear_page_erms", "clear_page_erms"),
        ];
        let e = check_defined(&objects, &aliases, &rows).unwrap_err();
        let m = e.to_string();
        assert!(
            matches!(&e, KernelBlobError::MissingSymbol { symbol, row, .. }
                if symbol == "clear_page_erms" && row == "clear_page_erms"),
            "{m}"
        );
        assert!(
            m.contains(&obj.display().to_string()) && m.contains("__memset"),
            "{m}"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn guest_view_names_features_both_ways() {
        let caps = crate::arch::CpuCaps {
            model: "m".into(),
            features: vec![("erms".into(), true), ("fsrm".into(), false)],
            x86_vendor: None,
        };
        let v = guest_view(&caps);
        assert!(v.contains("erms") && v.contains("has_erms") && !v.contains("fsrm"));
    }
}
