//! aarch64: EL1 (or EL0) guest with the MMU on (see the aarch64 issue).
//!
//! `layout`, `paging`, `sysregs` and `decode` are pure and compile (and
//! are unit tested) on every host; `host` (KVM) and `loader` (linux-loader's
//! PE loader) exist only on aarch64, where `crate::arch` re-exports them.
#[cfg(target_arch = "aarch64")]
pub mod cache;
pub mod decode;
pub mod error;
#[cfg(target_arch = "aarch64")]
pub mod host;
pub mod layout;
#[cfg(target_arch = "aarch64")]
pub mod loader;
pub mod paging;
pub mod sysregs;

pub use error::Error;

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
    V {
        family: "copy_page",
        name: "ldp-stnp-prfm",
        requires: None,
    },
];

/// Former variant names still accepted on the command line (none renamed
/// on aarch64): (family, old name, current name).
pub const FORMER_NAMES: &[(&str, &str, &str)] = &[];

/// What the 6.12 and 6.1 kernels run on this CPU. Neither has a MOPS path
/// or any alternative in clear_page / memset / memcpy (arch/arm64/lib); the
/// only run-time choices are DCZID_EL0 inside clear_page and memset (DZP=1:
/// clear_page's STNP loop, memset's STP loop) and, in 6.1 only, copy_page's
/// prefetch under ARM64_HAS_NO_HW_PREFETCH (Cavium ThunderX, MIDR variant
/// 0 and 1).
pub fn kernel_picks(midr: u64, dczva: bool) -> Vec<super::KernelPick> {
    use super::KernelPick as P;
    let thunderx =
        (midr >> 24) & 0xff == 0x43 && (midr >> 4) & 0xfff == 0x0a1 && (midr >> 20) & 0xf <= 1;
    let clear_why = if dczva {
        "DC ZVA (DZP=0)"
    } else {
        "STNP fallback (DZP=1)"
    };
    let mut v = Vec::new();
    for kernel in ["6.12", "6.1"] {
        let (copy, copy_why) = match (kernel, thunderx) {
            ("6.1", true) => ("ldp-stnp-prfm", "ARM64_HAS_NO_HW_PREFETCH"),
            ("6.1", false) => ("ldp-stnp", "no ARM64_HAS_NO_HW_PREFETCH"),
            _ => ("ldp-stnp", "only path"),
        };
        v.extend([
            P {
                family: "clear_page",
                variant: "dczva",
                kernel,
                why: clear_why,
            },
            P {
                family: "memset",
                variant: "generic",
                kernel,
                why: "only path",
            },
            P {
                family: "memcpy",
                variant: "generic",
                kernel,
                why: "only path",
            },
            P {
                family: "copy_page",
                variant: copy,
                kernel,
                why: copy_why,
            },
        ]);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::{VARIANTS, kernel_picks};

    #[test]
    fn kernel_picks_follow_dzp_and_no_hw_prefetch() {
        let neoverse = 0x410f_d0c1; // Arm Neoverse N1
        let p = kernel_picks(neoverse, false);
        let get = |k: &str, f: &str| {
            p.iter()
                .find(|x| x.kernel == k && x.family == f)
                .map(|x| (x.variant, x.why))
                .unwrap()
        };
        assert_eq!(
            get("6.12", "clear_page"),
            ("dczva", "STNP fallback (DZP=1)")
        );
        assert_eq!(get("6.1", "copy_page").0, "ldp-stnp");
        assert_eq!(get("6.12", "memset").0, "generic");
        let thunderx = 0x430f_0a10; // Cavium ThunderX, variant 0
        let p = kernel_picks(thunderx, true);
        let prfm = p
            .iter()
            .find(|x| x.kernel == "6.1" && x.family == "copy_page")
            .unwrap();
        assert_eq!(prfm.variant, "ldp-stnp-prfm");
        let p612 = p
            .iter()
            .find(|x| x.kernel == "6.12" && x.family == "copy_page")
            .unwrap();
        assert_eq!(p612.variant, "ldp-stnp");
        // ThunderX2 (part 0x0af) and ThunderX variant 2 are not flagged.
        assert!(
            kernel_picks(0x431f_0af0, true)
                .iter()
                .all(|x| x.variant != "ldp-stnp-prfm")
        );
        assert!(
            kernel_picks(0x432f_0a10, true)
                .iter()
                .all(|x| x.variant != "ldp-stnp-prfm")
        );
        // Every pick names a variant of the table.
        for x in kernel_picks(thunderx, true) {
            assert!(
                VARIANTS
                    .iter()
                    .any(|v| v.family == x.family && v.name == x.variant)
            );
        }
    }

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
