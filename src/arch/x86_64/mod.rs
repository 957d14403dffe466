//! x86_64: long mode entered directly from the host, CPL 3 or CPL 0.
#[cfg(target_arch = "x86_64")]
pub mod cache;
pub mod error;
#[cfg(target_arch = "x86_64")]
pub mod host;
pub mod kernel;
pub mod layout;
#[cfg(target_arch = "x86_64")]
pub mod loader;
pub mod paging;
#[cfg(target_arch = "x86_64")]
pub mod regs;

pub use error::Error;

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
            name: "rep_good",
            requires: None,
        },
        V {
            family: "memset",
            name: "orig",
            requires: None,
        },
        V {
            family: "memcpy",
            name: "fsrm",
            requires: None,
        },
        V {
            family: "memcpy",
            name: "rep_good",
            requires: None,
        },
        V {
            family: "memcpy",
            name: "orig",
            requires: None,
        },
        V {
            family: "copy_page",
            name: "rep",
            requires: None,
        },
        V {
            family: "copy_page",
            name: "regs",
            requires: None,
        },
        V {
            family: "copy_page",
            name: "unrolled",
            requires: None,
        },
    ]
};

/// Former variant names still accepted on the command line:
/// (family, old name, current name).
pub const FORMER_NAMES: &[(&str, &str, &str)] = &[
    ("memset", "unrolled", "orig"),
    ("memcpy", "unrolled", "orig"),
    ("memcpy", "erms", "fsrm"),
];
