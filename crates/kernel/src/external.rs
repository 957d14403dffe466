//! From loaded kernel blob files to a command's kernel sides: one
//! [`External`] per load ([`external`]), or one per alternatives path
//! ([`path_sides`]); and the built-in variant each of a side's kernel
//! paths follows ([`builtin_paths`]).
use crate::alternatives;
use crate::blob::{self as kblob, KernelBlobError, Loaded};
use crate::paths;
use crate::side::{External, Side, SideKind, Source};
use crate::text;
use crate::tree;
use hypclear_vmm::blob::{Blob, BlobBytes, LinkConfig};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Why a loaded blob cannot become a side.
#[derive(Debug, thiserror::Error)]
pub enum SideError {
    /// The file is a kernel blob this hypclear cannot run as it is (the
    /// message names it and what to do).
    #[error("{0}")]
    Unusable(String),
    #[error(transparent)]
    Blob(#[from] KernelBlobError),
}

/// Text from a kernel tree or blob file, safe for a terminal or a table.
pub fn clean(s: &str) -> String {
    text::sanitize_str(s).into_owned()
}

/// The side of one load of a blob file, named `short` in tables.
pub fn external(l: Loaded, source: Source, short: String) -> Result<External, SideError> {
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
    .map_err(|e| SideError::Unusable(format!("{}: {e}", l.path.display())))?;
    for (row, _) in &m.rows {
        if blob.alias_index(row).is_none() {
            return Err(SideError::Unusable(format!(
                "{}: the alias table has no row `{row}`; rebuild the blob with this hypclear",
                l.path.display()
            )));
        }
    }
    // A tree's path, version and the lines about its files are text we did
    // not write: made safe once, here, for every table and message after.
    let label = clean(&format!(
        "kernel {} ({})",
        m.tree.kernelversion,
        m.tree.path.display()
    ));
    Ok(External {
        blob,
        source,
        variants: crate::routines::variants(m.arch, m.clear_page),
        report: report(&l, source),
        paths: l.paths.iter().map(|p| clean(p)).collect(),
        label,
        short: clean(&short),
        kernelversion: clean(&m.tree.kernelversion),
        features: l.features,
        applied: l.applied,
        clear_page_choice: m.clear_page_choice.clone(),
        arch: m.arch,
        clear_page: m.clear_page,
        file: l.path,
        load: l.load,
    })
}

/// The JSON's `kernel` of a load: the tree's identity, its link
/// configuration and the alternatives it took.
fn report(l: &Loaded, source: Source) -> serde_json::Value {
    let m = &l.meta;
    json!({
        "source": SideKind::from(source),
        "file": l.path,
        "arch": m.arch,
        "tree": m.tree,
        "kernel_config": m.kernel_config,
        "config_hash": m.config_hash,
        "link_config": m.link_config,
        "link_reason": m.link_reason,
        "clear_page": m.clear_page,
        "cpu_setup": m.cpu_setup,
        "aliases": m.aliases,
        "alternatives": l.alternatives,
        "features_present": l.features,
        "applied": l.applied,
        "paths": l.paths,
        "alt_paths": l.load,
        "linked_by": m.hypclear,
    })
}

/// The loads of one kernel side's alternatives paths, the host's pick
/// first, each with the short name `short(load)`; `guest`: the features
/// the guest CPU has.
pub fn path_sides(
    e: &External,
    guest: &BTreeSet<String>,
    short: impl Fn(&paths::Load) -> String,
) -> Result<Vec<Side>, SideError> {
    let p = kblob::prepare(&e.file)?;
    let host = alternatives::host_features(p.img.machine);
    let names = p.names();
    let decisions = paths::Decisions {
        names: &names,
        host: &host,
        guest,
    };
    let all = paths::enumerate(&p.img, &decisions).map_err(KernelBlobError::from)?;
    // Only x86 6.x trees (vanilla, clear_page out of line) have the C choice.
    let clear_page_pick = e.clear_page_choice.as_ref().and_then(|c| {
        let (f, _) = c.pick(&host);
        crate::routines::clear_page_variant(f)
    });
    let always = paths::always(&names);
    let mut out = Vec::new();
    for load in paths::loads(&all, clear_page_pick) {
        let mut by_family: BTreeMap<crate::arch::Family, BTreeSet<String>> = BTreeMap::new();
        for path in &load.paths {
            by_family.insert(path.family, path.features.union(&always).cloned().collect());
        }
        let present = |routine: &str| {
            paths::family_of(routine)
                .and_then(|f| by_family.get(&f))
                .unwrap_or(&host)
        };
        let features = decided_features(&all, &load, &host);
        let l = p.apply("every path".into(), &present, &features, Some(load.clone()))?;
        out.push(Side::Kernel(Arc::new(external(l, e.source, short(&load))?)));
    }
    Ok(out)
}

/// The decision of a load as a whole, for the report and the built-in
/// equivalents: the host's features, with those the load's families
/// decide replaced by their paths'.
fn decided_features(
    all: &[paths::AltPath],
    load: &paths::Load,
    host: &BTreeSet<String>,
) -> BTreeSet<String> {
    let decided: BTreeSet<&String> = all
        .iter()
        .filter(|a| load.verifies(a.family).is_some())
        .flat_map(|a| &a.features)
        .collect();
    host.iter()
        .filter(|f| !decided.contains(f))
        .chain(load.paths.iter().flat_map(|a| &a.features))
        .cloned()
        .collect()
}

/// Per routine family, the built-in variant that follows the path a
/// kernel side's alternatives took (arm64 DC ZVA is decided inside the
/// routine on both sides alike): how a kernel row lines up with a
/// built-in one (bench's `sides[].kernel_paths`, run/verify's
/// `kernel_paths`).
pub fn builtin_paths(e: &External) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for fam in crate::routines::FAMILIES {
        let p = crate::picks::equivalent(
            e.arch,
            fam,
            &e.applied,
            e.clear_page_choice.as_ref(),
            &e.features,
        );
        if let crate::picks::Equivalent::Builtin { variant, .. } = p {
            out.insert(fam.to_string(), variant.to_string());
        }
    }
    out
}
