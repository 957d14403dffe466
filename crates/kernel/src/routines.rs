//! Which of a kernel tree's routines a kernel blob offers, and how they are
//! reached: the kernel's own hyp alias list (image-vars.h on arm64; the
//! `__memset`/`__memcpy` names on x86) and the alias-table rows the
//! dispatcher calls through (`<family>_<variant>`, as for the built-ins,
//! see `routines/lower.rs`).
use super::tree::{Arch, ClearPageShape, LinkConfig};
use crate::arch::{Family, VariantDef};

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
        paths: &[],
        memmove: false,
    }
}

/// The variants of a kernel blob: the kernel's routines. x86 6.x
/// clear_page has the three routines the kernel chooses from in C (the
/// pick is read from the tree's C, see `tree::CallChoice`); 7.x's
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

/// The x86 6.x clear_page row of kernel routine `routine`
/// (`clear_page_erms` -> `erms`), if it is one.
pub fn clear_page_variant(routine: &str) -> Option<&'static str> {
    let name = routine.strip_prefix("clear_page_")?;
    variants(Arch::X86_64, ClearPageShape::OutOfLine)
        .iter()
        .find(|v| v.family == Family::ClearPage && v.name == name)
        .map(|v| v.name)
}

/// The routine families a kernel blob offers.
pub const FAMILIES: [Family; 4] = Family::ALL;

#[cfg(test)]
mod tests {
    use super::*;

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
