//! Every alternatives path of a kernel blob's routines: the feature
//! combinations that patch a routine into distinct code, so that `run` and
//! `verify` check each path the kernel may take on some CPU, not only the
//! one this host's kernel picked (a patch changes them all).
//!
//! A routine family's sites are the alternatives inside its functions
//! (`memset`, `memset_orig`, `__memcpy`, `copy_page_regs`, ...). Each subset
//! of the features those sites test is applied to a copy of the image and
//! the patched bytes of the sites compared: subsets giving the same bytes
//! are one path, named by its smallest subset.
use super::alternatives::{AltError, Applied, FeatureNames, Image};
use super::routines::FAMILIES;
use crate::arch::Family;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// More features than this in one family means 2^n trial patchings; no
/// kernel routine comes near it (x86 6.1 memset: two).
const MAX_FEATURES: usize = 8;

/// Whether the guest CPU can execute a path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "runs", rename_all = "snake_case")]
pub enum Runnable {
    Yes,
    /// Its instructions need a feature the guest CPU lacks.
    No {
        reason: String,
    },
}

/// One distinct way a family's alternatives can be patched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AltPath {
    pub family: Family,
    /// The features taken as present for the family's sites (every other
    /// one absent); `always` features are always present.
    pub features: BTreeSet<String>,
    /// What the family's sites do on this path, e.g. `FSRS alternative`
    /// or `fallback memset_orig (no FSRS)`; several sites joined by `; `.
    pub label: String,
    /// The alternatives sites of the family (0: nothing to choose).
    pub sites: usize,
    /// The path the host kernel itself takes (`--alternatives host`).
    pub host_pick: bool,
    pub runnable: Runnable,
}

/// A kernel function's name without its leading underscores and arm64's
/// `__pi_` (`__memset` -> `memset`, `__pi_clear_page` -> `clear_page`).
pub(crate) fn bare_name(function: &str) -> &str {
    let f = function.trim_start_matches('_');
    f.strip_prefix("pi_").unwrap_or(f)
}

/// The family a kernel function belongs to: its name, or its name plus a
/// suffix (`memset_orig`, `copy_page_regs`, `clear_page_erms`), leading
/// underscores and arm64's `__pi_` dropped; `clear_pages` (x86 7.x's
/// `__clear_pages_unrolled`, the inline shim's `clear_pages_inline`) is
/// clear_page's family, whose variants it shares.
pub fn family_of(function: &str) -> Option<Family> {
    let f = bare_name(function);
    let pages = f
        .strip_prefix("clear_pages")
        .map(|rest| format!("clear_page{rest}"));
    let f = pages.as_deref().unwrap_or(f);
    FAMILIES
        .into_iter()
        .filter(|fam| {
            let fam = fam.name();
            f == fam || f.strip_prefix(fam).is_some_and(|r| r.starts_with('_'))
        })
        .max_by_key(|fam| fam.name().len())
}

/// Features that only say how fast instructions every CPU of the
/// architecture has are (x86 `rep movs/stos`; arm64 prefetch hints): a path
/// taking them runs anywhere. Any other feature's path needs the guest to
/// have it (arm64 MOPS: its instructions are undefined without FEAT_MOPS).
const SPEED_HINTS: &[&str] = &[
    "erms",
    "fsrm",
    "fsrs",
    "fzrm",
    "rep_good",
    "has_no_hw_prefetch",
];

fn is_always(feature: &str) -> bool {
    feature.starts_with("always")
}

/// The features every path has (x86 `ALWAYS`, arm64 `ALWAYS_BOOT` /
/// `ALWAYS_SYSTEM`), as named by `names`.
pub fn always(names: &FeatureNames) -> BTreeSet<String> {
    names
        .names
        .values()
        .filter(|f| is_always(f))
        .cloned()
        .collect()
}

/// Whether a path taking `features` runs on a guest whose features are
/// `guest` (names as in [`FeatureNames`]).
pub fn runnable(features: &BTreeSet<String>, guest: &BTreeSet<String>) -> Runnable {
    let missing: Vec<String> = features
        .iter()
        .filter(|f| !is_always(f) && !SPEED_HINTS.contains(&f.as_str()) && !guest.contains(*f))
        .map(|f| f.to_uppercase())
        .collect();
    if missing.is_empty() {
        Runnable::Yes
    } else {
        Runnable::No {
            reason: format!(
                "the guest CPU lacks {}, which this path's instructions need",
                missing.join(", ")
            ),
        }
    }
}

/// The sites' patched bytes of `family` in `img` (the key paths are told
/// apart by).
fn site_bytes(img: &Image, sites: &[usize]) -> Vec<u8> {
    let mut out = Vec::new();
    for &i in sites {
        let s = &img.sites[i];
        let from = s.orig.saturating_sub(img.base) as usize;
        if let Some(b) = img.bytes.get(from..from + usize::from(s.orig_len)) {
            out.extend_from_slice(b);
        }
    }
    out
}

/// What [`enumerate`] needs besides the image.
pub struct Decisions<'a> {
    pub names: &'a FeatureNames,
    /// `--alternatives host`'s features.
    pub host: &'a BTreeSet<String>,
    /// The guest CPU's features (for [`runnable`]).
    pub guest: &'a BTreeSet<String>,
}

/// Every distinct path of every family in `img` (return sites already
/// patched, alternatives not yet applied), the host's pick first within a
/// family. A family without sites has one path with an empty label.
pub fn enumerate(img: &Image, d: &Decisions) -> Result<Vec<AltPath>, AltError> {
    let mut by_family: BTreeMap<Family, Vec<usize>> = BTreeMap::new();
    for (i, s) in img.sites.iter().enumerate() {
        if let Some(fam) = img.function_at(s.orig).and_then(family_of)
            && !s.callback
        {
            by_family.entry(fam).or_default().push(i);
        }
    }
    let mut out = Vec::new();
    for fam in FAMILIES {
        let sites = by_family.get(&fam).cloned().unwrap_or_default();
        out.extend(family_paths(img, d, fam, &sites)?);
    }
    Ok(out)
}

/// A path's name: per patched location, its last alternative taken (as
/// the kernel, ALTERNATIVE_2's later entry wins), else the fallback and
/// every feature it lacks: `fallback memset_orig (no REP_GOOD, ERMS)`.
fn label(img: &Image, applied: &[Applied], sites: &[usize]) -> String {
    let strip = |s: &str| s.split_once(": ").map_or(s, |(_, rest)| rest).to_string();
    let mut places: Vec<u64> = sites.iter().map(|&i| img.sites[i].orig).collect();
    places.dedup();
    let mut parts = Vec::new();
    for at in places {
        let here: Vec<&Applied> = sites
            .iter()
            .filter(|&&i| img.sites[i].orig == at)
            .map(|&i| &applied[i])
            .collect();
        if let Some(a) = here.iter().rev().find(|a| a.taken) {
            parts.push(strip(&a.summary));
            continue;
        }
        let first = strip(&here[0].summary);
        let lacks: Vec<&str> = here
            .iter()
            .filter_map(|a| a.summary.rsplit_once(" (no ")?.1.strip_suffix(')'))
            .collect();
        match first.rsplit_once(" (no ") {
            Some((base, _)) => parts.push(format!("{base} (no {})", lacks.join(", "))),
            None => parts.push(first),
        }
    }
    // Places patched alike (x86 7.x: clear_page's and clear_pages' copies
    // of the inline site) are named once.
    let mut unique: Vec<String> = Vec::new();
    for p in parts {
        if !unique.contains(&p) {
            unique.push(p);
        }
    }
    unique.join("; ")
}

/// The subsets of `feats` in order of size, then of their members.
fn subsets(feats: &[String]) -> Vec<BTreeSet<String>> {
    let mut masks: Vec<u32> = (0..1u32 << feats.len()).collect();
    masks.sort_by_key(|m| (m.count_ones(), m.reverse_bits()));
    masks
        .into_iter()
        .map(|m| {
            (0..feats.len())
                .filter(|b| m & (1 << b) != 0)
                .map(|b| feats[b].clone())
                .collect()
        })
        .collect()
}

fn family_paths(
    img: &Image,
    d: &Decisions,
    fam: Family,
    sites: &[usize],
) -> Result<Vec<AltPath>, AltError> {
    let feats: BTreeSet<String> = sites
        .iter()
        .map(|&i| d.names.name(img.sites[i].feature))
        .filter(|f| !is_always(f))
        .collect();
    let feats: Vec<String> = feats.into_iter().collect();
    if feats.len() > MAX_FEATURES {
        return Err(AltError::TooManyFeatures {
            family: fam,
            count: feats.len(),
            max: MAX_FEATURES,
        });
    }
    let always = always(d.names);
    let patch = |present: &BTreeSet<String>| -> Result<(Vec<u8>, String), AltError> {
        let mut trial = img.clone();
        let applied = trial.apply(d.names, present)?;
        Ok((site_bytes(&trial, sites), label(img, &applied, sites)))
    };
    let host: BTreeSet<String> = d
        .host
        .iter()
        .filter(|f| feats.contains(f))
        .cloned()
        .collect();
    let (host_key, _) = patch(&d.host.union(&always).cloned().collect())?;
    let mut seen: BTreeSet<Vec<u8>> = BTreeSet::new();
    let mut paths = Vec::new();
    for subset in subsets(&feats) {
        let (key, label) = patch(&subset.union(&always).cloned().collect())?;
        if !seen.insert(key.clone()) {
            continue;
        }
        let host_pick = key == host_key;
        // The host's pick is named by the host's own features.
        let features = if host_pick { host.clone() } else { subset };
        paths.push(AltPath {
            family: fam,
            runnable: runnable(&features, d.guest),
            features,
            label,
            sites: sites.len(),
            host_pick,
        });
    }
    paths.sort_by_key(|p| !p.host_pick);
    Ok(paths)
}

/// One load of the blob: the path of each family it verifies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Load {
    pub paths: Vec<AltPath>,
    /// x86 clear_page: the variant (`erms`, `rep`, `orig`) the host
    /// kernel's alternative_call_2 picks, to mark its row.
    pub clear_page_pick: Option<&'static str>,
}

impl Load {
    /// The path of `family` this load verifies (`None`: not verified here).
    pub fn verifies(&self, family: Family) -> Option<&AltPath> {
        self.paths.iter().find(|p| p.family == family)
    }

    /// Runnable unless one of its paths is not (such a path is a load of
    /// its own, see [`loads`]).
    pub fn runnable(&self) -> Runnable {
        self.paths
            .iter()
            .map(|p| p.runnable.clone())
            .find(|r| *r != Runnable::Yes)
            .unwrap_or(Runnable::Yes)
    }

    /// The name of `family`'s path here: `FSRS alternative`, the host
    /// kernel's pick marked `[host pick]` (`None`: not verified here, or
    /// no alternatives).
    pub fn path_name(&self, family: Family) -> Option<String> {
        let p = self.verifies(family).filter(|p| p.sites > 0)?;
        Some(match p.host_pick {
            true => format!("{} [host pick]", p.label),
            false => p.label.clone(),
        })
    }

    /// A row's variant as tables show it: `kernel: FSRS alternative`, the
    /// host kernel's pick marked `[host pick]`; a family without
    /// alternatives keeps its name.
    pub fn row_name(&self, family: Family, variant: &str) -> String {
        let path = self.verifies(family).filter(|p| p.sites > 0);
        let by_variant = self.clear_page_pick.filter(|_| family == Family::ClearPage);
        if path.is_none() && by_variant.is_none() {
            return variant.to_string();
        }
        let mut name = variant.to_string();
        if let Some(p) = path {
            name = format!("{name}: {}", p.label);
        }
        let pick = path.is_none_or(|p| p.host_pick) && by_variant.is_none_or(|v| v == variant);
        if pick {
            name.push_str(" [host pick]");
        }
        name
    }
}

/// Group the paths (each family's host pick first, as [`enumerate`] lists
/// them) into as few loads as can carry them: load 0 has every family's
/// host pick (today's single load), load k every family's k-th other path.
/// A path the guest cannot run is a load of its own, never booted (its
/// rows are SKIP with the reason).
pub fn loads(paths: &[AltPath], clear_page_pick: Option<&'static str>) -> Vec<Load> {
    let mut runs: Vec<Vec<AltPath>> = vec![Vec::new()];
    let mut alone: Vec<Vec<AltPath>> = Vec::new();
    let mut next: BTreeMap<Family, usize> = BTreeMap::new();
    for p in paths {
        if p.runnable != Runnable::Yes {
            alone.push(vec![p.clone()]);
        } else if p.host_pick {
            runs[0].push(p.clone());
        } else {
            // Load 0 unless it has the family's pick (one the guest cannot
            // run is SKIP, alone).
            let k = next
                .entry(p.family)
                .or_insert_with(|| usize::from(runs[0].iter().any(|q| q.family == p.family)));
            if runs.len() <= *k {
                runs.push(Vec::new());
            }
            runs[*k].push(p.clone());
            *k += 1;
        }
    }
    runs.into_iter()
        .chain(alone)
        .filter(|l| !l.is_empty())
        .map(|paths| Load {
            paths,
            clear_page_pick,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alternatives::Layout;
    use crate::alternatives::tests::{FSRS, MemsetObject, memset_object, names};

    fn set(l: &[&str]) -> BTreeSet<String> {
        l.iter().map(|s| s.to_string()).collect()
    }

    fn memset_paths(
        two: bool,
        names: &FeatureNames,
        host: &[&str],
        guest: &[&str],
    ) -> Vec<AltPath> {
        let elf = memset_object(&MemsetObject::rep_stosb(Layout::X86FtFlags, two));
        let mut img = Image::from_elf(&elf, None).unwrap();
        img.patch_returns().unwrap();
        let d = Decisions {
            names,
            host: &set(host),
            guest: &set(guest),
        };
        enumerate(&img, &d)
            .unwrap()
            .into_iter()
            .filter(|p| p.family == Family::Memset)
            .collect()
    }

    #[test]
    fn functions_belong_to_their_family() {
        for (f, fam) in [
            ("memset", Some(Family::Memset)),
            ("__memset", Some(Family::Memset)),
            ("memset_orig", Some(Family::Memset)),
            ("__pi_memcpy", Some(Family::Memcpy)),
            ("memcpy_orig", Some(Family::Memcpy)),
            ("copy_page_regs", Some(Family::CopyPage)),
            ("clear_page_erms", Some(Family::ClearPage)),
            ("__clear_pages_unrolled", Some(Family::ClearPage)),
            ("clear_pages_inline", Some(Family::ClearPage)),
            ("clear_pagesx", None),
            ("rep_stos_alternative", None),
            ("memmove", None),
            ("memsetx", None),
        ] {
            assert_eq!(family_of(f), fam, "{f}");
        }
    }

    #[test]
    fn one_site_gives_two_paths_the_host_pick_first() {
        let n = names();
        // Host without FSRS: the fallback is its pick.
        let p = memset_paths(false, &n, &["always"], &[]);
        assert_eq!(p.len(), 2, "{p:?}");
        assert_eq!(p[0].label, "fallback memset_orig (no FSRS)");
        assert!(p[0].host_pick && p[0].features.is_empty());
        assert_eq!(p[1].label, "FSRS alternative");
        assert!(!p[1].host_pick && p[1].features == set(&["fsrs"]));
        // FSRS only says `rep stosb` is fast: runnable on a guest without it.
        assert!(
            p.iter()
                .all(|p| p.runnable == Runnable::Yes && p.sites == 1)
        );
        // Host with FSRS: the alternative is its pick, listed first.
        let p = memset_paths(false, &n, &["fsrs", "erms"], &[]);
        assert_eq!(p[0].label, "FSRS alternative");
        assert!(p[0].host_pick && p[0].features == set(&["fsrs"]));
        assert!(!p[1].host_pick);
    }

    #[test]
    fn feature_sets_with_the_same_bytes_are_one_path() {
        // FSRS and !ERMS at one site with the same replacement: {}, {fsrs}
        // and {erms, fsrs} patch the same bytes; {erms} keeps the jmp.
        let p = memset_paths(true, &names(), &[], &[]);
        assert_eq!(p.len(), 2, "{p:?}");
        assert_eq!(p[0].features, set(&[]));
        assert_eq!(p[1].features, set(&["erms"]));
        assert_eq!(p[1].label, "fallback memset_orig (no FSRS, !ERMS)");
        assert_eq!(p[0].label, "!ERMS alternative");
        assert_eq!(p[0].sites, 2);
        // Every other family of the object has no sites: one empty path.
        let elf = memset_object(&MemsetObject::rep_stosb(Layout::X86FtFlags, true));
        let img = Image::from_elf(&elf, None).unwrap();
        let n = names();
        let empty = BTreeSet::new();
        let d = Decisions {
            names: &n,
            host: &empty,
            guest: &empty,
        };
        let all = enumerate(&img, &d).unwrap();
        let others: Vec<_> = all.iter().filter(|p| p.family != Family::Memset).collect();
        assert_eq!(others.len(), 3);
        assert!(
            others
                .iter()
                .all(|p| p.sites == 0 && p.host_pick && p.label.is_empty())
        );
    }

    #[test]
    fn a_path_needing_a_missing_instruction_feature_is_not_runnable() {
        // The site's feature named as an arm64 instruction feature.
        let n = FeatureNames {
            names: [(FSRS, "has_mops".to_string())].into(),
        };
        let p = memset_paths(false, &n, &[], &[]);
        let mops = p.iter().find(|p| p.features == set(&["has_mops"])).unwrap();
        assert!(matches!(&mops.runnable, Runnable::No { reason } if reason.contains("HAS_MOPS")));
        assert_eq!(p.iter().filter(|p| p.runnable == Runnable::Yes).count(), 1);
        let p = memset_paths(false, &n, &[], &["has_mops"]);
        assert!(p.iter().all(|p| p.runnable == Runnable::Yes));
        assert_eq!(
            runnable(&set(&["always", "rep_good", "erms"]), &set(&[])),
            Runnable::Yes
        );
    }

    /// A relocatable arm64 object: `__pi_memset` whose first instruction
    /// (`nop`) an ARM64_HAS_MOPS alternative replaces (by a MOPS `setp`).
    fn arm64_mops_object() -> Vec<u8> {
        use object::write::{Object as WObject, Relocation, Symbol, SymbolSection};
        use object::{
            Architecture, BinaryFormat, Endianness, RelocationFlags, SectionKind, SymbolFlags,
            SymbolKind, SymbolScope,
        };
        let mut o = WObject::new(BinaryFormat::Elf, Architecture::Aarch64, Endianness::Little);
        let text = o.add_section(vec![], b".text".to_vec(), SectionKind::Text);
        let nop_ret: Vec<u8> = [0xd503_201fu32, 0xd65f_03c0]
            .iter()
            .flat_map(|i| i.to_le_bytes())
            .collect();
        o.append_section_data(text, &nop_ret, 4);
        o.add_symbol(Symbol {
            name: b"__pi_memset".to_vec(),
            value: 0,
            size: 8,
            kind: SymbolKind::Text,
            scope: SymbolScope::Linkage,
            weak: false,
            section: SymbolSection::Section(text),
            flags: SymbolFlags::None,
        });
        let repl = o.add_section(vec![], b".altinstr_replacement".to_vec(), SectionKind::Text);
        o.append_section_data(repl, &0x19c0_0401u32.to_le_bytes(), 4);
        let alt = o.add_section(
            vec![],
            b".altinstructions".to_vec(),
            SectionKind::ReadOnlyData,
        );
        let mut e = vec![0u8; 8];
        e.extend(38u16.to_le_bytes());
        e.extend([4, 4]);
        o.append_section_data(alt, &e, 1);
        for (offset, sec) in [(0, text), (4, repl)] {
            let symbol = o.section_symbol(sec);
            o.add_relocation(
                alt,
                Relocation {
                    offset,
                    symbol,
                    addend: 0,
                    flags: RelocationFlags::Elf {
                        r_type: object::elf::R_AARCH64_PREL32,
                    },
                },
            )
            .unwrap();
        }
        o.write().unwrap()
    }

    #[test]
    fn arm64_mops_path_is_skip_without_feat_mops() {
        let img = Image::from_elf(&arm64_mops_object(), None).unwrap();
        assert_eq!(img.sites.len(), 1, "{:?}", img.sites);
        let n = FeatureNames::parse_arm64("#define ARM64_HAS_MOPS\t\t38\n");
        let paths = |host: &[&str], guest: &[&str]| {
            let d = Decisions {
                names: &n,
                host: &set(host),
                guest: &set(guest),
            };
            let all = enumerate(&img, &d).unwrap();
            all.into_iter()
                .filter(|p| p.family == Family::Memset)
                .collect::<Vec<_>>()
        };
        // A host with MOPS picks it; a guest without FEAT_MOPS cannot run it.
        let p = paths(&["has_mops"], &[]);
        assert_eq!(p.len(), 2, "{p:?}");
        assert_eq!(p[0].label, "HAS_MOPS alternative");
        assert!(p[0].host_pick && matches!(p[0].runnable, Runnable::No { .. }));
        assert_eq!(p[1].label, "original instructions (no HAS_MOPS)");
        assert_eq!(p[1].runnable, Runnable::Yes);
        // Its own load, SKIP; the other path takes its place in load 0.
        let l = loads(&p, None);
        assert_eq!(l.len(), 2, "{l:?}");
        assert_eq!(l[0].paths[0].label, "original instructions (no HAS_MOPS)");
        assert_eq!(
            l[0].row_name(Family::Memset, "kernel"),
            "kernel: original instructions (no HAS_MOPS)"
        );
        assert!(matches!(l[1].runnable(), Runnable::No { reason } if reason.contains("HAS_MOPS")));
        assert!(
            paths(&[], &["has_mops"])
                .iter()
                .all(|p| p.runnable == Runnable::Yes)
        );
    }

    fn path(family: Family, label: &str, host_pick: bool, runnable: Runnable) -> AltPath {
        AltPath {
            family,
            features: BTreeSet::new(),
            label: label.into(),
            sites: 1,
            host_pick,
            runnable,
        }
    }

    #[test]
    fn loads_carry_one_path_per_family_and_mark_the_pick() {
        let no = Runnable::No { reason: "r".into() };
        let paths = [
            path(Family::Memset, "orig", true, Runnable::Yes),
            path(Family::Memset, "fsrs", false, Runnable::Yes),
            path(Family::Memcpy, "fsrm", true, Runnable::Yes),
            path(Family::Memcpy, "orig", false, Runnable::Yes),
            path(Family::Memcpy, "mops", false, no.clone()),
            path(Family::CopyPage, "rep", true, Runnable::Yes),
        ];
        let l = loads(&paths, Some("erms"));
        assert_eq!(l.len(), 3, "{l:?}");
        let labels = |l: &Load| l.paths.iter().map(|p| p.label.clone()).collect::<Vec<_>>();
        assert_eq!(labels(&l[0]), ["orig", "fsrm", "rep"]);
        assert_eq!(labels(&l[1]), ["fsrs", "orig"]);
        assert_eq!(labels(&l[2]), ["mops"]);
        assert_eq!(
            (l[1].runnable(), l[2].runnable()),
            (Runnable::Yes, no.clone())
        );
        assert!(l[1].verifies(Family::CopyPage).is_none());
        assert_eq!(
            l[0].row_name(Family::Memset, "kernel"),
            "kernel: orig [host pick]"
        );
        assert_eq!(l[1].row_name(Family::Memset, "kernel"), "kernel: fsrs");
        assert_eq!(
            l[0].path_name(Family::Memcpy).as_deref(),
            Some("fsrm [host pick]")
        );
        assert_eq!(l[1].path_name(Family::CopyPage), None);
        // x86 clear_page: three routines, the one alternative_call_2 picks marked.
        assert_eq!(l[0].row_name(Family::ClearPage, "erms"), "erms [host pick]");
        assert_eq!(l[0].row_name(Family::ClearPage, "rep"), "rep");
        // An unrunnable pick: the family's next path joins load 0.
        let odd = [
            path(Family::Memset, "mops", true, no.clone()),
            path(Family::Memset, "orig", false, Runnable::Yes),
            path(Family::Memcpy, "fsrm", true, Runnable::Yes),
        ];
        let l = loads(&odd, None);
        assert_eq!(l.len(), 2, "{l:?}");
        assert_eq!(labels(&l[0]), ["orig", "fsrm"]);
        assert_eq!(labels(&l[1]), ["mops"]);
        let plain = loads(&paths, None);
        assert_eq!(plain[0].row_name(Family::ClearPage, "kernel"), "kernel");
    }
}
