//! `--kernel-tree` / `--blob` on run, verify, bench and info (select the
//! kernel blob before anything else), and `hypclear blob`.
use crate::blob::LinkConfig;
use crate::cli::{BlobArgs, Common};
use crate::error::{Error, Result};
use crate::kernel::Side;
use crate::kernel::blob::{self as kblob, AltChoice, MakeRequest};
use crate::kernel::external::{self, clean};
use crate::kernel::paths;
use crate::kernel::picks;
use crate::kernel::side::Source;
use crate::kernel::tree::Arch;
use crate::routines::Routine;
use std::path::Path;
use std::sync::Arc;

/// `--kernel-config`, checked before anything is built (issue 25: garbage
/// was accepted silently).
fn check_config(common: &Common) -> Result<()> {
    if let Some(c) = &common.kernel.kernel_config {
        crate::kernel::kbuild::ConfigSource::parse(c)
            .check()
            .map_err(kblob::KernelBlobError::from)?;
    }
    Ok(())
}

fn request(common: &Common, tree_path: &Path) -> MakeRequest {
    MakeRequest {
        tree: tree_path.to_path_buf(),
        arch: common.kernel.arch,
        config: common.kernel.kernel_config.clone(),
        build_dir: common.kernel.kernel_build_dir.clone(),
    }
}

fn progress(line: &str) {
    crate::errln!("{line}");
}

/// `hypclear blob --kernel-tree PATH [--arch A] -o FILE`.
pub(super) fn blob(common: &Common, args: &BlobArgs) -> Result<i32> {
    let [tree_path] = common.kernel.kernel_tree.as_slice() else {
        return Err(Error::usage(
            "hypclear blob needs one --kernel-tree PATH (the kernel source tree to build)".into(),
        ));
    };
    // Before the build: a path that cannot be written fails now, not after it.
    crate::files::precheck_output(&args.output, crate::files::Precheck::Writable)?;
    check_config(common)?;
    let made = kblob::make(&request(common, tree_path), Some(&args.output), progress)?;
    let m = &made.meta;
    crate::outln!(
        "wrote {}: {} kernel {} ({}), link configuration {} ({}), {} alias rows",
        clean(&made.file.display().to_string()),
        m.arch,
        clean(&m.tree.kernelversion),
        clean(&m.tree.path.display().to_string()),
        m.link_config,
        m.link_reason,
        m.rows.len()
    );
    Ok(0)
}

/// Build (each `--kernel-tree`) or read (each `--blob`) the kernel blobs
/// and apply their alternatives: the kernel sides of the command, trees
/// first, in the order given.
pub(super) fn sides(common: &Common) -> Result<Vec<Side>> {
    let k = &common.kernel;
    if !k.is_set() {
        return Ok(Vec::new());
    }
    if let Some(a) = k.arch
        && Some(a) != Arch::host()
    {
        return Err(Error::usage(format!(
            "--arch {a}: a kernel blob for another architecture cannot run here; build it with \
             `hypclear blob --arch {a} --kernel-tree TREE -o FILE` and run it with --blob on an {a} host"
        )));
    }
    if k.kernel_build_dir.is_some() && k.kernel_tree.len() > 1 {
        return Err(Error::usage(
            "--kernel-build-dir names one build directory: with several --kernel-tree, leave it \
             out (each tree gets its own cache directory)"
                .into(),
        ));
    }
    check_config(common)?;
    let choice = AltChoice::parse(k.alternatives.as_deref().unwrap_or("host"));
    let guest = if choice == AltChoice::Guest {
        kblob::guest_cpu(&crate::arch::cpu_caps(&crate::vmm::open_kvm()?))
    } else {
        Default::default()
    };
    let mut files = Vec::new();
    for t in &k.kernel_tree {
        let made = kblob::make(&request(common, t), None, progress)?;
        files.push((made.file, Source::KernelTree, t.clone()));
    }
    for f in &k.blob {
        files.push((f.clone(), Source::Blob, f.clone()));
    }
    let mut out: Vec<Side> = Vec::new();
    let mut shorts: Vec<String> = Vec::new();
    for (file, source, given) in files {
        let loaded = kblob::load(&file, &choice, &guest)?;
        let mut short = short_name(&given, source);
        if shorts.contains(&short) {
            short = format!("{short}#{}", out.len() + 1);
        }
        shorts.push(short.clone());
        out.push(Side::Kernel(Arc::new(external::external(
            loaded, source, short,
        )?)));
    }
    Ok(out)
}

/// A kernel side's column name: the tree's directory name, or the blob
/// file's stem.
fn short_name(given: &Path, source: Source) -> String {
    let full = given.canonicalize().unwrap_or_else(|_| given.to_path_buf());
    let name = if source == Source::Blob {
        full.file_stem()
    } else {
        full.file_name()
    };
    name.map_or_else(
        || given.display().to_string(),
        |s| s.to_string_lossy().into_owned(),
    )
}

/// What one kernel side's tree would run on this guest's CPU.
#[derive(serde::Serialize)]
pub(super) struct TreePicks {
    /// `make kernelversion` and the side's short name.
    pub kernel: String,
    pub side: String,
    #[serde(skip)]
    pub config: LinkConfig,
    pub picks: Vec<picks::Pick>,
}

/// The picks of each kernel blob among `sides` (one per file), read from
/// its tree's code with the guest's features (see `picks::kernel_picks`).
pub(super) fn kernel_picks(sides: &[Side], caps: &crate::arch::CpuCaps) -> Result<Vec<TreePicks>> {
    let cpu = kblob::guest_cpu(caps);
    let mut seen: Vec<&Path> = Vec::new();
    let mut out = Vec::new();
    for e in sides.iter().filter_map(Side::external) {
        if seen.contains(&e.file.as_path()) {
            continue;
        }
        seen.push(&e.file);
        out.push(TreePicks {
            kernel: e.kernelversion.clone(),
            side: e.short.clone(),
            config: e.blob.config,
            picks: kblob::prepare(&e.file)?.kernel_picks(&cpu)?,
        });
    }
    Ok(out)
}

/// The lines every table shows for the kernel sides (none for built-ins).
/// The loads of one blob's alternatives paths share one header.
pub(super) fn summary_lines(sides: &[Side]) -> Vec<String> {
    let mut out = Vec::new();
    let mut headed: Vec<&Path> = Vec::new();
    for e in sides.iter().filter_map(Side::external) {
        if e.load.is_some() && headed.contains(&e.file.as_path()) {
            continue;
        }
        headed.push(&e.file);
        let r = &e.report;
        out.push(format!(
            "{}: link configuration {} ({}); alternatives {}",
            e.label,
            e.blob.config,
            r["link_reason"].as_str().unwrap_or(""),
            r["alternatives"].as_str().unwrap_or("")
        ));
        if e.load.is_none() {
            out.extend(e.paths.iter().map(|p| format!("  {p}")));
            continue;
        }
        out.extend(path_lines(sides, &e.file));
        // What is not an alternatives site (x86 clear_page's pick in C).
        out.extend(
            e.paths
                .iter()
                .filter(|p| p.starts_with("clear_page:"))
                .map(|p| format!("  {p}")),
        );
    }
    out
}

/// One line per alternatives path of the blob `file`'s loads.
fn path_lines(sides: &[Side], file: &Path) -> Vec<String> {
    let loads = sides
        .iter()
        .filter_map(Side::external)
        .filter(|e| e.file == file)
        .filter_map(|e| e.load.as_ref());
    let mut out = Vec::new();
    for p in loads.flat_map(|l| &l.paths).filter(|p| p.sites > 0) {
        let mut line = format!("  {}: {}", p.family, p.label);
        if p.host_pick {
            line.push_str(" [host pick]");
        }
        if let paths::Runnable::No { reason } = &p.runnable {
            line.push_str(&format!(" (SKIP: {reason})"));
        }
        out.push(line);
    }
    out
}

/// run/verify without an explicit `--alternatives`: each kernel side
/// becomes one side per load of its alternatives paths (see
/// [`paths::loads`]), so every path the kernel may take on some CPU is
/// verified, not only the one this host's kernel picked.
pub(super) fn every_path(common: &Common, sides: Vec<Side>) -> Result<Vec<Side>> {
    if common.kernel.alternatives.is_some() || sides.iter().all(Side::is_builtin) {
        return Ok(sides);
    }
    let guest = kblob::guest_view(&crate::arch::cpu_caps(&crate::vmm::open_kvm()?));
    let mut out = Vec::new();
    for side in sides {
        match side.external() {
            Some(e) => out.extend(external::path_sides(e, &guest, |_| e.short.clone())?),
            None => out.push(side),
        }
    }
    Ok(out)
}

/// `bench --every-path`: each kernel side becomes one side per path of
/// `routine`'s family the guest can run, named by its path
/// (`linux-source-6.12 (FSRS alternative)`), the host's pick first.
pub(super) fn bench_paths(
    common: &Common,
    sides: Vec<Side>,
    routine: Routine,
) -> Result<Vec<Side>> {
    if common.kernel.alternatives.is_some() || sides.iter().all(Side::is_builtin) {
        return Err(Error::usage(
            "--every-path times the alternatives paths of a kernel side: give --kernel-tree or \
             --blob, and no --alternatives (which names one path)"
                .into(),
        ));
    }
    let guest = kblob::guest_view(&crate::arch::cpu_caps(&crate::vmm::open_kvm()?));
    let mut out = Vec::new();
    for side in sides {
        let Some(e) = side.external() else {
            out.push(side);
            continue;
        };
        let fam = routine.family(e.blob.config);
        let name = |l: &paths::Load| match l.path_name(fam) {
            Some(p) => format!("{} ({p})", e.short),
            None => e.short.clone(),
        };
        let loads = external::path_sides(e, &guest, name)?;
        out.extend(loads.into_iter().filter(|s| {
            s.external()
                .and_then(|x| x.load.as_ref())
                .is_some_and(|l| l.verifies(fam).is_some() && l.runnable() == paths::Runnable::Yes)
        }));
    }
    Ok(out)
}
