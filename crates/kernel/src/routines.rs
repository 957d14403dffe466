//! Which of a kernel tree's routines a kernel blob offers, and how they are
//! reached: the kernel's own hyp alias list (image-vars.h on arm64; the
//! `__memset`/`__memcpy` names on x86) and the alias-table rows the
//! dispatcher calls through (`<family>_<variant>`, as for the built-ins,
//! see `routines/lower.rs`).
use super::tree::{Arch, ClearPageShape, LinkConfig};
use crate::arch::{Family, KernelVersion, VariantDef};

/// One alias: `alias` reaches `target` (no prefix).
pub(crate) type AliasPair = (&'static str, &'static str);

/// The kernel's alias list for the hyp namespace.
pub(crate) fn kernel_aliases(arch: Arch, config: LinkConfig) -> Vec<AliasPair> {
    match arch {
        Arch::X86_64 => vec![("memset", "__memset"), ("memcpy", "__memcpy")],
        Arch::Aarch64 => {
            let mut v = vec![
                ("copy_page", "__pi_copy_page"),
                ("memcpy", "__pi_memcpy"),
                ("memset", "__pi_memset"),
            ];
            if config == LinkConfig::Vanilla {
                v.insert(0, ("clear_page", "__pi_clear_page"));
            }
            v
        }
    }
}

/// Alias-table rows: (row name = `<family>_<variant>`, kernel symbol).
/// In the `memset` configuration there is no clear_page row: clear_page
/// runs as memset(p, 0, n * 4096), as the patched page.h does. An x86
/// tree whose clear_pages() is inline (7.x) has hypclear's shim around it,
/// with a page-count entry (`clear_pages_kernel`) beside clear_page's.
pub(crate) fn table_rows(
    arch: Arch,
    config: LinkConfig,
    clear_page: ClearPageShape,
) -> Vec<AliasPair> {
    let mut v = match (arch, clear_page) {
        (Arch::X86_64, ClearPageShape::Inline) => vec![
            ("clear_page_kernel", "clear_page_inline"),
            ("clear_pages_kernel", "clear_pages_inline"),
        ],
        (Arch::X86_64, ClearPageShape::OutOfLine) => vec![
            ("clear_page_erms", "clear_page_erms"),
            ("clear_page_rep", "clear_page_rep"),
            ("clear_page_orig", "clear_page_orig"),
        ],
        (Arch::Aarch64, _) => vec![("clear_page_kernel", "clear_page")],
    };
    if config == LinkConfig::Memset {
        v.clear();
    }
    v.extend([
        ("memset_kernel", "memset"),
        ("memcpy_kernel", "memcpy"),
        ("copy_page_kernel", "copy_page"),
    ]);
    v
}

const fn v(family: Family, name: &'static str) -> VariantDef {
    VariantDef {
        family,
        name,
        requires: None,
        // The tree's own object: what it follows is the tree itself.
        kernel: Some("the kernel tree's own object"),
        memmove: false,
    }
}

/// The variants of a kernel blob: the kernel's routines. x86 6.x
/// clear_page has the three routines the kernel chooses from in C (the
/// pick is reported, see `alternatives::x86_clear_page_pick`); 7.x's
/// inline clear_page is one routine whose alternatives are its paths.
pub fn variants(arch: Arch, clear_page: ClearPageShape) -> &'static [VariantDef] {
    const X86_INLINE: &[VariantDef] = &[
        v(Family::ClearPage, "kernel"),
        v(Family::Memset, "kernel"),
        v(Family::Memcpy, "kernel"),
        v(Family::CopyPage, "kernel"),
    ];
    const X86: &[VariantDef] = &[
        v(Family::ClearPage, "erms"),
        v(Family::ClearPage, "rep"),
        v(Family::ClearPage, "orig"),
        v(Family::Memset, "kernel"),
        v(Family::Memcpy, "kernel"),
        v(Family::CopyPage, "kernel"),
    ];
    const ARM64: &[VariantDef] = &[
        v(Family::ClearPage, "kernel"),
        v(Family::Memset, "kernel"),
        // arch/arm64/lib/memcpy.S is memmove too (SYM_FUNC_ALIAS).
        VariantDef {
            memmove: true,
            ..v(Family::Memcpy, "kernel")
        },
        v(Family::CopyPage, "kernel"),
    ];
    match (arch, clear_page) {
        (Arch::X86_64, ClearPageShape::Inline) => X86_INLINE,
        (Arch::X86_64, ClearPageShape::OutOfLine) => X86,
        (Arch::Aarch64, _) => ARM64,
    }
}

/// The routine families a kernel blob offers.
pub const FAMILIES: [Family; 4] = Family::ALL;

/// The built-in variant that follows the same kernel path as a kernel
/// blob's routine of `family`: the pick of the kernel version nearest to
/// `kernelversion` (6.1 or 6.12, the versions the built-ins model) with
/// the features the blob's alternatives were decided with (`present`, the
/// same `--alternatives` decision), and the feature that decides.
///
/// x86 takes the features as the blob's alternatives saw them (no vendor
/// rule on top: a host without FSRS in `present` runs memset_orig). arm64
/// has no feature alternatives in these routines except 6.1 copy_page's
/// NO_HW_PREFETCH; DC ZVA is decided at run time from DCZID_EL0, as the
/// built-ins' pick in `caps` says.
pub fn builtin_equivalent(
    arch: Arch,
    family: Family,
    kernelversion: &str,
    present: &std::collections::BTreeSet<String>,
    caps: &crate::arch::CpuCaps,
) -> Option<(&'static str, &'static str)> {
    let version = KernelVersion::nearest(kernelversion);
    match arch {
        Arch::X86_64 => {
            use crate::arch::x86_64::kernel::{StringFeatures, kernel_pick};
            let has = |f: &str| present.contains(f);
            let f = StringFeatures {
                erms: has("erms"),
                fsrm: has("fsrm"),
                fsrs: has("fsrs"),
                rep_good: has("rep_good"),
                amd: false,
            };
            let p = kernel_pick(family, &f, version);
            Some((p.variant, p.why))
        }
        Arch::Aarch64 => {
            if family == Family::CopyPage && version == KernelVersion::V6_1 {
                return Some(if present.contains("has_no_hw_prefetch") {
                    ("ldp-stnp-prfm", "ARM64_HAS_NO_HW_PREFETCH")
                } else {
                    ("ldp-stnp", "no ARM64_HAS_NO_HW_PREFETCH")
                });
            }
            let p = caps.kernel_pick(family, version)?;
            Some((p.variant, p.why))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_equivalent_follows_the_blob_decision() {
        let caps = crate::arch::CpuCaps::default();
        let set = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        // This EPYC host: erms, fsrm, rep_good; no fsrs.
        let host = set(&["erms", "fsrm", "rep_good"]);
        let pick = |fam, v| {
            builtin_equivalent(Arch::X86_64, fam, v, &host, &caps)
                .unwrap()
                .0
        };
        assert_eq!(pick(Family::Memset, "6.12.57"), "orig");
        assert_eq!(pick(Family::Memcpy, "6.12.57"), "fsrm");
        assert_eq!(pick(Family::ClearPage, "6.12.57"), "erms");
        assert_eq!(pick(Family::CopyPage, "6.12.57"), "rep");
        assert_eq!(pick(Family::Memset, "6.1.158"), "erms");
        // The PVM guest's view: only rep_good.
        let guest = set(&["rep_good"]);
        let pick = |fam, v| {
            builtin_equivalent(Arch::X86_64, fam, v, &guest, &caps)
                .unwrap()
                .0
        };
        assert_eq!(pick(Family::Memset, "6.12.57"), "orig");
        assert_eq!(pick(Family::Memset, "6.1.158"), "rep_good");
        assert_eq!(pick(Family::ClearPage, "6.12.57"), "rep");
        use KernelVersion::{V6_1, V6_12};
        assert_eq!(KernelVersion::nearest("6.12.0-rc3"), V6_12);
        assert_eq!(KernelVersion::nearest("6.1.9"), V6_1);
        assert_eq!(KernelVersion::nearest("7.0"), V6_12);
    }

    #[test]
    fn every_variant_has_a_row_and_memset_config_has_no_clear_page() {
        let shapes = [ClearPageShape::OutOfLine, ClearPageShape::Inline];
        for (arch, shape) in [Arch::X86_64, Arch::Aarch64]
            .into_iter()
            .flat_map(|a| shapes.map(|s| (a, s)))
        {
            let rows = table_rows(arch, LinkConfig::Vanilla, shape);
            for d in variants(arch, shape) {
                let name = format!("{}_{}", d.family, d.name);
                assert!(rows.iter().any(|r| r.0 == name), "{arch}: {name}");
            }
            // The inline shim has clear_pages' page-count entry too.
            assert_eq!(
                rows.iter().any(|r| r.0 == "clear_pages_kernel"),
                arch == Arch::X86_64 && shape == ClearPageShape::Inline
            );
            let m = table_rows(arch, LinkConfig::Memset, shape);
            assert!(!m.iter().any(|r| r.0.starts_with("clear_page")));
            assert!(
                !kernel_aliases(arch, LinkConfig::Memset)
                    .iter()
                    .any(|a| a.0 == "clear_page")
            );
        }
    }
}
