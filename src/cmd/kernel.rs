//! `--kernel-tree` / `--blob` on run, verify, bench and info (select the
//! kernel blob before anything else), and `hypclear blob`.
use crate::blob::{Blob, BlobBytes, External, LinkConfig, Side};
use crate::cli::{BlobArgs, Common};
use crate::error::{Error, Result};
use crate::kernel::blob::{self as kblob, AltChoice, Loaded, MakeRequest};
use crate::kernel::routines;
use crate::kernel::tree::{self, Arch};
use serde_json::json;
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
pub fn blob(common: &Common, args: &BlobArgs) -> Result<i32> {
    let [tree_path] = common.kernel.kernel_tree.as_slice() else {
        return Err(Error::Usage(
            "hypclear blob needs one --kernel-tree PATH (the kernel source tree to build)".into(),
        ));
    };
    // Before the build: a path that cannot be written fails now, not after it.
    crate::report::precheck_output(&args.output)?;
    check_config(common)?;
    let made = kblob::make(&request(common, tree_path), Some(&args.output), progress)?;
    let m = &made.meta;
    crate::outln!(
        "wrote {}: {} kernel {} ({}), link configuration {} ({}), {} alias rows",
        made.file.display(),
        m.arch,
        m.tree.kernelversion,
        m.tree.path.display(),
        m.link_config,
        m.link_reason,
        m.rows.len()
    );
    Ok(0)
}

/// Build (each `--kernel-tree`) or read (each `--blob`) the kernel blobs
/// and apply their alternatives: the kernel sides of the command, trees
/// first, in the order given.
pub fn sides(common: &Common) -> Result<Vec<Side>> {
    let k = &common.kernel;
    if !k.is_set() {
        return Ok(Vec::new());
    }
    if let Some(a) = k.arch
        && Some(a) != Arch::host()
    {
        return Err(Error::Usage(format!(
            "--arch {a}: a kernel blob for another architecture cannot run here; build it with \
             `hypclear blob --arch {a} --kernel-tree TREE -o FILE` and run it with --blob on an {a} host"
        )));
    }
    if k.kernel_build_dir.is_some() && k.kernel_tree.len() > 1 {
        return Err(Error::Usage(
            "--kernel-build-dir names one build directory: with several --kernel-tree, leave it \
             out (each tree gets its own cache directory)"
                .into(),
        ));
    }
    check_config(common)?;
    let choice = AltChoice::parse(&k.alternatives);
    let guest = if choice == AltChoice::Guest {
        kblob::guest_view(&crate::arch::cpu_caps(&crate::vmm::open_kvm()?))
    } else {
        Default::default()
    };
    let mut files = Vec::new();
    for t in &k.kernel_tree {
        let made = kblob::make(&request(common, t), None, progress)?;
        files.push((made.file, "kernel-tree", t.clone()));
    }
    for f in &k.blob {
        files.push((f.clone(), "blob", f.clone()));
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
        out.push(Side::Kernel(Arc::new(external(loaded, source, short)?)));
    }
    Ok(out)
}

/// A kernel side's column name: the tree's directory name, or the blob
/// file's stem.
fn short_name(given: &Path, source: &str) -> String {
    let full = given.canonicalize().unwrap_or_else(|_| given.to_path_buf());
    let name = if source == "blob" {
        full.file_stem()
    } else {
        full.file_name()
    };
    name.map_or_else(
        || given.display().to_string(),
        |s| s.to_string_lossy().into_owned(),
    )
}

fn external(l: Loaded, source: &str, short: String) -> Result<External> {
    let m = &l.meta;
    let config = match m.link_config {
        tree::LinkConfig::Vanilla => LinkConfig::Vanilla,
        tree::LinkConfig::Memset => LinkConfig::Memset,
    };
    let image = Some(BlobBytes::Shared(Arc::from(l.image.as_slice())));
    let blob = Blob::parse(
        config,
        BlobBytes::Shared(Arc::from(l.elf.as_slice())),
        image,
    )
    .map_err(|e| Error::Usage(format!("{}: {e}", l.path.display())))?;
    for (row, _) in &m.rows {
        if blob.alias_index(row).is_none() {
            return Err(Error::Usage(format!(
                "{}: the alias table has no row `{row}`; rebuild the blob with this hypclear",
                l.path.display()
            )));
        }
    }
    let label = format!(
        "kernel {} ({})",
        m.tree.kernelversion,
        m.tree.path.display()
    );
    let report = json!({
        "source": source,
        "file": l.path,
        "arch": m.arch,
        "tree": m.tree,
        "kernel_config": m.kernel_config,
        "config_hash": m.config_hash,
        "link_config": m.link_config,
        "link_reason": m.link_reason,
        "aliases": m.aliases,
        "alternatives": l.alternatives,
        "features_present": l.features,
        "applied": l.applied,
        "paths": l.paths,
        "linked_by": m.hypclear,
    });
    Ok(External {
        blob,
        variants: routines::variants(m.arch),
        report,
        paths: l.paths,
        label,
        short,
        kernelversion: m.tree.kernelversion.clone(),
        features: l.features,
        arch: m.arch,
    })
}

/// The lines every table shows for the kernel sides (none for built-ins).
pub fn summary_lines(sides: &[Side]) -> Vec<String> {
    let mut out = Vec::new();
    for e in sides.iter().filter_map(Side::external) {
        let r = &e.report;
        out.push(format!(
            "{}: link configuration {} ({}); alternatives {}",
            e.label,
            e.blob.config,
            r["link_reason"].as_str().unwrap_or(""),
            r["alternatives"].as_str().unwrap_or("")
        ));
        out.extend(e.paths.iter().map(|p| format!("  {p}")));
    }
    out
}
