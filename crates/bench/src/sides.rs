//! How the cells of different sides line up: by routine, size, chunk (and
//! the other run axes) and the *kernel path*, the built-in variant a
//! kernel routine follows (see [`SideInfo::path_of`]). A built-in side's
//! `memset orig` and a 6.12 kernel side's `memset kernel` (fallback
//! memset_orig, no FSRS) are the same row; so are the built-in and kernel
//! x86 `clear_page erms`. Pure: used by bench's ratio lines and compare.
use super::{Axes, BenchResult, Cell, SideInfo};
use crate::routines::Routine;
use crate::stats::Summary;
use crate::vmm::memory::Backing;

/// The key two sides' cells are matched on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct PathKey {
    pub routine: Routine,
    /// The kernel path, named as a built-in variant.
    pub path: String,
    pub shape: super::Shape,
    pub chunk: u64,
    pub order: super::Order,
    pub fill: super::PageState,
    pub backing: Backing,
}

impl PathKey {
    /// The key of a cell of `side`: by kernel path when built-in and
    /// kernel sides are matched (`by_path`), else by variant name (two
    /// kernel trees: memset `kernel` against memset `kernel`, whatever
    /// path each takes).
    pub(crate) fn of(side: &SideInfo, a: &Axes, by_path: bool) -> PathKey {
        PathKey {
            routine: a.routine,
            path: if by_path {
                side.path_of(a)
            } else {
                a.variant.clone()
            },
            shape: a.shape,
            chunk: a.chunk,
            order: a.order,
            fill: a.fill,
            backing: a.backing,
        }
    }

    /// "memset -s 4MB -k 4KB forward populate anon, path orig".
    pub(crate) fn label(&self) -> String {
        let a = Axes {
            routine: self.routine,
            variant: format!("path {}", self.path),
            side: 0,
            config: crate::blob::LinkConfig::Vanilla,
            chunk: self.chunk,
            order: self.order,
            fill: self.fill,
            backing: self.backing,
            shape: self.shape,
        };
        a.label_with(false)
    }
}

/// The cells of side `side`, keyed by [`PathKey`].
pub(crate) fn by_path(r: &BenchResult, side: usize) -> Vec<(PathKey, &Cell)> {
    let info = r.sides.get(side).cloned();
    let by_path = mixed(r);
    r.cells
        .iter()
        .filter(|c| c.axes.side == side)
        .filter_map(|c| info.as_ref().map(|i| (PathKey::of(i, &c.axes, by_path), c)))
        .collect()
}

/// Whether the sides' paths differ from their variant names (a kernel
/// side beside a built-in one): then rows are matched by kernel path.
pub(crate) fn mixed(r: &BenchResult) -> bool {
    r.sides.iter().any(|s| s.is_builtin()) && r.sides.iter().any(|s| !s.is_builtin())
}

/// For a bench with several sides: each other side's median against the
/// first side's, cell by matching cell (no threshold; `compare FILE` gives
/// the session-paired test and its interval).
pub fn ratio_lines(r: &BenchResult, unit: crate::units::Rate) -> Vec<String> {
    if r.sides.len() < 2 {
        return Vec::new();
    }
    let base = by_path(r, 0);
    let median = |s: &Option<Summary>| s.as_ref().map(|s| s.median);
    let mut out = vec![format!(
        "side ratios (median guest {}, other side / {}; rows matched by routine, size, chunk and {}):",
        unit.label(),
        r.sides[0].name,
        if mixed(r) {
            "kernel path (the built-in variant the kernel routine follows)"
        } else {
            "variant"
        }
    )];
    for (j, side) in r.sides.iter().enumerate().skip(1) {
        let mut matched = 0;
        for (k, c) in by_path(r, j) {
            let Some((_, b)) = base.iter().find(|(bk, _)| *bk == k) else {
                continue;
            };
            matched += 1;
            let (Some(x), Some(y)) = (
                median(&c.guest_bytes_per_sec),
                median(&b.guest_bytes_per_sec),
            ) else {
                continue;
            };
            out.push(format!(
                "  {} {} / {} {}: {} / {} {} = {:.3}  [{}]",
                side.name,
                c.axes.variant,
                r.sides[0].name,
                b.axes.variant,
                unit.format(x),
                unit.format(y),
                unit.label(),
                x / y,
                k.label()
            ));
        }
        if matched == 0 {
            out.push(format!(
                "  {}: no cell matches one of {} (different routines, sizes or kernel paths)",
                side.name, r.sides[0].name
            ));
        }
    }
    out
}
