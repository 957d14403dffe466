//! x86_64: long mode entered directly from the host, CPL 3 or CPL 0.
#[cfg(target_arch = "x86_64")]
pub mod cache;
#[cfg(target_arch = "x86_64")]
pub mod host;
pub mod layout;
pub mod paging;
#[cfg(target_arch = "x86_64")]
pub mod regs;

/// Routine variants on x86_64; `family` + `_` + `name` is the alias name.
pub const VARIANTS: &[super::VariantDef] = {
    use super::VariantDef as V;
    &[
        V {
            family: "clear_page",
            name: "erms",
            requires: None,
        },
        V {
            family: "clear_page",
            name: "rep",
            requires: None,
        },
        V {
            family: "clear_page",
            name: "orig",
            requires: None,
        },
        V {
            family: "clear_page",
            name: "nt",
            requires: None,
        },
        V {
            family: "clear_page",
            name: "clzero",
            requires: Some("clzero"),
        },
        V {
            family: "memset",
            name: "erms",
            requires: None,
        },
        V {
            family: "memset",
            name: "unrolled",
            requires: None,
        },
        V {
            family: "memcpy",
            name: "erms",
            requires: None,
        },
        V {
            family: "memcpy",
            name: "unrolled",
            requires: None,
        },
        V {
            family: "copy_page",
            name: "rep",
            requires: None,
        },
        V {
            family: "copy_page",
            name: "unrolled",
            requires: None,
        },
    ]
};
