//! aarch64: EL1 (or EL0) guest with the MMU on (see the aarch64 issue).
//!
//! `layout`, `paging`, `sysregs` and `decode` are pure and compile (and
//! are unit tested) on every host; `host` talks to KVM and exists only on
//! aarch64, where `crate::arch` re-exports it.
#[cfg(target_arch = "aarch64")]
pub mod cache;
pub mod decode;
#[cfg(target_arch = "aarch64")]
pub mod host;
pub mod layout;
pub mod paging;
pub mod sysregs;

use super::VariantDef as V;

/// Routine variants on aarch64; `family` + `_` + `name` (with `-` as `_`)
/// is the alias name in `guest/aarch64/aliases.h`. `requires` names a
/// feature of `CpuCaps`: "mops" (ID_AA64ISAR2_EL1.MOPS) or "dczva"
/// (DCZID_EL0.DZP == 0).
pub const VARIANTS: &[V] = &[
    V {
        family: "clear_page",
        name: "mops",
        requires: Some("mops"),
    },
    V {
        family: "clear_page",
        name: "dczva",
        requires: Some("dczva"),
    },
    V {
        family: "clear_page",
        name: "stnp",
        requires: None,
    },
    V {
        family: "clear_page",
        name: "stp",
        requires: None,
    },
    V {
        family: "memset",
        name: "mops",
        requires: Some("mops"),
    },
    V {
        family: "memset",
        name: "generic",
        requires: None,
    },
    V {
        family: "memcpy",
        name: "mops",
        requires: Some("mops"),
    },
    V {
        family: "memcpy",
        name: "generic",
        requires: None,
    },
    V {
        family: "copy_page",
        name: "mops",
        requires: Some("mops"),
    },
    V {
        family: "copy_page",
        name: "ldp-stnp",
        requires: None,
    },
];

#[cfg(test)]
mod tests {
    use super::VARIANTS;

    /// The variant list and guest/aarch64/aliases.h name the same routines.
    #[test]
    fn variants_match_the_alias_list() {
        let text = include_str!("../../../guest/aarch64/aliases.h");
        let aliases: Vec<(&str, &str)> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("HYP_ALIAS(")?.strip_suffix(')'))
            .filter_map(|a| a.split_once(','))
            .map(|(a, t)| (a.trim(), t.trim()))
            .collect();
        for (alias, target) in &aliases {
            assert_eq!(*target, format!("__pi_{alias}"));
        }
        let mut expected = Vec::new();
        for v in VARIANTS {
            let suffix = v.name.replace('-', "_");
            expected.push(format!("{}_{suffix}", v.family));
            if v.family == "clear_page" {
                expected.push(format!("clear_pages_{suffix}"));
            }
        }
        let mut got: Vec<String> = aliases.iter().map(|(a, _)| a.to_string()).collect();
        got.sort();
        expected.sort();
        assert_eq!(got, expected);
    }

    #[test]
    fn every_routine_file_exists() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/guest/aarch64/lib");
        for v in VARIANTS {
            let f = format!("{dir}/{}_{}.S", v.family, v.name.replace('-', "_"));
            assert!(std::path::Path::new(&f).exists(), "{f}");
        }
    }
}
