//! Where a VM's blob comes from: one of the built-in link configurations,
//! or a kernel blob (`--kernel-tree` / `--blob`). A [`Side`] is an explicit
//! value handed down from the command (the `Ctx`, a bench `Plan`), so one
//! process can run several sides, e.g. a bench interleaving the built-ins
//! with two kernel trees session by session.
use crate::arch::VariantDef;
use crate::error::Result;
use hypclear_vmm::blob::{Blob, LinkConfig};
use std::collections::BTreeSet;
use std::sync::Arc;

/// A blob that is not one of the built-ins: a kernel tree's routines,
/// built, loaded and with its alternatives applied.
#[derive(Debug)]
pub struct External {
    pub blob: Blob,
    /// Built from a tree or read from a blob file.
    pub source: Source,
    /// The routine variants it offers.
    pub variants: &'static [VariantDef],
    /// For reports: the tree's identity, link configuration, alternatives.
    pub report: serde_json::Value,
    /// One line per routine: which path it takes.
    pub paths: Vec<String>,
    /// Label, e.g. `kernel 6.12.57 (/src/linux)`.
    pub label: String,
    /// Short name for table columns, e.g. `linux-source-6.12`; unique
    /// among the sides of one command.
    pub short: String,
    /// `make kernelversion` of the tree.
    pub kernelversion: String,
    /// The features its alternatives were decided with (`--alternatives`).
    pub features: BTreeSet<String>,
    /// What its alternative sites did in this load (which path each took).
    pub applied: Vec<crate::alternatives::Applied>,
    /// x86 6.x: the tree's C choice among its clear_page routines.
    pub clear_page_choice: Option<crate::tree::CallChoice>,
    pub arch: crate::tree::Arch,
    /// Where its clear_page came from (x86 6.x routines or 7.x's inline).
    pub clear_page: crate::tree::ClearPageShape,
    /// The blob file (to load it again with other alternatives).
    pub file: std::path::PathBuf,
    /// The alternatives paths this load verifies (`None`: one
    /// `--alternatives` decision for every routine).
    pub load: Option<crate::paths::Load>,
}

/// Where an [`External`] blob came from; the kernel report's `source`
/// spells it as [`SideKind`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Built from a kernel tree (`--kernel-tree`).
    KernelTree,
    /// A blob file (`--blob`).
    Blob,
}

impl From<Source> for SideKind {
    fn from(s: Source) -> SideKind {
        match s {
            Source::KernelTree => SideKind::KernelTree,
            Source::Blob => SideKind::Blob,
        }
    }
}

/// What kind of blob source a side is; the JSON spells it `builtin`,
/// `kernel-tree` or `blob` (a bench file's `sides[].kind`, a kernel
/// report's `source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SideKind {
    /// hypclear's own routines.
    Builtin,
    /// Built from a kernel tree (`--kernel-tree`).
    KernelTree,
    /// A blob file (`--blob`).
    Blob,
}

/// One blob source of a command.
#[derive(Debug, Clone)]
pub enum Side {
    /// hypclear's own routines, linked in one configuration.
    Builtin(LinkConfig),
    /// A kernel tree's own routines.
    Kernel(Arc<External>),
}

impl From<LinkConfig> for Side {
    fn from(c: LinkConfig) -> Side {
        Side::Builtin(c)
    }
}

impl Side {
    /// The link configuration (a kernel blob's is detected from its tree).
    pub fn config(&self) -> LinkConfig {
        match self {
            Side::Builtin(c) => *c,
            Side::Kernel(e) => e.blob.config,
        }
    }

    /// The blob a VM of this side loads.
    pub fn blob(&self) -> Result<Blob> {
        match self {
            Side::Builtin(c) => Blob::get(*c),
            Side::Kernel(e) => Ok(e.blob.clone()),
        }
    }

    /// The variant table of this side's blob.
    pub fn variant_table(&self) -> &'static [VariantDef] {
        match self {
            Side::Builtin(_) => crate::arch::VARIANTS,
            Side::Kernel(e) => e.variants,
        }
    }

    pub fn external(&self) -> Option<&External> {
        match self {
            Side::Builtin(_) => None,
            Side::Kernel(e) => Some(e),
        }
    }

    pub fn is_builtin(&self) -> bool {
        matches!(self, Side::Builtin(_))
    }

    /// Short name for tables: `vanilla`, `memset`, or the kernel side's
    /// short name.
    pub fn name(&self) -> String {
        match self {
            Side::Builtin(c) => c.name().to_string(),
            Side::Kernel(e) => e.short.clone(),
        }
    }

    /// What the side is, in one line: `built-in vanilla`, `kernel 6.12.57 (/src/linux)`.
    pub fn describe(&self) -> String {
        match self {
            Side::Builtin(c) => format!("built-in {c}"),
            Side::Kernel(e) => e.label.clone(),
        }
    }

    /// Built-in, kernel tree or blob file.
    pub fn kind(&self) -> SideKind {
        match self {
            Side::Builtin(_) => SideKind::Builtin,
            Side::Kernel(e) => e.source.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    /// The JSON spelling files already hold: `builtin`, `kernel-tree`, `blob`.
    #[test]
    fn side_kind_keeps_its_json_names() {
        for (k, name) in [
            (SideKind::Builtin, "builtin"),
            (SideKind::KernelTree, "kernel-tree"),
            (SideKind::Blob, "blob"),
        ] {
            assert_eq!(serde_json::to_value(k).unwrap(), serde_json::json!(name));
            assert_eq!(SideKind::deserialize(&serde_json::json!(name)).unwrap(), k);
        }
        assert!(SideKind::deserialize(&serde_json::json!("tree")).is_err());
        assert_eq!(SideKind::from(Source::KernelTree), SideKind::KernelTree);
        assert_eq!(SideKind::from(Source::Blob), SideKind::Blob);
    }
}
