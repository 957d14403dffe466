//! Which of a kernel tree's routines a kernel blob offers, and how they are
//! reached: the kernel's own hyp alias list (image-vars.h on arm64; the
//! `__memset`/`__memcpy` names on x86) and the alias-table rows the
//! dispatcher calls through (`<family>_<variant>`, as for the built-ins,
//! see `routines/lower.rs`).
use super::tree::{Arch, LinkConfig};
use crate::arch::VariantDef;

/// One alias: `alias` reaches `target` (no prefix).
pub type AliasPair = (&'static str, &'static str);

/// The kernel's alias list for the hyp namespace.
pub fn kernel_aliases(arch: Arch, config: LinkConfig) -> Vec<AliasPair> {
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
/// runs as memset(p, 0, n * 4096), as the patched page.h does.
pub fn table_rows(arch: Arch, config: LinkConfig) -> Vec<AliasPair> {
    let mut v = match arch {
        Arch::X86_64 => vec![
            ("clear_page_erms", "clear_page_erms"),
            ("clear_page_rep", "clear_page_rep"),
            ("clear_page_orig", "clear_page_orig"),
        ],
        Arch::Aarch64 => vec![("clear_page_kernel", "clear_page")],
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

const fn v(family: &'static str, name: &'static str) -> VariantDef {
    VariantDef {
        family,
        name,
        requires: None,
        // The tree's own object: what it follows is the tree itself.
        kernel: Some("the kernel tree's own object"),
    }
}

/// The variants of a kernel blob: the kernel's routines. x86 clear_page
/// has the three routines the kernel chooses from in C (the pick is
/// reported, see `alternatives::x86_clear_page_pick`).
pub fn variants(arch: Arch) -> &'static [VariantDef] {
    const X86: &[VariantDef] = &[
        v("clear_page", "erms"),
        v("clear_page", "rep"),
        v("clear_page", "orig"),
        v("memset", "kernel"),
        v("memcpy", "kernel"),
        v("copy_page", "kernel"),
    ];
    const ARM64: &[VariantDef] = &[
        v("clear_page", "kernel"),
        v("memset", "kernel"),
        v("memcpy", "kernel"),
        v("copy_page", "kernel"),
    ];
    match arch {
        Arch::X86_64 => X86,
        Arch::Aarch64 => ARM64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_has_a_row_and_memset_config_has_no_clear_page() {
        for arch in [Arch::X86_64, Arch::Aarch64] {
            let rows = table_rows(arch, LinkConfig::Vanilla);
            for d in variants(arch) {
                let name = format!("{}_{}", d.family, d.name);
                assert!(rows.iter().any(|r| r.0 == name), "{arch}: {name}");
            }
            let m = table_rows(arch, LinkConfig::Memset);
            assert!(!m.iter().any(|r| r.0.starts_with("clear_page")));
            assert!(
                !kernel_aliases(arch, LinkConfig::Memset)
                    .iter()
                    .any(|a| a.0 == "clear_page")
            );
        }
    }
}
