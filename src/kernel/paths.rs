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
use super::alternatives::{AltError, FeatureNames, Image};
use super::routines::FAMILIES;
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
    /// One of [`FAMILIES`].
    pub family: &'static str,
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

/// The family a kernel function belongs to: its name, or its name plus a
/// suffix (`memset_orig`, `copy_page_regs`, `clear_page_erms`), leading
/// underscores and arm64's `__pi_` dropped.
pub fn family_of(function: &str) -> Option<&'static str> {
    let f = function.trim_start_matches('_');
    let f = f.strip_prefix("pi_").unwrap_or(f);
    FAMILIES
        .iter()
        .copied()
        .filter(|fam| f == *fam || f.strip_prefix(fam).is_some_and(|r| r.starts_with('_')))
        .max_by_key(|fam| fam.len())
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
    let mut by_family: BTreeMap<&'static str, Vec<usize>> = BTreeMap::new();
    for (i, s) in img.sites.iter().enumerate() {
        if let Some(fam) = img.function_at(s.orig).and_then(family_of)
            && !s.callback
        {
            by_family.entry(fam).or_default().push(i);
        }
    }
    let mut out = Vec::new();
    for fam in FAMILIES {
        let sites = by_family.get(fam).cloned().unwrap_or_default();
        out.extend(family_paths(img, d, fam, &sites)?);
    }
    Ok(out)
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
    fam: &'static str,
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
            family: fam.to_string(),
            count: feats.len(),
            max: MAX_FEATURES,
        });
    }
    let always: BTreeSet<String> = d
        .names
        .names
        .values()
        .filter(|f| is_always(f))
        .cloned()
        .collect();
    let patch = |present: &BTreeSet<String>| -> Result<(Vec<u8>, String), AltError> {
        let mut trial = img.clone();
        let applied = trial.apply(d.names, present)?;
        let label: Vec<&str> = sites
            .iter()
            .map(|&i| {
                let s = applied[i].summary.as_str();
                s.split_once(": ").map_or(s, |(_, rest)| rest)
            })
            .collect();
        Ok((site_bytes(&trial, sites), label.join("; ")))
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
    pub fn verifies(&self, family: &str) -> Option<&AltPath> {
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

    /// A row's variant as tables show it: `kernel: FSRS alternative`, the
    /// host kernel's pick marked `[host pick]`; a family without
    /// alternatives keeps its name.
    pub fn row_name(&self, family: &str, variant: &str) -> String {
        let path = self.verifies(family).filter(|p| p.sites > 0);
        let by_variant = self.clear_page_pick.filter(|_| family == "clear_page");
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

/// Group the paths into as few loads as can carry them: load 0 has every
/// family's host pick (today's single load), load k every family's k-th
/// other path. A path the guest cannot run is a load of its own, never
/// booted (its rows are SKIP with the reason).
pub fn loads(paths: &[AltPath], clear_page_pick: Option<&'static str>) -> Vec<Load> {
    let mut runs: Vec<Vec<AltPath>> = vec![Vec::new()];
    let mut alone: Vec<Vec<AltPath>> = Vec::new();
    let mut next: BTreeMap<&str, usize> = BTreeMap::new();
    for p in paths {
        if p.runnable != Runnable::Yes {
            alone.push(vec![p.clone()]);
        } else if p.host_pick {
            runs[0].push(p.clone());
        } else {
            let k = next.entry(p.family).or_insert(1);
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
