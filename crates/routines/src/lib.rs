//! The routines under test, their variants, and how a call to one becomes a
//! guest [`Command`] in each link configuration.
//!
//! In the `memset` configuration there is no clear_page routine at all: as in
//! "arm64: clear_page[s] using memset", `clear_page(addr)` is
//! `memset(addr, 0, PAGE_SIZE)` and `clear_pages(addr, n)` is
//! `memset(addr, 0, n * PAGE_SIZE)`, so the clear_page variants there are the
//! memset variants.
pub mod privilege;

// The crates below, under the names the modules use.
use hypclear_arch as arch;
use hypclear_kernel as kernel;
pub use hypclear_link::catalog;
use hypclear_process::{errln, files};
use hypclear_vmm as vmm;
use hypclear_vmm::blob;
pub mod error;
pub mod lower;

pub use catalog::Family;
pub use lower::{Call, Lowered, command, lower};

use crate::blob::LinkConfig;
use crate::kernel::Side;
use hypclear_abi as abi;
use serde::Serialize;

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize,
)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "cli", clap(rename_all = "snake_case"))]
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
    pub fn family(self, config: LinkConfig) -> Family {
        match (self, config) {
            (Routine::ClearPage | Routine::ClearPages, LinkConfig::Memset) => Family::Memset,
            (Routine::ClearPage | Routine::ClearPages, LinkConfig::Vanilla) => Family::ClearPage,
            (Routine::Memset, _) => Family::Memset,
            (Routine::Memcpy, _) => Family::Memcpy,
            (Routine::CopyPage, _) => Family::CopyPage,
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

/// Output names a family as in the headers (`clear_page`).
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

/// The variants of `routine` a side offers (the built-ins' in its link
/// configuration, or a kernel blob's).
pub fn variants(routine: Routine, side: &Side) -> Vec<&'static VariantDef> {
    let fam = routine.family(side.config());
    side.variant_table()
        .iter()
        .filter(|v| v.family == fam)
        .collect()
}

/// Whether `want` names variant `v`: its name, or a former name of it
/// (`arch::FORMER_NAMES`, e.g. x86 memcpy `erms` is now `fsrm`).
pub fn is_named(v: &VariantDef, want: &str) -> bool {
    v.name == want
        || arch::FORMER_NAMES
            .iter()
            .any(|f| f.family == v.family && f.old == want && f.new == v.name)
}

#[cfg(test)]
mod tests {
    use crate::error::Error;

    fn find_variant(
        routine: Routine,
        side: &Side,
        name: &str,
    ) -> std::result::Result<&'static VariantDef, Error> {
        let vs = variants(routine, side);
        vs.iter()
            .copied()
            .find(|v| is_named(v, name))
            .ok_or_else(|| {
                Error::Vmm(crate::error::VmmError::Usage(format!(
                    "unknown variant `{name}` for {routine}"
                )))
            })
    }

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
        let v = variants(Routine::ClearPages, &LinkConfig::Memset.into())[0];
        let c = command(&m, v, &call(Routine::ClearPages, 3 * 4096)).unwrap();
        assert_eq!(
            m.aliases[c.index as usize].name,
            format!("memset_{}", v.name)
        );
        // The command carries the guest-virtual address of the buffer.
        let dst = arch::guest_va(0x100_0000);
        assert_eq!((c.args.a0, c.args.a1, c.args.a2), (dst, 0, 3 * 4096));
    }

    #[test]
    fn vanilla_clear_pages_passes_page_count() {
        let b = Blob::get(LinkConfig::Vanilla).unwrap();
        let v = variants(Routine::ClearPages, &LinkConfig::Vanilla.into())[0];
        let c = command(&b, v, &call(Routine::ClearPages, 512 * 4096)).unwrap();
        assert_eq!(
            b.aliases[c.index as usize].name,
            format!("clear_pages_{}", v.name)
        );
        assert_eq!(c.args.a1, 512);
    }

    #[test]
    fn every_variant_has_an_alias() {
        for config in [LinkConfig::Vanilla, LinkConfig::Memset] {
            let b = Blob::get(config).unwrap();
            for r in Routine::ALL {
                for v in variants(r, &config.into()) {
                    let len = r.fixed_size().unwrap_or(4096);
                    command(&b, v, &call(r, len)).unwrap();
                }
            }
        }
    }

    #[test]
    fn former_names_still_select_the_renamed_variant() {
        for &arch::FormerName { family, old, new } in arch::FORMER_NAMES {
            let v = arch::VARIANTS
                .iter()
                .find(|v| v.family == family && v.name == new)
                .unwrap_or_else(|| panic!("{family} {new} is not a variant"));
            assert!(is_named(v, old) && is_named(v, new));
            assert!(
                !arch::VARIANTS
                    .iter()
                    .any(|v| v.family == family && v.name == old)
            );
            let r = Routine::ALL
                .into_iter()
                .find(|r| r.name() == family.name())
                .unwrap();
            assert_eq!(
                find_variant(r, &LinkConfig::Vanilla.into(), old)
                    .unwrap()
                    .name,
                new
            );
        }
        let v = &arch::VARIANTS[0];
        assert!(!is_named(v, "nope"));
    }

    /// guest/README.md documents every generated variant, and only those,
    /// with a kernel file exactly where the header names kernel code.
    #[test]
    fn guest_readme_tables_match_the_generated_catalogue() {
        let readme = include_str!("../../../guest/README.md");
        for (arch, table) in [
            ("x86_64", arch::x86_64::VARIANTS),
            ("aarch64", arch::aarch64::VARIANTS),
        ] {
            let section = readme
                .split("\n## ")
                .find(|s| s.starts_with(arch))
                .unwrap_or_else(|| panic!("guest/README.md has no `## {arch}` section"));
            let rows: Vec<Vec<&str>> = section
                .lines()
                .filter(|l| {
                    l.starts_with("| ") && !l.starts_with("| family") && !l.starts_with("| ---")
                })
                .map(|l| l.split('|').map(str::trim).collect())
                .filter(|c: &Vec<&str>| c.len() > 4 && c[2].starts_with('`'))
                .collect();
            let mut documented: Vec<(String, String)> = rows
                .iter()
                .map(|c| (c[1].to_string(), c[2].trim_matches('`').to_string()))
                .collect();
            let mut generated: Vec<(String, String)> = table
                .iter()
                .map(|v| (v.family.to_string(), v.name.to_string()))
                .collect();
            documented.sort();
            generated.sort();
            assert_eq!(
                documented, generated,
                "{arch}: guest/README.md vs the catalogue"
            );
            for v in table {
                let row = rows
                    .iter()
                    .find(|c| c[1] == v.family.name() && c[2].trim_matches('`') == v.name);
                let readme_kernel = row.is_some_and(|c| c[3] != "—");
                assert_eq!(
                    readme_kernel,
                    v.kernel.is_some(),
                    "{arch} {} {}",
                    v.family,
                    v.name
                );
            }
        }
    }

    #[test]
    fn clear_pages_without_a_routine_is_clear_page_per_page() {
        let v = VariantDef {
            family: Family::ClearPage,
            name: "erms",
            requires: None,
            kernel: None,
            paths: &[],
            memmove: false,
        };
        let mut c = call(Routine::ClearPages, 3 * 4096);
        c.count = 2;
        let l = lower::lower_pages_as_page(&v, &c).unwrap();
        assert_eq!(l.alias, "clear_page_erms");
        assert_eq!(
            (l.args.a0, l.args.a0_step, l.args.count),
            (0x100_0000, 4096, 6)
        );
        c.step = -(3 * 4096);
        assert!(lower::lower_pages_as_page(&v, &c).is_err());
    }

    #[test]
    fn page_routines_reject_partial_pages() {
        let b = Blob::get(LinkConfig::Vanilla).unwrap();
        let v = variants(Routine::ClearPages, &LinkConfig::Vanilla.into())[0];
        assert!(command(&b, v, &call(Routine::ClearPages, 4097)).is_err());
        let v = variants(Routine::ClearPage, &LinkConfig::Vanilla.into())[0];
        assert!(command(&b, v, &call(Routine::ClearPage, 8192)).is_err());
        assert!(find_variant(Routine::Memset, &LinkConfig::Vanilla.into(), "nope").is_err());
    }
}
