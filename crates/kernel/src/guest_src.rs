//! hypclear's own guest entry / dispatcher / table sources, shipped inside
//! the binary so a kernel blob can be linked at run time (for either
//! architecture) with only the matching gcc and binutils.
use super::tree::Arch;
use std::path::Path;

/// (path under the work directory, contents) of every source a kernel
/// blob's link needs, for `arch`.
pub fn files(arch: Arch) -> Vec<(&'static str, &'static str)> {
    let (entry, ring) = match arch {
        Arch::X86_64 => (
            include_str!("../../../guest/x86_64/entry.S"),
            include_str!("../../../guest/x86_64/ring.h"),
        ),
        Arch::Aarch64 => (
            include_str!("../../../guest/aarch64/entry.S"),
            include_str!("../../../guest/aarch64/ring.h"),
        ),
    };
    vec![
        (
            "include/alias.h",
            include_str!("../../../guest/include/alias.h"),
        ),
        (
            "include/linkage.h",
            include_str!("../../../guest/include/linkage.h"),
        ),
        ("include/hypclear_abi.h", hypclear_guest::ABI_HEADER),
        ("include/ring.h", ring),
        (
            "common/tables.S",
            include_str!("../../../guest/common/tables.S"),
        ),
        (
            "common/hyp.lds.S",
            include_str!("../../../guest/common/hyp.lds.S"),
        ),
        ("entry.S", entry),
        // A kernel blob has no selftest routines.
        (
            "kernel/selftests.h",
            "/* no selftests in a kernel blob */\n",
        ),
        (
            "kernel/hostile.h",
            "/* no hostile guests in a kernel blob */\n",
        ),
    ]
}

/// hypclear's shim around an x86 tree's inline clear_page()/clear_pages()
/// (Linux 7.x): (file name, contents) of its external-module directory.
pub(crate) const X86_INLINE_CLEAR_PAGES: [(&str, &str); 2] = [
    (
        "clear_pages.c",
        include_str!("../../../guest/x86_64/kernel/clear_pages.c"),
    ),
    (
        "Kbuild",
        include_str!("../../../guest/x86_64/kernel/Kbuild"),
    ),
];

/// Write [`files`] under `dir`.
pub fn write(arch: Arch, dir: &Path) -> std::io::Result<()> {
    for (rel, text) in files(arch) {
        let p = dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(p, text)?;
    }
    Ok(())
}
