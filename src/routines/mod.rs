//! The routines under test, their variants, and how a call to one becomes a
//! guest [`Command`] in each link configuration.
//!
//! In the `memset` configuration there is no clear_page routine at all: as in
//! "arm64: clear_page[s] using memset", `clear_page(addr)` is
//! `memset(addr, 0, PAGE_SIZE)` and `clear_pages(addr, n)` is
//! `memset(addr, 0, n * PAGE_SIZE)`, so the clear_page variants there are the
//! memset variants.
use crate::arch;
pub mod lower;

pub use lower::{Call, Lowered, command, lower};

use crate::blob::LinkConfig;
use crate::blob::abi;
use crate::error::{Error, Result};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
#[clap(rename_all = "snake_case")]
pub enum Routine {
    ClearPage,
    ClearPages,
    Memset,
    Memcpy,
    CopyPage,
}

impl Routine {
    pub const ALL: [Routine; 5] = [
        Routine::ClearPage,
        Routine::ClearPages,
        Routine::Memset,
        Routine::Memcpy,
        Routine::CopyPage,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Routine::ClearPage => "clear_page",
            Routine::ClearPages => "clear_pages",
            Routine::Memset => "memset",
            Routine::Memcpy => "memcpy",
            Routine::CopyPage => "copy_page",
        }
    }

    /// The family whose variant list applies (clear_pages shares clear_page's).
    pub(crate) fn family(self, config: LinkConfig) -> &'static str {
        match (self, config) {
            (Routine::ClearPage | Routine::ClearPages, LinkConfig::Memset) => "memset",
            (Routine::ClearPage | Routine::ClearPages, LinkConfig::Vanilla) => "clear_page",
            (r, _) => r.name(),
        }
    }

    /// Whether the routine writes zeroes, a fill byte, or copies a source.
    pub fn kind(self) -> Kind {
        match self {
            Routine::ClearPage | Routine::ClearPages => Kind::Zero,
            Routine::Memset => Kind::Fill,
            Routine::Memcpy | Routine::CopyPage => Kind::Copy,
        }
    }

    /// Sizes must be whole pages (clear_page, clear_pages, copy_page).
    pub fn page_granular(self) -> bool {
        matches!(
            self,
            Routine::ClearPage | Routine::ClearPages | Routine::CopyPage
        )
    }

    /// The fixed size of one call, if the routine has one.
    pub fn fixed_size(self) -> Option<u64> {
        match self {
            Routine::ClearPage | Routine::CopyPage => Some(abi::PAGE_SIZE),
            _ => None,
        }
    }
}

impl std::fmt::Display for Routine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Zero,
    Fill,
    Copy,
}

/// A variant of a routine family (the per-architecture table is
/// `arch::VARIANTS`).
pub use crate::arch::VariantDef;

/// Variant names of `routine` in link configuration `config`.
pub fn variants(routine: Routine, config: LinkConfig) -> Vec<&'static VariantDef> {
    let fam = routine.family(config);
    arch::VARIANTS.iter().filter(|v| v.family == fam).collect()
}

pub fn find_variant(
    routine: Routine,
    config: LinkConfig,
    name: &str,
) -> Result<&'static VariantDef> {
    let vs = variants(routine, config);
    vs.iter().copied().find(|v| v.name == name).ok_or_else(|| {
        Error::Usage(format!(
            "unknown variant `{name}` for {routine} in the {config} configuration; choose one of: {}",
            vs.iter().map(|v| v.name).collect::<Vec<_>>().join(", ")
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blob::Blob;

    fn call(routine: Routine, len: u64) -> Call {
        Call {
            routine,
            dst: 0x100_0000,
            src: 0x200_0000,
            fill: 0x5a,
            len,
            count: 1,
            step: len as i64,
        }
    }

    #[test]
    fn memset_config_turns_clear_pages_into_memset() {
        let m = Blob::get(LinkConfig::Memset).unwrap();
        let v = variants(Routine::ClearPages, LinkConfig::Memset)[0];
        let c = command(&m, v, &call(Routine::ClearPages, 3 * 4096)).unwrap();
        assert_eq!(
            m.aliases[c.index as usize].name,
            format!("memset_{}", v.name)
        );
        assert_eq!((c.a0, c.a1, c.a2), (0x100_0000, 0, 3 * 4096));
    }

    #[test]
    fn vanilla_clear_pages_passes_page_count() {
        let b = Blob::get(LinkConfig::Vanilla).unwrap();
        let v = variants(Routine::ClearPages, LinkConfig::Vanilla)[0];
        let c = command(&b, v, &call(Routine::ClearPages, 512 * 4096)).unwrap();
        assert_eq!(
            b.aliases[c.index as usize].name,
            format!("clear_pages_{}", v.name)
        );
        assert_eq!(c.a1, 512);
    }

    #[test]
    fn every_variant_has_an_alias() {
        for config in [LinkConfig::Vanilla, LinkConfig::Memset] {
            let b = Blob::get(config).unwrap();
            for r in Routine::ALL {
                for v in variants(r, config) {
                    let len = r.fixed_size().unwrap_or(4096);
                    command(&b, v, &call(r, len)).unwrap();
                }
            }
        }
    }

    #[test]
    fn page_routines_reject_partial_pages() {
        let b = Blob::get(LinkConfig::Vanilla).unwrap();
        let v = variants(Routine::ClearPages, LinkConfig::Vanilla)[0];
        assert!(command(&b, v, &call(Routine::ClearPages, 4097)).is_err());
        let v = variants(Routine::ClearPage, LinkConfig::Vanilla)[0];
        assert!(command(&b, v, &call(Routine::ClearPage, 8192)).is_err());
        assert!(find_variant(Routine::Memset, LinkConfig::Vanilla, "nope").is_err());
    }
}
