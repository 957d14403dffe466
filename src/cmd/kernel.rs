//! `--kernel-tree` / `--blob` on run, verify, bench and info (select the
//! kernel blob before anything else), and `hypclear blob`.
use crate::blob::{self, Blob, External, LinkConfig};
use crate::cli::{BlobArgs, Common};
use crate::error::{Error, Result};
use crate::kernel::blob::{self as kblob, AltChoice, Loaded, MakeRequest};
use crate::kernel::routines;
use crate::kernel::tree::{self, Arch};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

fn request(common: &Common, tree_path: &Path) -> MakeRequest {
    MakeRequest {
        tree: tree_path.to_path_buf(),
        arch: common.kernel.arch,
        config: common.kernel.kernel_config.clone(),
        build_dir: common.kernel.kernel_build_dir.clone(),
    }
}

fn progress(line: &str) {
    eprintln!("{line}");
}

/// `hypclear blob --kernel-tree PATH [--arch A] -o FILE`.
pub fn blob(common: &Common, args: &BlobArgs) -> Result<i32> {
    let Some(tree_path) = &common.kernel.kernel_tree else {
        return Err(Error::Usage(
            "hypclear blob needs --kernel-tree PATH (the kernel source tree to build)".into(),
        ));
    };
    let made = kblob::make(&request(common, tree_path), Some(&args.output), progress)?;
    let m = &made.meta;
    println!(
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

/// Build (for `--kernel-tree`) or read (`--blob`) the kernel blob, apply
/// its alternatives and select it for the whole command.
pub fn select(common: &Common) -> Result<()> {
    let k = &common.kernel;
    if let Some(a) = k.arch
        && Some(a) != Arch::host()
    {
        return Err(Error::Usage(format!(
            "--arch {a}: a kernel blob for another architecture cannot run here; build it with \
             `hypclear blob --arch {a} --kernel-tree TREE -o FILE` and run it with --blob on an {a} host"
        )));
    }
    let (file, source) = match (&k.kernel_tree, &k.blob) {
        (Some(t), _) => {
            let made = kblob::make(&request(common, t), None, progress)?;
            (made.file, "kernel-tree")
        }
        (None, Some(f)) => (f.clone(), "blob"),
        (None, None) => return Ok(()),
    };
    let choice = AltChoice::parse(&k.alternatives);
    let guest = if choice == AltChoice::Guest {
        kblob::guest_view(&crate::arch::cpu_caps(&crate::vmm::open_kvm()?))
    } else {
        Default::default()
    };
    let loaded = kblob::load(&file, &choice, &guest)?;
    let external = external(loaded, source)?;
    blob::select_external(external)
}

fn external(l: Loaded, source: &str) -> Result<External> {
    let m = &l.meta;
    let config = match m.link_config {
        tree::LinkConfig::Vanilla => LinkConfig::Vanilla,
        tree::LinkConfig::Memset => LinkConfig::Memset,
    };
    let image = Some(Arc::from(l.image.as_slice()));
    let blob = Blob::parse(config, Arc::from(l.elf.as_slice()), image)
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
    })
}

/// The lines every table shows for a kernel blob (empty for built-ins).
pub fn summary_lines() -> Vec<String> {
    let Some(e) = blob::external() else {
        return Vec::new();
    };
    let r = &e.report;
    let mut out = vec![format!(
        "{}: link configuration {} ({}); alternatives {}",
        e.label,
        e.blob.config,
        r["link_reason"].as_str().unwrap_or(""),
        r["alternatives"].as_str().unwrap_or("")
    )];
    out.extend(e.paths.iter().map(|p| format!("  {p}")));
    out
}
