//! Which built-in variant runs the path a kernel blob's routine takes, read
//! from the tree's own code: the alternatives its routines carry, which of
//! them this load took and the functions they jump to, and for x86 6.x
//! clear_page the C `alternative_call_2` of asm/page_64.h. Each path is
//! named as the built-ins' `Paths:` headers name theirs (`memset+fsrs`,
//! `memset_orig`, `clear_pages_unrolled`); nothing is keyed by a kernel
//! version, and a path no built-in lists is unknown.
//!
//! [`kernel_picks`] is what the tree's kernel would run on the guest's CPU:
//! the same reading, with the alternatives applied as that CPU's features
//! (CPUID, plus what the tree's CPU-setup C implies from them) decide.

use std::collections::BTreeSet;
use std::fmt;

use crate::alternatives::{AltError, Applied, FeatureNames, Image};
use crate::arch::x86_64::kernel::Vendor;
use crate::arch::{Family, VariantDef};
use crate::paths::{bare_name, family_of};
use crate::setup::{CpuSetup, Implied, SetupUnknown};
use crate::tree::{Arch, CallChoice, ClearPageShape, LinkConfig};

/// The built-in that follows a kernel routine's path, or why none does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Equivalent {
    Builtin {
        variant: &'static str,
        /// What the tree's code decided it by: `FSRS`, `no FSRS`.
        why: String,
    },
    Unknown {
        /// The path as the tree's code names it (`memcpy+has_mops`).
        path: String,
        why: String,
    },
}

/// A function as paths name it: leading `_` and arm64's `__pi_` dropped,
/// and the `_inline` of hypclear's shim for an inline kernel function.
fn path_name(function: &str) -> String {
    let f = bare_name(function);
    f.strip_suffix("_inline").unwrap_or(f).to_string()
}

/// The paths `family`'s alternative sites take in this load, and the
/// features that decided them; `None` when the family has no site.
fn site_paths(family: Family, applied: &[Applied]) -> Option<(BTreeSet<String>, String)> {
    let ours: Vec<&Applied> = applied
        .iter()
        .filter(|a| family_of(&a.routine) == Some(family))
        .collect();
    let mut sites: Vec<u64> = ours.iter().map(|a| a.site).collect();
    sites.dedup();
    let (mut paths, mut why) = (BTreeSet::new(), BTreeSet::new());
    for site in sites {
        let entries: Vec<&&Applied> = ours.iter().filter(|a| a.site == site).collect();
        let routine = path_name(&entries[0].routine);
        // As ALTERNATIVE_2 patches them: the last present feature wins.
        match entries.iter().rev().find(|a| a.taken) {
            Some(a) => {
                paths.insert(match &a.target {
                    Some(t) => path_name(t),
                    None => format!("{routine}+{}", a.feature),
                });
                why.insert(a.feature.to_uppercase());
            }
            None => {
                paths.insert(entries[0].target.as_deref().map_or(routine, path_name));
                let all: Vec<String> = entries.iter().map(|a| a.feature.to_uppercase()).collect();
                why.insert(format!("no {}", all.join(", ")));
            }
        }
    }
    (!paths.is_empty()).then(|| (paths, why.into_iter().collect::<Vec<_>>().join("; ")))
}

/// The built-in of `arch` that runs the path `family` takes: decided by
/// its alternative sites in `applied`, by `choice` (x86 6.x clear_page's
/// C) with the `present` features, or, with neither, the routine as
/// linked.
pub fn equivalent(
    arch: Arch,
    family: Family,
    applied: &[Applied],
    choice: Option<&CallChoice>,
    present: &BTreeSet<String>,
) -> Equivalent {
    let (paths, why) = match (site_paths(family, applied), choice) {
        (Some(p), _) => p,
        (None, Some(c)) if family == Family::ClearPage => {
            let (routine, why) = c.pick(present);
            (
                BTreeSet::from([path_name(routine)]),
                format!("{why}, alternative_call_2 in {}", c.file),
            )
        }
        (None, _) => (
            BTreeSet::from([family.name().to_string()]),
            "no alternative in the tree's routine".to_string(),
        ),
    };
    let variants: &[VariantDef] = match arch {
        Arch::X86_64 => crate::arch::x86_64::VARIANTS,
        Arch::Aarch64 => crate::arch::aarch64::VARIANTS,
    };
    let found = variants
        .iter()
        .find(|v| v.family == family && paths.iter().all(|p| v.paths.contains(&p.as_str())));
    match found {
        Some(v) => Equivalent::Builtin {
            variant: v.name,
            why,
        },
        None => Equivalent::Unknown {
            path: paths.into_iter().collect::<Vec<_>>().join(" + "),
            why,
        },
    }
}

/// What a kernel tree's code decides its routines' paths with, as a
/// kernel blob file carries it (no I/O here).
pub struct TreeCode<'a> {
    pub arch: Arch,
    pub link_config: LinkConfig,
    pub clear_page: ClearPageShape,
    /// The routines with their alternative sites, not yet applied.
    pub img: &'a Image,
    pub names: &'a FeatureNames,
    /// x86 6.x: clear_page's C choice (`None`: not that shape, or unread).
    pub clear_page_choice: Option<&'a CallChoice>,
    /// `None`: not recorded (a blob file from before it was).
    pub cpu_setup: Option<&'a CpuSetup>,
}

/// The guest's CPU as a kernel's alternatives see it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuestCpu {
    /// The features CPUID (and, x86, the documented REP_GOOD rule) give,
    /// named as the tree's feature list (`erms`, `has_mops`).
    pub features: BTreeSet<String>,
    /// x86: whose CPU-setup code the kernel runs on it.
    pub vendor: Option<Vendor>,
}

/// Which variant the tree's kernel runs for one family.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "pick", rename_all = "snake_case")]
pub enum Decision {
    /// The built-in that runs the path the tree's code takes.
    Builtin { variant: &'static str, why: String },
    /// The tree's path (`memcpy+has_mops`), which no built-in runs.
    NoBuiltin { path: String, why: String },
    /// The tree's code does not say (a shape the reading does not know).
    Unknown { why: String },
}

/// One family's [`Decision`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Pick {
    pub family: Family,
    #[serde(flatten)]
    pub decision: Decision,
}

impl fmt::Display for Pick {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fam = self.family;
        match &self.decision {
            Decision::Builtin { variant, why } => write!(f, "{fam} {variant} ({why})"),
            Decision::NoBuiltin { path, why } => {
                write!(
                    f,
                    "{fam} unknown ({path}, {why}: no built-in runs this path)"
                )
            }
            Decision::Unknown { why } => write!(f, "{fam} unknown ({why})"),
        }
    }
}

/// "clear_page rep (REP_GOOD, ...), memset orig (no FSRS), ...".
pub fn picks_line(picks: &[Pick]) -> String {
    let parts: Vec<String> = picks.iter().map(Pick::to_string).collect();
    parts.join(", ")
}

/// The families a tree's kernel has: in the memset configuration
/// clear_page is memset, not a routine of its own.
fn families(link: LinkConfig) -> impl Iterator<Item = Family> {
    crate::routines::FAMILIES
        .into_iter()
        .filter(move |f| link == LinkConfig::Vanilla || *f != Family::ClearPage)
}

/// What the kernel of `code`'s tree runs for each of its families on
/// `cpu`: its alternatives applied with the CPU's features plus those its
/// CPU-setup C implies, each family's path lined up with the built-in that
/// runs it. Unknown where the tree's code does not say.
pub fn kernel_picks(code: &TreeCode, cpu: &GuestCpu) -> Result<Vec<Pick>, AltError> {
    let setup = match code.cpu_setup {
        Some(s) => s.apply(cpu.vendor, &cpu.features),
        None if code.arch == Arch::X86_64 => Err(SetupUnknown::NotRecorded),
        None => Ok((cpu.features.clone(), Vec::new())),
    };
    let (features, implied) = match setup {
        Ok(x) => x,
        Err(e) => {
            let unknown = |family| Pick {
                family,
                decision: Decision::Unknown { why: e.to_string() },
            };
            return Ok(families(code.link_config).map(unknown).collect());
        }
    };
    let present: BTreeSet<String> = features
        .union(&crate::paths::always(code.names))
        .cloned()
        .collect();
    let mut img = code.img.clone();
    let applied = img.apply(code.names, &present)?;
    let pick = |family| Pick {
        family,
        decision: decide(code, family, &applied, &present, &implied),
    };
    Ok(families(code.link_config).map(pick).collect())
}

/// One family of [`kernel_picks`].
fn decide(
    code: &TreeCode,
    family: Family,
    applied: &[Applied],
    present: &BTreeSet<String>,
    implied: &[&Implied],
) -> Decision {
    let c_choice = code.arch == Arch::X86_64
        && code.link_config == LinkConfig::Vanilla
        && code.clear_page == ClearPageShape::OutOfLine
        && family == Family::ClearPage;
    if c_choice && code.clear_page_choice.is_none() {
        return Decision::Unknown {
            why: "asm/page_64.h's choice among clear_page_orig/rep/erms could not be read".into(),
        };
    }
    match equivalent(code.arch, family, applied, code.clear_page_choice, present) {
        Equivalent::Builtin { variant, why } => Decision::Builtin {
            variant,
            why: with_origin(&why, implied),
        },
        Equivalent::Unknown { path, why } => Decision::NoBuiltin {
            path,
            why: with_origin(&why, implied),
        },
    }
}

/// `why` with each feature the CPU-setup C implied named as such:
/// `FSRS (arch/x86/kernel/cpu/amd.c sets it from FSRM)`.
fn with_origin(why: &str, implied: &[&Implied]) -> String {
    let parts: Vec<String> = why
        .split("; ")
        .map(|part| {
            let i = implied.iter().find(|i| {
                let name = i.sets.to_uppercase();
                part == name || part.starts_with(&format!("{name}, "))
            });
            match i {
                Some(i) => part.replacen(
                    &i.sets.to_uppercase(),
                    &format!(
                        "{} ({} sets it from {})",
                        i.sets.to_uppercase(),
                        i.file,
                        i.when.to_uppercase()
                    ),
                    1,
                ),
                None => part.to_string(),
            }
        })
        .collect();
    parts.join("; ")
}

#[cfg(test)]
mod snippets;

#[cfg(test)]
mod tests {
    use super::*;

    fn site(routine: &str, site: u64, feature: &str, taken: bool, target: Option<&str>) -> Applied {
        Applied {
            routine: routine.into(),
            site,
            feature: feature.into(),
            taken,
            target: target.map(str::to_string),
            summary: String::new(),
        }
    }

    fn x86(family: Family, applied: &[Applied]) -> Equivalent {
        equivalent(Arch::X86_64, family, applied, None, &BTreeSet::new())
    }

    fn builtin(e: Equivalent) -> &'static str {
        match e {
            Equivalent::Builtin { variant, .. } => variant,
            Equivalent::Unknown { path, why } => panic!("unknown: {path} ({why})"),
        }
    }

    #[test]
    fn a_single_feature_site_is_its_taken_or_fallback_path() {
        // 6.12 / 7.3 memset_64.S: ALTERNATIVE "jmp memset_orig", "", FSRS.
        let taken = [site("__memset", 1, "fsrs", true, None)];
        let e = x86(Family::Memset, &taken);
        assert_eq!(
            e,
            Equivalent::Builtin {
                variant: "erms",
                why: "FSRS".into()
            }
        );
        let not = [site("__memset", 1, "fsrs", false, Some("memset_orig"))];
        assert_eq!(builtin(x86(Family::Memset, &not)), "orig");
        let copy = [site(
            "copy_page",
            9,
            "rep_good",
            false,
            Some("copy_page_regs"),
        )];
        assert_eq!(builtin(x86(Family::CopyPage, &copy)), "regs");
    }

    #[test]
    fn alternative_2_takes_the_last_present_feature() {
        // 6.1 memset: ALTERNATIVE_2 "jmp memset_orig", "", REP_GOOD,
        // "jmp memset_erms", ERMS.
        let both = [
            site("__memset", 1, "rep_good", true, None),
            site("__memset", 1, "erms", true, Some("memset_erms")),
        ];
        assert_eq!(builtin(x86(Family::Memset, &both)), "erms");
        let rep = [
            site("__memset", 1, "rep_good", true, None),
            site("__memset", 1, "erms", false, Some("memset_orig")),
        ];
        assert_eq!(builtin(x86(Family::Memset, &rep)), "rep_good");
        let none = [
            site("__memset", 1, "rep_good", false, Some("memset_orig")),
            site("__memset", 1, "erms", false, Some("memset_orig")),
        ];
        let e = x86(Family::Memset, &none);
        assert_eq!(
            e,
            Equivalent::Builtin {
                variant: "orig",
                why: "no REP_GOOD, ERMS".into()
            }
        );
    }

    #[test]
    fn x86_7x_inline_clear_pages_paths_line_up_with_the_clear_page_builtins() {
        // The shim's two functions each carry the ALTERNATIVE_2 of
        // asm/page_64.h: call __clear_pages_unrolled / REP_GOOD / ERMS.
        let path = |rep: bool, erms: bool| {
            // A site left alone still calls the fallback; a patched one runs
            // its inline `rep stos`.
            let t = |taken: bool| (!taken).then_some("__clear_pages_unrolled");
            let mut v = Vec::new();
            for (f, k) in [("clear_page_inline", 1), ("clear_pages_inline", 2)] {
                v.push(site(f, k, "rep_good", rep, t(rep)));
                v.push(site(f, k, "erms", erms, t(erms)));
            }
            builtin(x86(Family::ClearPage, &v))
        };
        assert_eq!(path(true, true), "erms");
        assert_eq!(path(true, false), "rep");
        assert_eq!(path(false, false), "orig");
    }

    #[test]
    fn x86_6x_clear_page_follows_the_trees_c_choice() {
        let h = "static inline void clear_page(void *page)\n{\n\talternative_call_2(clear_page_orig,\n\t\t\t   clear_page_rep, X86_FEATURE_REP_GOOD,\n\t\t\t   clear_page_erms, X86_FEATURE_ERMS,\n\t\t\t   \"=D\" (page),\n\t\t\t   \"D\" (page)\n\t\t\t   : \"cc\", \"memory\", \"rax\", \"rcx\");\n}\n";
        let c = CallChoice::parse(h, "clear_page", "page_64.h").expect("parsed");
        let set = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        let pick = |p: &[&str]| {
            builtin(equivalent(
                Arch::X86_64,
                Family::ClearPage,
                &[],
                Some(&c),
                &set(p),
            ))
        };
        assert_eq!(pick(&["erms", "rep_good"]), "erms");
        assert_eq!(pick(&["erms"]), "erms");
        assert_eq!(pick(&["rep_good"]), "rep");
        assert_eq!(pick(&["fsrm"]), "orig");
        assert_eq!(c.pick(&set(&[])).1, "no REP_GOOD, ERMS");
        // The order is the tree's: a tree listing ERMS first lets REP_GOOD win.
        let swapped = h.replace(
            "clear_page_rep, X86_FEATURE_REP_GOOD,\n\t\t\t   clear_page_erms, X86_FEATURE_ERMS,",
            "clear_page_erms, X86_FEATURE_ERMS,\n\t\t\t   clear_page_rep, X86_FEATURE_REP_GOOD,",
        );
        assert_ne!(swapped, h);
        let s = CallChoice::parse(&swapped, "clear_page", "h").expect("parsed");
        assert_eq!(s.pick(&set(&["erms", "rep_good"])).0, "clear_page_rep");
        // Not a plain call: no choice, and the family is unknown.
        assert!(
            CallChoice::parse(
                "void clear_page(void *p)\n{\n\tfoo(p);\n}\n",
                "clear_page",
                "h"
            )
            .is_none()
        );
        let e = equivalent(Arch::X86_64, Family::ClearPage, &[], None, &set(&["erms"]));
        assert!(matches!(e, Equivalent::Unknown { path, .. } if path == "clear_page"));
    }

    #[test]
    fn arm64_paths_from_its_alternatives_or_the_routine_as_linked() {
        let a64 = |family, applied: &[Applied]| {
            equivalent(Arch::Aarch64, family, applied, None, &BTreeSet::new())
        };
        // 6.12: no sites at all.
        assert_eq!(builtin(a64(Family::ClearPage, &[])), "dczva");
        assert_eq!(builtin(a64(Family::CopyPage, &[])), "ldp-stnp");
        // 6.1 copy_page: its prefetches under ARM64_HAS_NO_HW_PREFETCH.
        let prfm = [
            site("__pi_copy_page", 1, "has_no_hw_prefetch", true, None),
            site("__pi_copy_page", 2, "has_no_hw_prefetch", true, None),
        ];
        assert_eq!(builtin(a64(Family::CopyPage, &prfm)), "ldp-stnp-prfm");
        // 7.x: MOPS at the entry (alternative_if_not ARM64_HAS_MOPS).
        let mops = |f: &str, taken| [site(f, 1, "has_mops", taken, None)];
        assert_eq!(
            builtin(a64(Family::ClearPage, &mops("__pi_clear_page", true))),
            "mops"
        );
        assert_eq!(
            builtin(a64(Family::ClearPage, &mops("__pi_clear_page", false))),
            "dczva"
        );
        assert_eq!(
            builtin(a64(Family::Memset, &mops("__pi_memset", true))),
            "mops"
        );
        assert_eq!(
            builtin(a64(Family::Memset, &mops("__pi_memset", false))),
            "generic"
        );
        // 7.x memcpy's MOPS path is CPYP (memmove-safe); the built-in mops
        // is forward-only CPYF: no built-in runs it.
        let e = a64(Family::Memcpy, &mops("__pi_memcpy", true));
        assert_eq!(
            e,
            Equivalent::Unknown {
                path: "memcpy+has_mops".into(),
                why: "HAS_MOPS".into()
            }
        );
    }
}
