//! Drive kbuild to build only the kernel's library objects that hypclear
//! links into its blob, out of tree (`O=DIR`), with a stamp so that an
//! unchanged tree rebuilds nothing.
//!
//! Steps: configure (`defconfig`, or the given .config + `olddefconfig`),
//! `prepare`, then the objects as single targets with `-j1` (kbuild runs
//! each AS twice in single-target mode; parallel jobs race on the output).
use super::guest_src;
use super::tree::{Arch, ClearPageShape, KernelTree, TreeError};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};
use thiserror::Error;

/// Bump when the build directory layout or the stamp meaning changes.
const STAMP_VERSION: u32 = 1;
const STAMP_FILE: &str = ".hypclear-kbuild.json";
/// How many lines of kbuild output a failure carries.
pub(crate) const TAIL_LINES: usize = 20;

/// Where the kernel configuration comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// `make defconfig` for the architecture.
    Defconfig,
    /// A .config file, completed with `make olddefconfig`.
    File(PathBuf),
}

impl ConfigSource {
    /// The default: the tree's own .config if it has one, else defconfig.
    pub fn default_for(tree: &KernelTree) -> ConfigSource {
        let cfg = tree.root().join(".config");
        if cfg.is_file() {
            ConfigSource::File(cfg)
        } else {
            ConfigSource::Defconfig
        }
    }

    /// Check a .config file before any build: readable, and every line a
    /// comment or `CONFIG_NAME=value` (kbuild reads anything else as
    /// nothing, silently).
    pub fn check(&self) -> Result<(), KbuildError> {
        let ConfigSource::File(path) = self else {
            return Ok(());
        };
        let err = |source| KbuildError::Config {
            path: path.clone(),
            source,
        };
        let text = fs::read(path).map_err(err)?;
        let text = String::from_utf8(text)
            .map_err(|e| err(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
        let setting = |l: &str| {
            l.split_once('=').is_some_and(|(name, _)| {
                name.strip_prefix("CONFIG_").is_some_and(|n| {
                    !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                })
            })
        };
        let bad = text.lines().enumerate().find(|(_, l)| {
            let l = l.trim();
            !(l.is_empty() || l.starts_with('#') || setting(l))
        });
        match bad {
            Some((i, l)) => Err(KbuildError::BadConfig {
                path: path.clone(),
                line_no: i + 1,
                line: l
                    .chars()
                    .take(60)
                    .collect::<String>()
                    .escape_debug()
                    .to_string(),
            }),
            None => Ok(()),
        }
    }

    /// Parse a `--kernel-config` value: `defconfig` or a file path.
    pub fn parse(value: &str) -> ConfigSource {
        if value == "defconfig" {
            ConfigSource::Defconfig
        } else {
            ConfigSource::File(PathBuf::from(value))
        }
    }
}

/// A kbuild step, for progress and errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Step {
    /// Waiting for another hypclear that holds the build directory.
    Lock,
    Config,
    Prepare,
    Objects,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Step::Lock => "waiting for the build directory (another hypclear holds its lock)",
            Step::Config => "config",
            Step::Prepare => "prepare",
            Step::Objects => "objects",
        })
    }
}

/// What happened to a step, reported to the progress callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepEvent {
    Started,
    /// Ran make; how long it took.
    Done(Duration),
    /// Nothing to do (the stamp and the objects' dependencies are current).
    UpToDate,
}

#[derive(Debug, Error)]
pub enum KbuildError {
    #[error(transparent)]
    Tree(#[from] TreeError),
    #[error(
        "{tool} is missing: {why}; install the Debian package {package} (apt-get install {package})"
    )]
    MissingTool {
        tool: String,
        package: &'static str,
        why: String,
    },
    #[error(
        "{assembler} cannot assemble the MOPS instructions (setp/setm/sete) that {file} uses; \
         install a newer binutils-aarch64-linux-gnu (2.38 or later)"
    )]
    NoMops { assembler: String, file: String },
    #[error(
        "cannot read the kernel config {path}: {source}; give --kernel-config a readable .config \
         file, or `defconfig`"
    )]
    Config {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path} is not a kernel configuration: line {line_no} `{line}` is neither a comment nor \
         CONFIG_NAME=value; give --kernel-config a .config file (as `make menuconfig` writes \
         it), or `defconfig`"
    )]
    BadConfig {
        path: PathBuf,
        line_no: usize,
        line: String,
    },
    #[error(
        "the kernel tree {0} has been configured or built in place (it has .config or include/config), \
         so kbuild refuses O=; pass --kernel-build-dir {0} to build in the tree itself, or save its \
         .config, run `make mrproper` and pass --kernel-config FILE"
    )]
    TreeNotClean(PathBuf),
    #[error("cannot use the build directory {path}: {source}")]
    BuildDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no cache directory: set XDG_CACHE_HOME or HOME, or pass --kernel-build-dir")]
    NoCacheDir,
    #[error("kbuild step {step} failed ({command}, {status}); the last kbuild lines:\n{}\nfull log: {log}", tail.join("\n"))]
    Make {
        step: Step,
        command: String,
        status: String,
        tail: Vec<String>,
        log: PathBuf,
    },
    #[error("kbuild step {step} succeeded but did not produce {path}")]
    NoOutput { step: Step, path: PathBuf },
}

/// What to build.
#[derive(Debug, Clone)]
pub struct Request {
    pub arch: Arch,
    pub config: ConfigSource,
    /// `None`: the cache directory from [`default_build_dir`].
    pub build_dir: Option<PathBuf>,
}

/// One built library object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltObject {
    /// The routine file's stem: `memset`, `clear_page_64`, ...
    pub name: String,
    pub path: PathBuf,
}

/// The result of [`build`].
#[derive(Debug, Clone)]
pub struct Output {
    pub build_dir: PathBuf,
    pub arch: Arch,
    /// Hex xxh3 of the configuration input (see [`config_hash`]).
    pub config_hash: String,
    pub objects: Vec<BuiltObject>,
    /// Each step and its wall time (`None`: up to date, make not run).
    pub timings: Vec<(Step, Option<Duration>)>,
    /// The build directory's lock, held as long as any clone of this
    /// output lives: one hypclear at a time builds in a directory and links
    /// from it (two at once raced: one removed the other's link files).
    pub lock: std::sync::Arc<fs::File>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Stamp {
    version: u32,
    tree: PathBuf,
    arch: Arch,
    config_hash: String,
    prepared: bool,
}

/// The hash identifying a configuration input: the arch, and `defconfig`
/// or the bytes of the .config file.
pub fn config_hash(arch: Arch, config: &ConfigSource) -> Result<String, KbuildError> {
    let mut input = format!("{arch}\0").into_bytes();
    match config {
        ConfigSource::Defconfig => input.extend_from_slice(b"defconfig"),
        ConfigSource::File(p) => {
            input.extend_from_slice(b"file\0");
            input.extend(fs::read(p).map_err(|source| KbuildError::Config {
                path: p.clone(),
                source,
            })?);
        }
    }
    Ok(format!("{:016x}", twox_hash::XxHash3_64::oneshot(&input)))
}

/// `$XDG_CACHE_HOME/hypclear/kbuild/<key>` (or `~/.cache/...`), the key
/// from the canonical tree path and the config hash.
pub(crate) fn default_build_dir(
    tree: &KernelTree,
    arch: Arch,
    config_hash: &str,
) -> Result<PathBuf, KbuildError> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })
        .ok_or(KbuildError::NoCacheDir)?;
    let key_input = format!("{}\0{arch}\0{config_hash}", tree.root().display());
    let key = twox_hash::XxHash3_64::oneshot(key_input.as_bytes());
    let leaf = tree
        .root()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "tree".into());
    Ok(base
        .join("hypclear/kbuild")
        .join(format!("{leaf}-{arch}-{key:016x}")))
}

/// The kbuild targets (relative to the build dir) for `arch`, with the
/// routine name of each.
pub(crate) fn object_targets(
    tree: &KernelTree,
    arch: Arch,
) -> Result<Vec<(String, String)>, KbuildError> {
    Ok(match arch {
        Arch::X86_64 => ["memset_64", "memcpy_64", "clear_page_64", "copy_page_64"]
            .iter()
            .map(|n| (n.to_string(), format!("arch/x86/lib/{n}.o")))
            .collect(),
        // Exactly what the nVHE hyp links: its Makefile's lib-objs, built
        // by the nvhe directory's rules (-D__KVM_NVHE_HYPERVISOR__) as
        // `.nvhe.o` next to the normal objects.
        Arch::Aarch64 => tree
            .nvhe_lib_objects()?
            .iter()
            .map(|o| {
                let stem = o.trim_end_matches(".o").to_string();
                let target = format!("arch/arm64/kvm/hyp/nvhe/../../../lib/{stem}.nvhe.o");
                (stem, target)
            })
            .collect(),
    })
}

/// `make` arguments shared by every step.
/// hypclear's shim around an inline clear_page (x86 7.x), an external
/// module directory inside the build directory, and its object.
const SHIM_DIR: &str = "hypclear-shim";
const SHIM_OBJECT: &str = "clear_pages.o";

/// The shim directory `tree` needs for `arch` under `dir`, its sources
/// written (only when they differ, so an unchanged shim is not rebuilt);
/// `None` where the tree's clear_page is an object of its own.
fn shim_dir(tree: &KernelTree, arch: Arch, dir: &Path) -> Result<Option<PathBuf>, KbuildError> {
    if arch != Arch::X86_64 || tree.link_config(arch)?.clear_page != ClearPageShape::Inline {
        return Ok(None);
    }
    let shim = dir.join(SHIM_DIR);
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| KbuildError::BuildDir { path, source }
    };
    fs::create_dir_all(&shim).map_err(err(&shim))?;
    for (name, text) in guest_src::X86_INLINE_CLEAR_PAGES {
        let p = shim.join(name);
        if fs::read(&p).ok().as_deref() != Some(text.as_bytes()) {
            fs::write(&p, text).map_err(err(&p))?;
        }
    }
    Ok(Some(shim))
}

fn make_base(tree: &KernelTree, arch: Arch, out: &Path, in_tree: bool) -> Command {
    let mut cmd = Command::new("make");
    cmd.arg("-C").arg(tree.root());
    if !in_tree {
        cmd.arg(format!("O={}", out.display()));
    }
    if Some(arch) != Arch::host() || arch == Arch::Aarch64 {
        cmd.arg(format!("ARCH={}", arch.kernel_name()));
    }
    if Some(arch) != Arch::host() && arch == Arch::Aarch64 {
        cmd.arg("CROSS_COMPILE=aarch64-linux-gnu-");
    } else if Some(arch) != Arch::host() && arch == Arch::X86_64 {
        cmd.arg("CROSS_COMPILE=x86_64-linux-gnu-");
    }
    cmd
}

fn cross_prefix(arch: Arch) -> &'static str {
    match (Arch::host(), arch) {
        (Some(h), a) if h == a => "",
        (_, Arch::Aarch64) => "aarch64-linux-gnu-",
        (_, Arch::X86_64) => "x86_64-linux-gnu-",
    }
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

/// Check every tool kbuild will need before running make, naming the
/// Debian package of what is missing.
pub(crate) fn check_tools(tree: &KernelTree, arch: Arch) -> Result<(), KbuildError> {
    let prefix = cross_prefix(arch);
    let cross_pkg = match arch {
        Arch::Aarch64 => "gcc-aarch64-linux-gnu",
        Arch::X86_64 => "gcc-x86-64-linux-gnu",
    };
    let mut needed: Vec<(String, &'static str)> = vec![
        ("make".into(), "make"),
        ("gcc".into(), "gcc"),
        ("bison".into(), "bison"),
        ("flex".into(), "flex"),
        ("bc".into(), "bc"),
    ];
    if prefix.is_empty() {
        needed.push(("as".into(), "binutils"));
    } else {
        needed.push((format!("{prefix}gcc"), cross_pkg));
        needed.push((
            format!("{prefix}as"),
            if arch == Arch::Aarch64 {
                "binutils-aarch64-linux-gnu"
            } else {
                "binutils-x86-64-linux-gnu"
            },
        ));
    }
    for (tool, package) in needed {
        if !on_path(&tool) {
            return Err(KbuildError::MissingTool {
                why: "not found on PATH".into(),
                tool,
                package,
            });
        }
    }
    let libelf = ["/usr/include/libelf.h", "/usr/include/gelf.h"]
        .iter()
        .all(|p| Path::new(p).is_file());
    if !libelf {
        return Err(KbuildError::MissingTool {
            tool: "libelf headers".into(),
            package: "libelf-dev",
            why: "/usr/include/gelf.h not found (objtool and resolve_btfids need it)".into(),
        });
    }
    if arch == Arch::Aarch64 {
        check_mops(tree, &format!("{prefix}as"))?;
    }
    Ok(())
}

/// If a hyp library source uses MOPS, the assembler must know it.
fn check_mops(tree: &KernelTree, assembler: &str) -> Result<(), KbuildError> {
    let lib = tree.root().join("arch/arm64/lib");
    let mut user = None;
    for o in tree.nvhe_lib_objects()? {
        let src = lib.join(o.replace(".o", ".S"));
        if let Ok(text) = fs::read_to_string(&src)
            && text.lines().any(|l| {
                let l = l.trim_start();
                ["setp", "setpn", "setpt", "cpyp", "cpyfp"]
                    .iter()
                    .any(|m| l.starts_with(&format!("{m}\t")) || l.starts_with(&format!("{m} ")))
            })
        {
            user = Some(src);
            break;
        }
    }
    let Some(file) = user else { return Ok(()) };
    let probe = "setp [x0]!, x1!, x2\nsetm [x0]!, x1!, x2\nsete [x0]!, x1!, x2\n";
    let ok = Command::new(assembler)
        .args(["-march=armv8.8-a", "-o", "/dev/null", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            if let Some(mut si) = c.stdin.take() {
                si.write_all(probe.as_bytes())?;
            }
            c.wait()
        })
        .is_ok_and(|s| s.success());
    if ok {
        Ok(())
    } else {
        Err(KbuildError::NoMops {
            assembler: assembler.to_string(),
            file: file.display().to_string(),
        })
    }
}

/// Run one make step with output to `log`; on failure return the tail.
fn run_step(step: Step, mut cmd: Command, log: &Path) -> Result<(), KbuildError> {
    let describe = format!("{cmd:?}").replace('"', "");
    let file = fs::File::create(log).map_err(|source| KbuildError::BuildDir {
        path: log.to_path_buf(),
        source,
    })?;
    let err = file.try_clone().map_err(|source| KbuildError::BuildDir {
        path: log.to_path_buf(),
        source,
    })?;
    let status = cmd
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .status()
        .map_err(|e| KbuildError::MissingTool {
            tool: "make".into(),
            package: "make",
            why: e.to_string(),
        })?;
    if status.success() {
        return Ok(());
    }
    let text = fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(TAIL_LINES)..]
        .iter()
        .map(|s| s.to_string())
        .collect();
    Err(KbuildError::Make {
        step,
        command: describe,
        status: status.to_string(),
        tail,
        log: log.to_path_buf(),
    })
}

fn mtime(p: &Path) -> Option<SystemTime> {
    fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// The dependency files kbuild recorded for `object` in its `.cmd` file
/// (`source_X := ...`, `deps_X := ...` continuation list), resolved
/// against the tree and the build dir.
pub(crate) fn recorded_deps(object: &Path, srctree: &Path, objtree: &Path) -> Option<Vec<PathBuf>> {
    let name = object.file_name()?.to_string_lossy().into_owned();
    let cmd = object.with_file_name(format!(".{name}.cmd"));
    let text = fs::read_to_string(cmd).ok()?;
    let mut deps = Vec::new();
    let mut in_deps = false;
    for line in text.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("source_").and_then(|r| r.split_once(":=")) {
            deps.push(rest.1.trim().to_string());
            continue;
        }
        if t.starts_with("deps_") {
            in_deps = true;
            continue;
        }
        if in_deps {
            let w = t.trim_end_matches('\\').trim();
            if !w.is_empty() && !w.starts_with("$(") {
                deps.push(w.to_string());
            }
            if !t.ends_with('\\') {
                in_deps = false;
            }
        }
    }
    if deps.is_empty() {
        return None;
    }
    Some(
        deps.into_iter()
            .map(|d| {
                let p = PathBuf::from(&d);
                // Relative to the output tree, the external module's
                // directory (the 7.x shim's `make M=`), or the source tree.
                let own_dir = object.parent().map(|d| d.join(&p));
                if p.is_absolute() {
                    p
                } else if objtree.join(&p).exists() {
                    objtree.join(p)
                } else if let Some(own) = own_dir.filter(|o| o.exists()) {
                    own
                } else {
                    srctree.join(p)
                }
            })
            .collect(),
    )
}

/// Whether `object` exists and is newer than every dependency kbuild
/// recorded for it (what make would conclude, without running make).
fn up_to_date(object: &Path, srctree: &Path, objtree: &Path) -> bool {
    let Some(obj_time) = mtime(object) else {
        return false;
    };
    let Some(deps) = recorded_deps(object, srctree, objtree) else {
        return false;
    };
    deps.iter().all(|d| mtime(d).is_some_and(|t| t <= obj_time))
}

fn read_stamp(dir: &Path) -> Option<Stamp> {
    let text = fs::read_to_string(dir.join(STAMP_FILE)).ok()?;
    serde_json::from_str(&text).ok()
}

fn write_stamp(dir: &Path, stamp: &Stamp) -> Result<(), KbuildError> {
    let path = dir.join(STAMP_FILE);
    let text = serde_json::to_string_pretty(stamp).unwrap_or_default();
    fs::write(&path, text).map_err(|source| KbuildError::BuildDir { path, source })
}

/// Configure, prepare and build the library objects, skipping what the
/// stamp and kbuild's dependency records say is current. `progress` is
/// called when a step starts and when it ends.
pub fn build(
    tree: &KernelTree,
    req: &Request,
    mut progress: impl FnMut(Step, StepEvent),
) -> Result<Output, KbuildError> {
    let arch = req.arch;
    check_tools(tree, arch)?;
    let hash = config_hash(arch, &req.config)?;
    let dir = build_dir(tree, req, &hash)?;
    let lock = lock_dir(&dir, &mut progress)?;
    let in_tree = dir == tree.root();
    if !in_tree {
        check_clean(tree)?;
    }
    let mut stamp = current_stamp(tree, arch, &dir, &hash);
    let fresh_config = !dir.join(".config").is_file() || read_stamp(&dir).as_ref() != Some(&stamp);
    let mut steps = Steps {
        tree,
        arch,
        dir: &dir,
        in_tree,
        progress: &mut progress,
        timings: Vec::new(),
    };
    // 1. configuration
    if fresh_config {
        steps.configure(&req.config, &mut stamp)?;
    } else {
        steps.up_to_date(Step::Config);
    }
    // 2. prepare, 3. the objects
    let targets = object_targets(tree, arch)?;
    let shim = shim_dir(tree, arch, &dir)?;
    let objects = built_objects(&dir, &targets, shim.as_deref());
    let all_current = objects
        .iter()
        .all(|o| up_to_date(&o.path, tree.root(), &dir));
    if stamp.prepared && all_current {
        steps.up_to_date(Step::Prepare);
        steps.up_to_date(Step::Objects);
    } else {
        steps.prepare(&mut stamp)?;
        steps.objects(&targets, shim.as_deref())?;
    }
    let timings = steps.timings;
    check_built(&objects)?;
    Ok(Output {
        build_dir: dir,
        arch,
        config_hash: hash,
        objects,
        timings,
        lock,
    })
}

/// An out-of-tree build needs a tree without a configuration of its own.
fn check_clean(tree: &KernelTree) -> Result<(), KbuildError> {
    if tree.root().join(".config").exists() || tree.root().join("include/config").exists() {
        return Err(KbuildError::TreeNotClean(tree.root().to_path_buf()));
    }
    Ok(())
}

/// The objects a build in `dir` makes: the `targets` (name, object path
/// in `dir`), then the shim's object when there is a `shim` directory.
fn built_objects(
    dir: &Path,
    targets: &[(String, String)],
    shim: Option<&Path>,
) -> Vec<BuiltObject> {
    let mut objects: Vec<BuiltObject> = targets
        .iter()
        .map(|(name, t)| BuiltObject {
            name: name.clone(),
            path: dir.join(t),
        })
        .collect();
    if let Some(shim) = shim {
        objects.push(BuiltObject {
            name: "clear_pages_inline".into(),
            path: shim.join(SHIM_OBJECT),
        });
    }
    objects
}

/// Every object the build was to make exists.
fn check_built(objects: &[BuiltObject]) -> Result<(), KbuildError> {
    if let Some(o) = objects.iter().find(|o| !o.path.is_file()) {
        return Err(KbuildError::NoOutput {
            step: Step::Objects,
            path: o.path.clone(),
        });
    }
    Ok(())
}

/// The build directory (`--build-dir` or the default for the tree, arch
/// and configuration), created and canonical.
fn build_dir(tree: &KernelTree, req: &Request, hash: &str) -> Result<PathBuf, KbuildError> {
    let dir = match &req.build_dir {
        Some(d) => d.clone(),
        None => default_build_dir(tree, req.arch, hash)?,
    };
    fs::create_dir_all(&dir).map_err(|source| KbuildError::BuildDir {
        path: dir.clone(),
        source,
    })?;
    dir.canonicalize().map_err(|source| KbuildError::BuildDir {
        path: dir.clone(),
        source,
    })
}

/// The directory's stamp if it is of this tree, arch and configuration
/// (and the directory has a .config), else a fresh unprepared one.
fn current_stamp(tree: &KernelTree, arch: Arch, dir: &Path, hash: &str) -> Stamp {
    read_stamp(dir)
        .filter(|s| {
            s.version == STAMP_VERSION
                && s.tree == tree.root()
                && s.arch == arch
                && s.config_hash == hash
        })
        .filter(|_| dir.join(".config").is_file())
        .unwrap_or(Stamp {
            version: STAMP_VERSION,
            tree: tree.root().to_path_buf(),
            arch,
            config_hash: hash.to_string(),
            prepared: false,
        })
}

/// The numbered kbuild steps of one build, each timed and reported.
struct Steps<'a, P: FnMut(Step, StepEvent)> {
    tree: &'a KernelTree,
    arch: Arch,
    dir: &'a Path,
    in_tree: bool,
    progress: &'a mut P,
    timings: Vec<(Step, Option<Duration>)>,
}

impl<P: FnMut(Step, StepEvent)> Steps<'_, P> {
    fn make(&self) -> Command {
        make_base(self.tree, self.arch, self.dir, self.in_tree)
    }

    fn up_to_date(&mut self, step: Step) {
        self.timings.push((step, None));
        (self.progress)(step, StepEvent::UpToDate);
    }

    /// Run `body` as `step`: started, timed, done.
    fn timed(
        &mut self,
        step: Step,
        body: impl FnOnce(&Self) -> Result<(), KbuildError>,
    ) -> Result<(), KbuildError> {
        (self.progress)(step, StepEvent::Started);
        let t = Instant::now();
        body(self)?;
        let e = t.elapsed();
        self.timings.push((step, Some(e)));
        (self.progress)(step, StepEvent::Done(e));
        Ok(())
    }

    /// 1. `defconfig`, or the given .config and `olddefconfig`.
    fn configure(&mut self, config: &ConfigSource, stamp: &mut Stamp) -> Result<(), KbuildError> {
        self.timed(Step::Config, |s| {
            stamp.prepared = false;
            write_stamp(s.dir, stamp)?;
            let mut cmd = s.make();
            match config {
                ConfigSource::Defconfig => {
                    cmd.arg("defconfig");
                }
                ConfigSource::File(p) => {
                    if !s.in_tree || p.canonicalize().ok() != Some(s.dir.join(".config")) {
                        fs::copy(p, s.dir.join(".config")).map_err(|source| {
                            KbuildError::Config {
                                path: p.clone(),
                                source,
                            }
                        })?;
                    }
                    cmd.arg("olddefconfig");
                }
            }
            run_step(Step::Config, cmd, &s.dir.join("hypclear-config.log"))
        })
    }

    /// 2. `make prepare`, then the stamp says so.
    fn prepare(&mut self, stamp: &mut Stamp) -> Result<(), KbuildError> {
        self.timed(Step::Prepare, |s| {
            let mut cmd = s.make();
            cmd.args(["-j1", "prepare"]);
            run_step(Step::Prepare, cmd, &s.dir.join("hypclear-prepare.log"))?;
            stamp.prepared = true;
            write_stamp(s.dir, stamp)
        })
    }

    /// Step 3: the objects, single targets, -j1; then the shim's, as an
    /// external module object (`M=`).
    fn objects(
        &mut self,
        targets: &[(String, String)],
        shim: Option<&Path>,
    ) -> Result<(), KbuildError> {
        self.timed(Step::Objects, |s| {
            if s.arch == Arch::Aarch64 {
                // The `..` in the nvhe targets is resolved by the file system.
                let nvhe = s.dir.join("arch/arm64/kvm/hyp/nvhe");
                fs::create_dir_all(&nvhe)
                    .map_err(|source| KbuildError::BuildDir { path: nvhe, source })?;
            }
            let mut cmd = s.make();
            cmd.arg("-j1").args(targets.iter().map(|(_, t)| t));
            run_step(Step::Objects, cmd, &s.dir.join("hypclear-objects.log"))?;
            let Some(shim) = shim else { return Ok(()) };
            let mut cmd = s.make();
            cmd.arg("-j1")
                .arg(format!("M={}", shim.display()))
                .arg(SHIM_OBJECT);
            run_step(Step::Objects, cmd, &s.dir.join("hypclear-shim.log"))
        })
    }
}

/// Take the exclusive lock of build directory `dir` (`.hypclear.lock` in
/// it; released when the last holder drops it, or the process ends),
/// saying so when another hypclear holds it. Within one process the lock
/// is shared: a second build of the same directory while an earlier
/// output is alive gets the same lock (an flock held twice by one
/// process would wait for itself).
fn lock_dir(
    dir: &Path,
    progress: &mut impl FnMut(Step, StepEvent),
) -> Result<std::sync::Arc<fs::File>, KbuildError> {
    use std::sync::{Arc, Mutex, OnceLock, Weak};
    /// The build-directory locks this process holds: (lock file, lock).
    type Held = Mutex<Vec<(PathBuf, Weak<fs::File>)>>;
    static HELD: OnceLock<Held> = OnceLock::new();
    let path = dir.join(".hypclear.lock");
    let err = |source| KbuildError::BuildDir {
        path: path.clone(),
        source,
    };
    // Poisoning only means another thread panicked while holding the list;
    // the list itself stays valid.
    let mut held = HELD
        .get_or_init(|| Mutex::new(Vec::new()))
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    held.retain(|(_, w)| w.strong_count() > 0);
    if let Some(f) = held
        .iter()
        .find(|(p, _)| p == &path)
        .and_then(|(_, w)| w.upgrade())
    {
        return Ok(f);
    }
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(err)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            progress(Step::Lock, StepEvent::Started);
            let t = Instant::now();
            file.lock().map_err(err)?;
            progress(Step::Lock, StepEvent::Done(t.elapsed()));
        }
        Err(fs::TryLockError::Error(e)) => return Err(err(e)),
    }
    let file = Arc::new(file);
    held.push((path.clone(), Arc::downgrade(&file)));
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 25 case 11: a garbage --kernel-config was accepted silently,
    /// a missing one named no fix.
    #[test]
    fn a_kernel_config_is_checked_before_the_build() {
        let d = std::env::temp_dir().join(format!("hypclear-kconfig-{}", std::process::id()));
        fs::create_dir_all(&d).unwrap();
        let good = d.join("good");
        fs::write(
            &good,
            "#\n# comment\nCONFIG_A=y\n# CONFIG_B is not set\n\nCONFIG_C=\"x\"\n",
        )
        .unwrap();
        assert!(ConfigSource::File(good).check().is_ok());
        let bad = d.join("bad");
        fs::write(&bad, "CONFIG_A=y\n\x7fELF garbage\n").unwrap();
        let m = ConfigSource::File(bad).check().unwrap_err().to_string();
        assert!(m.contains("line 2") && m.contains("defconfig"), "{m}");
        let m = ConfigSource::File(d.join("nope"))
            .check()
            .unwrap_err()
            .to_string();
        assert!(
            m.contains("--kernel-config") && m.contains("defconfig"),
            "{m}"
        );
        assert!(ConfigSource::Defconfig.check().is_ok());
        fs::remove_dir_all(&d).unwrap();
    }

    /// One process may hold a build directory's lock twice (shared), and
    /// takes it again once every holder is gone; no wait either time.
    #[test]
    fn the_build_dir_lock_is_shared_within_a_process() {
        let dir = std::env::temp_dir().join(format!("hypclear-lock-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let mut waited = false;
        let mut note = |s: Step, _: StepEvent| waited |= s == Step::Lock;
        let a = lock_dir(&dir, &mut note).unwrap();
        let b = lock_dir(&dir, &mut note).unwrap();
        assert!(std::sync::Arc::ptr_eq(&a, &b));
        drop((a, b));
        let c = lock_dir(&dir, &mut note).unwrap();
        drop(c);
        assert!(!waited);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn config_hash_depends_on_arch_and_contents() {
        let d = std::env::temp_dir().join(format!("hypclear-kb-{}", std::process::id()));
        fs::create_dir_all(&d).unwrap();
        let f = d.join("cfg");
        fs::write(&f, "CONFIG_A=y\n").unwrap();
        let a = config_hash(Arch::X86_64, &ConfigSource::File(f.clone())).unwrap();
        let b = config_hash(Arch::Aarch64, &ConfigSource::File(f.clone())).unwrap();
        let c = config_hash(Arch::X86_64, &ConfigSource::Defconfig).unwrap();
        assert_ne!(a, b);
        assert_ne!(a, c);
        fs::write(&f, "CONFIG_A=n\n").unwrap();
        assert_ne!(
            a,
            config_hash(Arch::X86_64, &ConfigSource::File(f.clone())).unwrap()
        );
        assert!(matches!(
            config_hash(Arch::X86_64, &ConfigSource::File(d.join("nope"))),
            Err(KbuildError::Config { .. })
        ));
        assert_eq!(ConfigSource::parse("defconfig"), ConfigSource::Defconfig);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn recorded_deps_and_freshness() {
        let d = std::env::temp_dir().join(format!("hypclear-kbdeps-{}", std::process::id()));
        let src = d.join("src");
        let obj = d.join("obj");
        fs::create_dir_all(src.join("lib")).unwrap();
        fs::create_dir_all(obj.join("lib")).unwrap();
        fs::write(src.join("lib/memset.S"), "x").unwrap();
        fs::write(src.join("lib/h.h"), "x").unwrap();
        fs::write(obj.join("lib/gen.h"), "x").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        fs::write(obj.join("lib/memset.o"), "o").unwrap();
        fs::write(
            obj.join("lib/.memset.o.cmd"),
            "savedcmd_lib/memset.o := gcc ...\n\nsource_lib/memset.o := lib/memset.S\n\n\
             deps_lib/memset.o := \\\n  lib/h.h \\\n    $(wildcard include/config/X) \\\n  lib/gen.h \\\n\n\
             lib/memset.o: $(deps_lib/memset.o)\n",
        )
        .unwrap();
        let deps = recorded_deps(&obj.join("lib/memset.o"), &src, &obj).unwrap();
        assert_eq!(
            deps,
            [
                src.join("lib/memset.S"),
                src.join("lib/h.h"),
                obj.join("lib/gen.h")
            ]
        );
        assert!(up_to_date(&obj.join("lib/memset.o"), &src, &obj));
        std::thread::sleep(Duration::from_millis(20));
        fs::write(src.join("lib/h.h"), "y").unwrap();
        assert!(!up_to_date(&obj.join("lib/memset.o"), &src, &obj));
        assert!(!up_to_date(&obj.join("lib/missing.o"), &src, &obj));
        // `make M=shim`: the module's source is named relative to its own
        // directory, not to either tree.
        let m = obj.join("shim");
        fs::create_dir_all(&m).unwrap();
        fs::write(m.join("c.c"), "x").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        fs::write(m.join("c.o"), "o").unwrap();
        fs::write(
            m.join(".c.o.cmd"),
            "source_c.o := c.c\n\ndeps_c.o := \\\n  lib/gen.h\n",
        )
        .unwrap();
        assert_eq!(
            recorded_deps(&m.join("c.o"), &src, &obj).unwrap(),
            [m.join("c.c"), obj.join("lib/gen.h")]
        );
        assert!(up_to_date(&m.join("c.o"), &src, &obj));
        fs::remove_dir_all(&d).unwrap();
    }
}
