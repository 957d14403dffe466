//! The verification suite: which checks to run, and running them on a VM.
use crate::arch;
use crate::blob::LinkConfig;
use crate::checker::{
    self, Breakdown, Expect, GUARD, How, Known, Patterns, Placement, Refill, SourceCheck,
};
use crate::error::{Error, Result, VmmError};
pub use crate::record::{CheckRecord, Edge, RowKey, Rows, Totals, Verdict};
use crate::routines::{self, Call, Kind, Routine, VariantDef};
use crate::stray;
use crate::vmm::{Breach, CallResult, Command, GuestFailure, Vm};
use hypclear_abi::{self as abi, PAGE_SIZE};
use serde::Serialize;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// Byte sizes every memset/memcpy variant is checked at.
pub(crate) const SIZES: &[u64] = &[
    0,
    1,
    7,
    8,
    15,
    16,
    63,
    64,
    65,
    255,
    4095,
    4096,
    4097,
    (2 << 20) - 1,
    2 << 20,
    (2 << 20) + 1,
];
/// Larger sizes, checked at a few destination offsets only.
pub const LARGE_SIZES: &[u64] = &[(8 << 20) + 1, 32 << 20];
pub(crate) const LARGE_DST_OFFSETS: &[u64] = &[0, 1, 31, 63];
/// Above [`FULL_MAX`], every residue mod 64 at each of these magnitudes
/// (`base + r`, r in 0..64): a routine's tail handling picks its path by
/// the length mod 8, 16, 32 or 64, so no residue may go untested.
pub(crate) const RESIDUE_BASES: &[u64] = &[1 << 10, 4 << 10, 64 << 10, 2 << 20];
/// Each residue size runs at dst+0 ([`residue_sizes`]): no head alignment
/// shifts the residue its tail sees. Those up to this size also run at a
/// spread placement (every destination offset once per magnitude).
const RESIDUE_SPREAD_MAX: u64 = (64 << 10) + 63;
/// Above 32 MiB, in every geometry: past the kernel's 32 MiB batch
/// (PROCESS_PAGES_NON_PREEMPT_BATCH) by a page and an odd residue, one
/// check per variant at a misaligned destination and source. Just past
/// it rather than at 64 MiB: a copy there would double the guest RAM the
/// suite touches (target and source) for one check. SKIP with the
/// `--mem` it needs where guest RAM is smaller.
pub const HUGE_SIZES: &[u64] = &[(32 << 20) + 4096 + 37];
/// `--geometry full`: above 4 GiB, where a 32-bit count wraps (SKIP with
/// the `--mem` it needs: the default guest RAM is far smaller).
pub const FULL_HUGE_SIZES: &[u64] = &[(4 << 30) + 37];
/// The (destination, source) offsets of [`HUGE_SIZES`] and
/// [`FULL_HUGE_SIZES`].
const HUGE_OFFSETS: (u64, u64) = (63, 1);
/// Random sizes each run, drawn from the seed ([`random_sizes`]).
pub const RANDOM_SIZES: usize = 16;
/// The range random sizes are drawn from (log-uniform: every magnitude
/// alike).
const RANDOM_MIN: u64 = FULL_MAX + 1;
const RANDOM_MAX: u64 = 8 << 20;
/// The built-in memcpy sizes up to this cross every destination offset
/// with every source offset (`--geometry full`); a larger one pairs each
/// destination offset with source 0 and one other in turn, so it still
/// meets every offset of either side. quick crosses them up to
/// [`QUICK_PAIRED_MAX`]: every pair at 4095..4097, where each copy's main
/// loop already runs 64 times, and each offset of either side at 2 MiB
/// and up (every pair at 2 MiB was 6 of the 12.5 GB a configuration's
/// checker read, and half its guest time).
const PAIRED_MAX: u64 = (8 << 20) + 1;
const QUICK_PAIRED_MAX: u64 = 4097;

/// The largest listed memcpy size that crosses every destination offset
/// with every source offset in `geometry`.
fn paired_max(geometry: Geometry) -> u64 {
    match geometry {
        Geometry::Quick => QUICK_PAIRED_MAX,
        Geometry::Full => PAIRED_MAX,
    }
}
/// Source misalignments for memcpy.
pub(crate) const SRC_OFFSETS: &[u64] = &[0, 1, 8, 33, 63];
/// clear_pages page counts: a page, odd extents, a 2 MiB folio.
pub(crate) const CLEAR_PAGES_N: &[u64] = &[1, 2, 3, 512];
/// clear_pages extents the kernel's clear_contig_highpages() hands one call
/// (Linux 7.x), checked at offset 0 only: its 32 MiB non-preemptible batch
/// (PROCESS_PAGES_NON_PREEMPT_BATCH); `--geometry full` adds a 1 GiB folio
/// (SKIP with the reason where the arena is smaller).
pub(crate) const CLEAR_PAGES_EXTENTS: &[u64] = &[8192];
pub(crate) const FULL_CLEAR_PAGES_EXTENTS: &[u64] = &[262_144];
/// `--geometry full`: every size up to this, at every destination offset
/// below 64 (lib/tests/memcpy_kunit.c's 1..1024 sizes, every alignment).
pub(crate) const FULL_MAX: u64 = 1024;
/// `--geometry full`: clear_pages extents beside [`CLEAR_PAGES_N`] (odd
/// counts, and one page either side of a 2 MiB extent).
pub(crate) const FULL_CLEAR_PAGES_N: &[u64] = &[7, 13, 511, 513];
/// memmove: where the source starts relative to the target (within
/// `checker::SOURCE_DISTINCT`, so no overlapping byte equals its expected
/// value beforehand), backward and forward.
pub(crate) const OVERLAP_DELTAS: &[i64] =
    &[-64, -63, -33, -16, -8, -7, -1, 1, 7, 8, 16, 33, 63, 64];
/// memmove: the destination offsets overlapping copies run at.
pub(crate) const OVERLAP_DST_OFFSETS: &[u64] = &[0, 1, 63];
/// `--geometry full`: the largest page order the nVHE hypervisor's
/// allocator zeroes (`memset(addr, 0, PAGE_SIZE << order)`).
pub(crate) const FULL_MAX_ORDER: u32 = 9;

/// Edge checks (see [`Edge`]): target ends at a spread of size classes.
pub(crate) const EDGE_SIZES: &[u64] = &[1, 7, 63, 64, 4095, 4097, (64 << 10) + 1, (2 << 20) + 3];
/// Source starts against the hole (the source lies above it, where the
/// edge region has a little under 1 MiB).
pub(crate) const EDGE_START_SIZES: &[u64] = &[1, 63, 4095, 4097];

/// How much of each routine's argument space the suite covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Geometry {
    /// The built-in sizes and offsets, every residue mod 64 at 1 KiB,
    /// 4 KiB, 64 KiB and 2 MiB, the seed's random sizes, one size above
    /// 32 MiB; memset with 0, 0xff and the seeded fill byte (above 16 KiB,
    /// 0 and one of the others).
    #[default]
    Quick,
    /// Parity with the kernel's memcpy kunit test: memset and memcpy at
    /// every size 0..=1024 and every destination offset 0..63 (memcpy at
    /// every source offset too), the hypervisor's page-order sizes, odd
    /// clear_pages extents, a size above 4 GiB (where --mem allows), plus
    /// everything quick checks, memset with every fill at every size.
    Full,
}

/// The fill byte of a memset check (clear_page and clear_pages always
/// write zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fill {
    Zero,
    Ones,
    /// The run's seeded byte ([`Patterns::fill`]).
    Seeded,
}

impl Fill {
    pub fn byte(self, pats: &Patterns) -> u8 {
        let [zero, ones] = checker::FIXED_FILLS;
        match self {
            Fill::Zero => zero,
            Fill::Ones => ones,
            Fill::Seeded => pats.fill,
        }
    }

    /// The fills memset is verified with, in every geometry: zero (its own
    /// path on arm64: DC ZVA), 0xff (top bit set: a sign-extending byte
    /// expansion gets it wrong whatever the seed) and the seeded byte
    /// (never 0 or 0xff, see [`Patterns::new`]).
    pub(crate) const ALL: [Fill; 3] = [Fill::Zero, Fill::Ones, Fill::Seeded];

    /// The fills a memset of `len` bytes at `dst_offset` is verified with:
    /// every one in full and up to [`BATCH_MAX`] (batched: cheap); above
    /// it, quick pairs zero with 0xff or the seeded byte in turn (by the
    /// parity of size plus offset), so a large size still meets every
    /// offset at zero and at a non-zero byte, and both non-zero bytes,
    /// at two passes over the target instead of three.
    fn at(geometry: Geometry, len: u64, dst_offset: u64) -> &'static [Fill] {
        match geometry {
            Geometry::Quick if len > BATCH_MAX => match (len + dst_offset) % 2 {
                0 => &[Fill::Zero, Fill::Ones],
                _ => &[Fill::Zero, Fill::Seeded],
            },
            Geometry::Quick | Geometry::Full => &Fill::ALL,
        }
    }
}

/// One of a run's random memset/memcpy checks: a size and where it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct RandomSize {
    pub size: u64,
    pub dst_offset: u64,
    /// The source offset of the memcpy checks.
    pub src_offset: u64,
}

/// The run's [`RANDOM_SIZES`] random sizes, by size: a function of the
/// seed alone, so `--seed` reproduces them. Log-uniform in
/// [`RANDOM_MIN`]..[`RANDOM_MAX`] at random offsets 0..63.
pub fn random_sizes(seed: u64) -> Vec<RandomSize> {
    use rand_core::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x7369_7a65);
    let (lo, hi) = (RANDOM_MIN.ilog2(), RANDOM_MAX.ilog2());
    let mut out: Vec<RandomSize> = (0..RANDOM_SIZES)
        .map(|_| {
            // An octave below RANDOM_MAX, then a size uniform within it.
            let bits = lo + rng.next_u32() % (hi - lo);
            let size = (1u64 << bits) + rng.next_u64() % (1u64 << bits);
            RandomSize {
                size: size.clamp(RANDOM_MIN, RANDOM_MAX),
                dst_offset: rng.next_u64() % 64,
                src_offset: rng.next_u64() % 64,
            }
        })
        .collect();
    out.sort_unstable();
    out
}

/// One planned check.
#[derive(Debug, Clone, Copy)]
pub struct CheckSpec {
    pub routine: Routine,
    pub variant: &'static VariantDef,
    /// Bytes per call.
    pub len: u64,
    /// Consecutive calls (clear_page run over several pages).
    pub count: u64,
    pub dst_offset: u64,
    pub src_offset: Option<u64>,
    /// What memset writes (zero for the clearing routines; unused by copies).
    pub fill: Fill,
    /// memmove: the source at `dst + delta`, overlapping the target.
    pub overlap: Option<i64>,
    /// Call this (table, index) entry instead of the variant's alias (the
    /// selftest's deliberately broken routines).
    pub table: Option<(u64, u64)>,
    /// An edge check: a buffer against the unmapped page.
    pub edge: Option<Edge>,
}

impl CheckSpec {
    pub fn total(&self) -> u64 {
        self.len.saturating_mul(self.count)
    }

    /// What the check's target must hold after the call.
    pub fn expect(&self, pats: &Patterns) -> Expect {
        match self.overlap {
            Some(delta) => Expect::Move { delta },
            None => Expect::of(self.routine.kind(), self.fill.byte(pats)),
        }
    }

    /// The fill byte the record names (none for copies).
    fn fill_byte(&self, pats: &Patterns) -> Option<u8> {
        match self.expect(pats) {
            Expect::Byte(v) => Some(v),
            Expect::Source | Expect::Move { .. } => None,
        }
    }

    /// A copy reading the plan's shared source area (not its own).
    fn shares_source(&self) -> bool {
        self.routine.kind() == Kind::Copy && self.overlap.is_none() && self.edge.is_none()
    }
}

/// Which routines/variants to check.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub routines: Vec<Routine>,
    pub variants: Vec<String>,
    /// Sizes to check instead of the built-in lists (total bytes per check).
    pub sizes: Vec<u64>,
    pub geometry: Geometry,
    /// The run's seed: it draws the random sizes ([`random_sizes`]).
    pub seed: u64,
}

impl Filter {
    /// The run's random memset/memcpy sizes: none with `--size`.
    pub fn random_sizes(&self) -> Vec<RandomSize> {
        if self.sizes.is_empty() {
            random_sizes(self.seed)
        } else {
            Vec::new()
        }
    }

    /// Whether any memset or memcpy is selected.
    pub fn has_byte_routines(&self) -> bool {
        self.routines.is_empty()
            || self
                .routines
                .iter()
                .any(|r| matches!(r, Routine::Memset | Routine::Memcpy))
    }

    fn wants(&self, r: Routine, v: &routines::VariantDef) -> bool {
        (self.routines.is_empty() || self.routines.contains(&r))
            && (self.variants.is_empty() || self.variants.iter().any(|x| routines::is_named(v, x)))
    }
}

/// Arena bytes a check needs: guards, target (anywhere in the batch area
/// when batched), and a separate source.
pub fn footprint(spec: &CheckSpec) -> u64 {
    footprint_of(spec.routine.kind(), spec.total(), batchable(spec))
}

/// [`footprint`] of a check of `kind` over `total` bytes (`batched`: one
/// [`batchable`]). Saturating: a size near `u64::MAX` (`-s
/// 18446744073709551615` wrapped to a small footprint that "fit") gives
/// `u64::MAX`, which no arena holds.
fn footprint_of(kind: Kind, total: u64, batched: bool) -> u64 {
    let reach = if batched || kind == Kind::Copy {
        BATCH_AREA
    } else {
        0
    };
    let dst_window = sum(&[GUARD.next_multiple_of(PAGE_SIZE), 64, reach, total, GUARD]);
    let src = if kind == Kind::Copy {
        sum(&[PAGE_SIZE, total, 64, PAGE_SIZE])
    } else {
        0
    };
    sum(&[round_up(dst_window, PAGE_SIZE), src, PAGE_SIZE])
}

/// The saturating sum of sizes.
pub fn sum(parts: &[u64]) -> u64 {
    parts.iter().fold(0, |a: u64, &b| a.saturating_add(b))
}

/// `x` rounded up to a multiple of `m`, saturating at `u64::MAX`.
pub fn round_up(x: u64, m: u64) -> u64 {
    x.checked_next_multiple_of(m).unwrap_or(u64::MAX)
}

/// The smallest `--mem` (rounded up to 64 MiB: a figure to type) whose
/// arena holds `footprint` bytes (saturating).
pub fn mem_for(footprint: u64) -> u64 {
    round_up(
        sum(&[arch::ARENA_BASE - arch::RAM_BASE, footprint]),
        64 << 20,
    )
}

/// The largest `--size` verify accepts: no check of more fits the largest
/// guest RAM, and below it every size computation stays exact.
pub const MAX_SIZE: u64 = arch::MAX_RAM;

/// The largest memset/memcpy size `filter` checks in an arena of `arena`
/// bytes (its `--size` list, else the geometry's sizes that fit), and
/// the largest copy among them: what the host's copy source must cover.
pub fn largest_sizes(filter: &Filter, arena: u64) -> (u64, u64) {
    let mut largest = (0, 0);
    for routine in [Routine::Memset, Routine::Memcpy] {
        if !(filter.routines.is_empty() || filter.routines.contains(&routine)) {
            continue;
        }
        let kind = routine.kind();
        let fits = |len: &u64| {
            !filter.sizes.is_empty() || footprint_of(kind, *len, *len <= BATCH_MAX) <= arena
        };
        let top = byte_sizes(filter)
            .into_iter()
            .filter(fits)
            .max()
            .unwrap_or(0);
        largest.0 = largest.0.max(top);
        if kind == Kind::Copy {
            largest.1 = top;
        }
    }
    largest
}

/// Every memset/memcpy size of `filter` (some more than once), without
/// building its checks ([`byte_shapes`] of `--geometry full` are
/// hundreds of thousands).
fn byte_sizes(filter: &Filter) -> Vec<u64> {
    if !filter.sizes.is_empty() {
        return filter.sizes.clone();
    }
    let full = filter.geometry == Geometry::Full;
    let residues = RESIDUE_BASES.iter().map(|b| b + 63);
    let orders = (0..=FULL_MAX_ORDER)
        .map(|o| PAGE_SIZE << o)
        .filter(|_| full);
    let huge = FULL_HUGE_SIZES.iter().filter(|_| full);
    SIZES
        .iter()
        .chain(LARGE_SIZES)
        .chain(HUGE_SIZES)
        .chain(huge)
        .copied()
        .chain(residues)
        .chain(orders)
        .chain(filter.random_sizes().iter().map(|r| r.size))
        .collect()
}

/// Checks this small run in batches: up to `abi::BATCH_SLOTS` with one
/// exit, packed one after the other into the batch area.
const BATCH_MAX: u64 = 16 << 10;
/// Bytes of guest RAM a batch may span (see [`pack`]).
const BATCH_AREA: u64 = 4 << 20;
/// Guard between two packed checks. Packed windows touch, so the batch
/// area is covered end to end: a write past one check's guard lands in
/// the next one's and fails the run (naming the neighbour); the first and
/// last check of a batch keep the full [`GUARD`].
const SLOT_GUARD: u64 = 128;
const _: () =
    assert!(GUARD + (PAGE_SIZE + SLOT_GUARD + BATCH_MAX + SLOT_GUARD + 64) + GUARD <= BATCH_AREA);

fn batchable(spec: &CheckSpec) -> bool {
    spec.total() <= BATCH_MAX && spec.table.is_none() && spec.edge.is_none()
}

/// How far above its usual place a check may go (the end of the batch
/// area); a copy counts it too, since its source lies above every batch
/// ([`Layout::of`]).
fn reach(spec: &CheckSpec) -> u64 {
    if batchable(spec) || spec.routine.kind() == Kind::Copy {
        BATCH_AREA
    } else {
        0
    }
}

/// End of a check's destination window (target plus the guard after it),
/// wherever a batch puts it.
fn dst_window_end(spec: &CheckSpec) -> u64 {
    dst_address(spec) + reach(spec) + spec.total() + GUARD
}

/// The guest-physical address a check's target starts at when it runs
/// alone.
pub(crate) fn dst_address(spec: &CheckSpec) -> u64 {
    arch::ARENA_BASE + PAGE_SIZE + GUARD.next_multiple_of(PAGE_SIZE) + spec.dst_offset
}

/// Where the copies of a plan take their source from: one area above the
/// destination window of every check in the plan, holding the seeded
/// source stream by address (byte `src_base + i` holds
/// `Patterns::source[i]`). A copy with source offset `o` reads from
/// `src_base + o`, so the area is written once per VM rather than once per
/// check, and one comparison of the area vouches for every copy that read
/// it since.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Layout {
    pub src_base: u64,
    /// Bytes of the area the plan's copies read.
    pub src_len: u64,
    /// The page edge checks' buffers lie against (`arch::edge_hole`).
    pub hole: Option<u64>,
}

impl Layout {
    /// The layout of `specs` on a VM with `ram_size` bytes of RAM.
    pub fn on(specs: &[CheckSpec], ram_size: u64) -> Layout {
        Layout {
            hole: arch::edge_hole(ram_size),
            ..Layout::of(specs)
        }
    }

    pub fn of(specs: &[CheckSpec]) -> Layout {
        let copies = || specs.iter().filter(|s| s.shares_source());
        if copies().next().is_none() {
            return Layout::default();
        }
        // Above every copy and every batch (so no batch overlaps it).
        let above = |s: &&CheckSpec| s.shares_source() || batchable(s);
        Layout {
            src_base: specs
                .iter()
                .filter(above)
                .map(|s| dst_window_end(s).next_multiple_of(PAGE_SIZE) + PAGE_SIZE)
                .max()
                .unwrap_or(0),
            src_len: copies()
                .map(|s| s.src_offset.unwrap_or(0) + s.total())
                .max()
                .unwrap_or(0),
            hole: None,
        }
    }

    /// The shared source area as `[start, end)`.
    fn src_range(&self) -> (u64, u64) {
        (self.src_base, self.src_base + self.src_len)
    }

    /// Whether `p`'s destination window (with its guards) overlaps the
    /// source area: such a check overwrites the area.
    fn overlaps(&self, p: &Placement) -> bool {
        let (lo, hi) = p.window();
        self.src_len > 0 && lo < self.src_base + self.src_len && self.src_base < hi
    }
}

/// Where a check goes in the arena (the same place for every check, so
/// the memory stays warm); copies read from `layout`'s source area.
pub fn placement(spec: &CheckSpec, layout: &Layout) -> Placement {
    match (spec.edge, layout.hole) {
        (Some(edge), Some(hole)) => edge_placement(spec, edge, hole),
        _ => placement_at(spec, layout, dst_address(spec)),
    }
}

/// An edge check's buffers: the one the edge names against `hole`, the
/// other (a copy's) at the usual target place.
fn edge_placement(spec: &CheckSpec, edge: Edge, hole: u64) -> Placement {
    let (len, usual) = (spec.total(), dst_address(spec));
    let copy = spec.routine.kind() == Kind::Copy;
    let (dst, src) = match edge {
        Edge::TargetEnd => (hole - len, copy.then_some(usual)),
        Edge::SourceEnd => (usual, Some(hole - len)),
        Edge::SourceStart => (usual, Some(hole + PAGE_SIZE)),
    };
    Placement::new(dst, len, src, 0)
}

fn placement_at(spec: &CheckSpec, layout: &Layout, dst: u64) -> Placement {
    let src_index = usize::try_from(spec.src_offset.unwrap_or(0)).unwrap_or(usize::MAX);
    match spec.overlap {
        Some(delta) => {
            let mut p = Placement::new(
                dst,
                spec.total(),
                Some(dst.wrapping_add_signed(delta)),
                src_index,
            );
            p.moved = true;
            p
        }
        None => Placement::new(
            dst,
            spec.total(),
            spec.src_offset.map(|o| layout.src_base + o),
            src_index,
        ),
    }
}

/// Places for the checks of a batch, packed from the usual place: each
/// target at its offset from a 64-byte (page routines: page) boundary,
/// windows touching. As many of `chunk` (from the first) as fit the batch
/// area.
fn pack(chunk: &[CheckSpec], layout: &Layout) -> Vec<Placement> {
    let base = arch::ARENA_BASE + PAGE_SIZE;
    let end = base + GUARD.next_multiple_of(PAGE_SIZE) + BATCH_AREA;
    let mut out: Vec<Placement> = Vec::with_capacity(chunk.len());
    let mut cursor = base + GUARD.next_multiple_of(PAGE_SIZE) - SLOT_GUARD;
    for s in chunk {
        let align = if s.routine.page_granular() {
            PAGE_SIZE
        } else {
            64
        };
        // An overlapping copy's source may start below its target.
        let below = s.overlap.map_or(0, |d| d.min(0).unsigned_abs());
        let dst = (cursor + SLOT_GUARD + below).next_multiple_of(align) + s.dst_offset;
        let mut p = placement_at(s, layout, dst);
        let (lo, hi) = p.span();
        if hi + GUARD > end {
            break;
        }
        p.guard_lo = match out.last_mut() {
            Some(prev) => {
                // The previous window now ends where this one starts.
                prev.guard_hi = cursor - prev.span().1;
                lo - cursor
            }
            None => GUARD,
        };
        cursor = (hi + SLOT_GUARD).next_multiple_of(64);
        out.push(p);
    }
    out
}

/// The (size, count, destination offset, source offset, fill) of every
/// check of `routine` in `filter`'s geometry, in order and without repeats.
type Shape = (u64, u64, u64, Option<u64>, Fill);

/// The edge checks of `routine`: (edge, bytes per call, calls, fill). A
/// copy's source end covers every residue mod 64 (sizes 0..63 and
/// 4096..4159, so the tail of every length ends on the hole); targets end
/// on it at a spread of size classes, sources start right above it at a
/// few. With `-s`, targets and sources end there at those sizes.
fn edge_shapes(routine: Routine, filter: &Filter) -> Vec<(Edge, u64, u64, Fill)> {
    let fills: &[Fill] = match routine {
        Routine::Memset => &Fill::ALL,
        _ => &[Fill::Zero],
    };
    let given = !filter.sizes.is_empty();
    let target_sizes: Vec<u64> = if given {
        filter.sizes.clone()
    } else {
        EDGE_SIZES.to_vec()
    };
    let mut out = Vec::new();
    match routine {
        Routine::Memset | Routine::Memcpy => {
            for &len in &target_sizes {
                out.extend(fills.iter().map(|&f| (Edge::TargetEnd, len, 1, f)));
            }
        }
        Routine::ClearPage | Routine::CopyPage => {
            out.push((Edge::TargetEnd, PAGE_SIZE, 1, Fill::Zero))
        }
        Routine::ClearPages => out.push((Edge::TargetEnd, 3 * PAGE_SIZE, 1, Fill::Zero)),
    }
    match routine {
        Routine::Memcpy => {
            let ends: Vec<u64> = if given {
                filter.sizes.clone()
            } else {
                (0..64).chain(4096..4096 + 64).collect()
            };
            out.extend(
                ends.into_iter()
                    .map(|len| (Edge::SourceEnd, len, 1, Fill::Zero)),
            );
            if !given {
                out.extend(
                    EDGE_START_SIZES
                        .iter()
                        .map(|&len| (Edge::SourceStart, len, 1, Fill::Zero)),
                );
            }
        }
        Routine::CopyPage => {
            out.push((Edge::SourceEnd, PAGE_SIZE, 1, Fill::Zero));
            out.push((Edge::SourceStart, PAGE_SIZE, 1, Fill::Zero));
        }
        _ => {}
    }
    out
}

fn edge_half() -> u64 {
    arch::EDGE_REGION / 2
}

/// Whether an edge check fits an arena of `arena` bytes (the hole lies
/// `EDGE_REGION / 2` above its end): the buffer against the hole must not
/// reach the usual target's window, and a source above the hole must fit
/// below the top of RAM.
fn edge_fits(spec: &CheckSpec, arena: u64) -> bool {
    let total = spec.total();
    let usual_end = dst_address(spec) - arch::ARENA_BASE + total + GUARD;
    // What the edge region holds above the hole (a function, not the
    // constant: on an architecture without one it is 0).
    let above = edge_half();
    let hole = arena.saturating_add(above);
    match spec.edge {
        Some(Edge::TargetEnd | Edge::SourceEnd) => usual_end + total + GUARD + PAGE_SIZE <= hole,
        Some(Edge::SourceStart) => usual_end <= hole && total + PAGE_SIZE + GUARD <= above,
        None => true,
    }
}

fn shapes(routine: Routine, filter: &Filter) -> Vec<Shape> {
    match routine {
        Routine::Memset | Routine::Memcpy => byte_shapes(routine, filter),
        Routine::ClearPage | Routine::ClearPages | Routine::CopyPage => {
            page_shapes(routine, filter)
        }
    }
}

/// [`shapes`] of the page routines (always zero fill).
fn page_shapes(routine: Routine, filter: &Filter) -> Vec<Shape> {
    let full = filter.geometry == Geometry::Full && filter.sizes.is_empty();
    let mut out: Vec<Shape> = Vec::new();
    match routine {
        Routine::ClearPage | Routine::CopyPage if !filter.sizes.is_empty() => {
            for &size in &filter.sizes {
                let src = (routine == Routine::CopyPage).then_some(0);
                out.push((PAGE_SIZE, size / PAGE_SIZE, 0, src, Fill::Zero));
            }
        }
        Routine::ClearPage => {
            for count in [1, 3] {
                for off in [0, PAGE_SIZE, 2 * PAGE_SIZE] {
                    out.push((PAGE_SIZE, count, off, None, Fill::Zero));
                }
            }
        }
        Routine::CopyPage => {
            for count in [1, 3] {
                for src in [0, PAGE_SIZE] {
                    out.push((PAGE_SIZE, count, 0, Some(src), Fill::Zero));
                }
            }
        }
        Routine::ClearPages => {
            let ns: Vec<u64> = if !filter.sizes.is_empty() {
                filter.sizes.iter().map(|s| s / PAGE_SIZE).collect()
            } else if full {
                CLEAR_PAGES_N
                    .iter()
                    .chain(FULL_CLEAR_PAGES_N)
                    .copied()
                    .collect()
            } else {
                CLEAR_PAGES_N.to_vec()
            };
            let offs: &[u64] = if filter.sizes.is_empty() {
                &[0, PAGE_SIZE]
            } else {
                &[0]
            };
            for n in ns {
                for &off in offs {
                    out.push((n * PAGE_SIZE, 1, off, None, Fill::Zero));
                }
            }
            if filter.sizes.is_empty() {
                let big = CLEAR_PAGES_EXTENTS
                    .iter()
                    .chain(FULL_CLEAR_PAGES_EXTENTS.iter().filter(|_| full));
                out.extend(big.map(|n| (n * PAGE_SIZE, 1, 0, None, Fill::Zero)));
            }
        }
        Routine::Memset | Routine::Memcpy => {}
    }
    out
}

/// A memset/memcpy check before its fill: (size, destination offset,
/// source offset (memcpy)).
type Bytes = (u64, u64, Option<u64>);

/// [`shapes`] of memset and memcpy: sizes and (dst, src) offsets, then
/// each with every fill (memset).
fn byte_shapes(routine: Routine, filter: &Filter) -> Vec<Shape> {
    let copy = routine == Routine::Memcpy;
    // Fills innermost: a passed memset's constant is the next one's
    // pre-image (see `refill_for`).
    let with_fills = |bytes: Vec<Bytes>| {
        let mut out = Vec::with_capacity(bytes.len() * Fill::ALL.len());
        for (len, d, s) in bytes {
            let fills = match copy {
                true => &[Fill::Zero][..],
                false => Fill::at(filter.geometry, len, d),
            };
            out.extend(fills.iter().map(|&fill| (len, 1, d, s, fill)));
        }
        out
    };
    let mut out = with_fills(listed_sizes(copy, filter));
    if filter.sizes.is_empty() {
        // A listed placement keeps its own fills.
        let listed: BTreeSet<Bytes> = out.iter().map(|x| (x.0, x.2, x.3)).collect();
        let residues = residue_sizes(copy, filter.geometry);
        out.extend(
            residues
                .into_iter()
                .filter(|x| !listed.contains(&(x.0, x.2, x.3))),
        );
        let mut more: Vec<Bytes> = filter
            .random_sizes()
            .iter()
            .map(|r| (r.size, r.dst_offset, copy.then_some(r.src_offset)))
            .collect();
        let full = filter.geometry == Geometry::Full;
        let huge = HUGE_SIZES
            .iter()
            .chain(FULL_HUGE_SIZES.iter().filter(|_| full));
        let (d, s) = HUGE_OFFSETS;
        more.extend(huge.map(|&len| (len, d, copy.then_some(s))));
        out.extend(with_fills(more));
    }
    let mut seen = BTreeSet::new();
    out.retain(|s| seen.insert(*s));
    out
}

/// The distinct (size, destination offset) of `filter`'s memset checks
/// up to `max` bytes, in suite order (the selftest's tail-residue case
/// runs a broken memset over them).
pub(crate) fn memset_placements(filter: &Filter, max: u64) -> Vec<(u64, u64)> {
    let mut seen = BTreeSet::new();
    byte_shapes(Routine::Memset, filter)
        .into_iter()
        .map(|s| (s.0, s.2))
        .filter(|&(len, _)| len <= max)
        .filter(|p| seen.insert(*p))
        .collect()
}

/// The listed sizes ([`SIZES`] and [`LARGE_SIZES`], or `--size`) at their
/// offsets, and `--geometry full`'s every size up to [`FULL_MAX`] and the
/// hypervisor's page orders.
fn listed_sizes(copy: bool, filter: &Filter) -> Vec<Bytes> {
    let mut bytes: Vec<Bytes> = Vec::new();
    let srcs: &[u64] = if copy { SRC_OFFSETS } else { &[0] };
    let mut at = |len: u64, dsts: &[u64], srcs: &[u64]| {
        for &d in dsts {
            for &s in srcs {
                bytes.push((len, d, copy.then_some(s)));
            }
        }
    };
    let every: Vec<u64> = (0..64).collect();
    let sizes: Vec<u64> = if filter.sizes.is_empty() {
        SIZES.iter().chain(LARGE_SIZES).copied().collect()
    } else {
        filter.sizes.clone()
    };
    for &len in &sizes {
        let dsts = if len <= (2 << 20) + 1 {
            &every[..]
        } else {
            LARGE_DST_OFFSETS
        };
        if copy && filter.sizes.is_empty() && len > paired_max(filter.geometry) {
            // Every dst offset from src+0 and from one misaligned source
            // in turn: each offset of either side, not each pair.
            for (i, &d) in dsts.iter().enumerate() {
                let other = SRC_OFFSETS[1 + i % (SRC_OFFSETS.len() - 1)];
                at(len, &[d], &[0, other]);
            }
        } else {
            at(len, dsts, srcs);
        }
    }
    if filter.geometry == Geometry::Full && filter.sizes.is_empty() {
        for len in 0..=FULL_MAX {
            at(len, &every, &[0]);
            if copy {
                at(len, &[0], &every);
            }
        }
        for order in 0..=FULL_MAX_ORDER {
            at(PAGE_SIZE << order, LARGE_DST_OFFSETS, &[0]);
        }
    }
    bytes
}

/// Every residue 0..63 at each of [`RESIDUE_BASES`], with its fills: at
/// dst+0, where no head alignment moves the residue the tail sees (memcpy
/// at src+0 and src+32 in turn: both 32-byte aligned, and each copy's
/// result a pre-image of the next, see `Known::Copy`); up to
/// [`RESIDUE_SPREAD_MAX`] also at a spread placement, where each residue
/// of a magnitude gets another destination offset (and source offset).
/// quick checks a memset at the 2 MiB magnitude with one fill per residue
/// in turn (64 KiB has every residue at zero and a non-zero byte).
fn residue_sizes(copy: bool, geometry: Geometry) -> Vec<Shape> {
    let mut out = Vec::new();
    for (m, &base) in (0u64..).zip(RESIDUE_BASES) {
        for r in 0..64 {
            let len = base + r;
            let mut at = |d: u64, s: u64, fills: &[Fill]| match copy {
                true => out.push((len, 1, d, Some(s), Fill::Zero)),
                false => out.extend(fills.iter().map(|&f| (len, 1, d, None, f))),
            };
            let one = [Fill::ALL[(r % 3) as usize]];
            let fills = match geometry {
                Geometry::Quick if len > RESIDUE_SPREAD_MAX => &one[..],
                _ => Fill::at(geometry, len, 0),
            };
            at(0, 32 * (r % 2), fills);
            if len <= RESIDUE_SPREAD_MAX {
                // Odd multipliers: r -> offset is a permutation of 0..63.
                let d = (r * 23 + 7 * m + 1) % 64;
                let s = (r * 41 + 13 * m + 5) % 64;
                at(d, s, Fill::at(geometry, len, d));
            }
        }
    }
    out
}

/// The (size, destination offset, delta) of every overlapping copy a
/// memmove variant is checked with: sizes larger than the overlap.
fn overlap_shapes(filter: &Filter) -> Vec<(u64, u64, i64)> {
    let mut sizes: Vec<u64> = if filter.sizes.is_empty() {
        SIZES.to_vec()
    } else {
        filter.sizes.clone()
    };
    if filter.geometry == Geometry::Full && filter.sizes.is_empty() {
        sizes.extend(1..=FULL_MAX);
        sizes.sort_unstable();
        sizes.dedup();
    }
    let mut out = Vec::new();
    for len in sizes {
        for &d in OVERLAP_DST_OFFSETS {
            for &delta in OVERLAP_DELTAS {
                if len > delta.unsigned_abs() {
                    out.push((len, d, delta));
                }
            }
        }
    }
    out
}

/// Plan the suite for `side`. Variants the CPU cannot run and sizes that
/// do not fit the arena come back as skipped records with the reason.
pub fn plan(
    side: &crate::kernel::Side,
    caps: &arch::CpuCaps,
    filter: &Filter,
    arena: u64,
    pats: &Patterns,
) -> (Vec<CheckSpec>, Vec<CheckRecord>) {
    let mut specs = Vec::new();
    let mut skipped = Vec::new();
    let config = side.config();
    let moves = overlap_shapes(filter);
    for routine in Routine::ALL {
        let shapes = shapes(routine, filter);
        for v in routines::variants(routine, side) {
            if !filter.wants(routine, v) {
                continue;
            }
            for spec in variant_specs((routine, v), &shapes, &moves, filter) {
                match skip_reason(&spec, caps, arena) {
                    None => specs.push(spec),
                    Some(r) => skipped.push(record(config, &spec, pats, Verdict::Skipped, Some(r))),
                }
            }
        }
    }
    // Windows nested at one place, smallest first: a page a large check
    // wrote is not protected again for a small one and faulted on by the
    // next large one (docs/method.md, "Windows grow").
    specs.sort_by_key(|s| (s.edge.is_some(), s.total()));
    (specs, skipped)
}

/// A check of `variant` with nothing but its routine and variant set: one
/// call of 0 bytes at offset 0, filling zero, no source, overlap, table
/// or edge.
fn bare((routine, variant): (Routine, &'static VariantDef)) -> CheckSpec {
    CheckSpec {
        routine,
        variant,
        len: 0,
        count: 1,
        dst_offset: 0,
        src_offset: None,
        fill: Fill::Zero,
        overlap: None,
        table: None,
        edge: None,
    }
}

/// The checks of one variant: its routine's `shapes`, then the overlapping
/// copies (`moves`) where it is a memmove, then the edge checks where the
/// architecture leaves a hole.
fn variant_specs(
    (routine, v): (Routine, &'static VariantDef),
    shapes: &[Shape],
    moves: &[(u64, u64, i64)],
    filter: &Filter,
) -> Vec<CheckSpec> {
    let plain = shapes
        .iter()
        .map(|&(len, count, dst_offset, src_offset, fill)| CheckSpec {
            len,
            count,
            dst_offset,
            src_offset,
            fill,
            ..bare((routine, v))
        });
    let memmove = routine == Routine::Memcpy && v.memmove;
    let moved = moves
        .iter()
        .filter(|_| memmove)
        .map(|&(len, dst_offset, delta)| CheckSpec {
            len,
            dst_offset,
            overlap: Some(delta),
            ..bare((routine, v))
        });
    let edges = edge_shapes(routine, filter)
        .into_iter()
        .filter(|_| arch::edge_hole(arch::MIN_RAM).is_some())
        .map(|(edge, len, count, fill)| CheckSpec {
            len,
            count,
            src_offset: (routine.kind() == Kind::Copy).then_some(0),
            fill,
            edge: Some(edge),
            ..bare((routine, v))
        });
    plain.chain(moved).chain(edges).collect()
}

/// Why `spec` cannot run here (`None`: it can): a CPU feature its variant
/// requires, edge buffers that do not fit, or an arena too small for it.
fn skip_reason(spec: &CheckSpec, caps: &arch::CpuCaps, arena: u64) -> Option<String> {
    if let Some(f) = spec.variant.requires.filter(|f| !caps.has(f)) {
        Some(format!("the CPU does not have {f}"))
    } else if spec.edge.is_some() && !edge_fits(spec, arena) {
        Some("the edge check's buffers do not fit below the edge region; raise --mem".into())
    } else if footprint(spec) > arena {
        let need = footprint(spec);
        Some(format!(
            "needs --mem {} or more ({} of arena)",
            crate::units::format_size(mem_for(need)),
            crate::units::format_size(need.next_multiple_of(1 << 20))
        ))
    } else {
        None
    }
}

/// Every check `plan` makes for `side`, as SKIP with `reason` (a kernel
/// alternatives path the guest CPU cannot execute: never booted).
pub fn skip_all(
    side: &crate::kernel::Side,
    caps: &arch::CpuCaps,
    filter: &Filter,
    pats: &Patterns,
    reason: &str,
) -> Vec<CheckRecord> {
    let (specs, skipped) = plan(side, caps, filter, u64::MAX, pats);
    let why = || Some(reason.to_string());
    let planned = specs
        .iter()
        .map(|s| record(side.config(), s, pats, Verdict::Skipped, why()));
    let skipped = skipped
        .into_iter()
        .map(|r| CheckRecord { reason: why(), ..r });
    planned.chain(skipped).collect()
}

fn record(
    config: LinkConfig,
    s: &CheckSpec,
    pats: &Patterns,
    verdict: Verdict,
    reason: Option<String>,
) -> CheckRecord {
    CheckRecord {
        config,
        routine: s.routine,
        variant: s.variant.name.to_string(),
        size: s.len,
        count: s.count,
        dst_offset: s.dst_offset,
        src_offset: s.src_offset,
        fill: s.fill_byte(pats),
        overlap: s.overlap,
        verdict,
        first_bad_offset: None,
        bad_bytes: 0,
        breakdown: Breakdown::default(),
        contract: None,
        edge: s.edge,
        ticks: 0,
        reason,
        stray_bytes: None,
        fault_distance: None,
    }
}

/// The outcome of running a plan on one VM.
#[derive(Debug, Default, Clone)]
pub struct SuiteRun {
    /// Every check, or with [`Keep::Failures`] those that did not pass.
    pub records: Vec<CheckRecord>,
    /// Every check counted per row, passes included (see [`Keep`]).
    pub rows: Rows,
    /// A guest failure that ended the run early.
    pub failure: Option<GuestFailure>,
    /// Bytes the checker compared and the time it took.
    pub checked_bytes: u64,
    pub check_time: Duration,
    /// SIGINT stopped the run early.
    pub interrupted: bool,
}

/// Which records [`run`] keeps: every one, or (for the hundreds of
/// thousands of checks of `--geometry full`) only those that did not
/// pass, every check still counted in [`SuiteRun::rows`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Keep {
    #[default]
    All,
    Failures,
}

/// What [`run`] reports as it goes.
pub struct Watch<'a> {
    /// Advanced by every check.
    pub bar: &'a indicatif::ProgressBar,
    /// Called whenever every record so far is final and counted in the
    /// rows, so the caller can save results as they complete.
    pub checkpoint: Option<&'a mut dyn FnMut(&SuiteRun)>,
}

/// How [`run`] runs a plan.
#[derive(Debug, Clone, Copy)]
pub struct RunOptions {
    pub timeout: Duration,
    pub scope: checker::Scope,
    pub keep: Keep,
}

impl SuiteRun {
    /// Take in a verified check (its record, the checker's time, the
    /// bytes compared); returns the record's index.
    fn add(&mut self, (rec, dt, bytes): (CheckRecord, Duration, u64)) -> usize {
        self.records.push(rec);
        self.check_time += dt;
        self.checked_bytes += bytes;
        self.records.len() - 1
    }

    /// A guest failure while `spec` ran: its record fails with the
    /// failure's detail, and the failure ends the run.
    fn guest_failed(&mut self, vm: &Vm, spec: &CheckSpec, pats: &Patterns, f: GuestFailure) {
        let rec = record(
            vm.blob.config,
            spec,
            pats,
            Verdict::Fail,
            Some(f.detail.clone()),
        );
        self.records.push(rec);
        self.failure = Some(f);
    }

    /// Count the records from `from` on in [`SuiteRun::rows`]; with
    /// [`Keep::Failures`] drop those that passed. Called only when no
    /// record index is held (no copy awaits its source comparison).
    fn fold(&mut self, from: usize, keep: Keep) {
        let Some(tail) = self.records.get(from..) else {
            return;
        };
        for r in tail {
            self.rows.add(r);
        }
        if keep == Keep::Failures {
            let mut i = 0;
            self.records.retain(|r| {
                i += 1;
                i <= from || r.verdict != Verdict::Pass
            });
        }
    }
}

/// Run one check on its own: prepare (the source included), call, verify.
pub(crate) fn run_check(
    vm: &mut Vm,
    spec: &CheckSpec,
    pats: &Patterns,
    timeout: Duration,
    whole: Option<&mut checker::Snapshot>,
) -> Result<(CheckRecord, Duration, u64)> {
    let layout = Layout::on(std::slice::from_ref(spec), vm.ram.size());
    if whole.is_none() {
        vm.log_dirty_pages()?;
    }
    check_one(vm, spec, &layout, pats, timeout, Around::alone(), whole)
}

/// What the last check left in its target, if the harness knows it: the
/// target pattern (a [`Refill::Target`] check).
type Prepared = Option<Known>;

/// How [`check_one`] treats what lies around the check.
struct Around<'a> {
    /// `Now`: write the source before and compare it after. `Deferred`:
    /// the source is the shared area, written and compared by [`run`].
    source: SourceCheck,
    /// What the arena already holds, kept up to date: the check skips
    /// writing its pre-image where that serves ([`Known::serves`]), and
    /// refills its target with the next check's pre-image as it verifies
    /// it. `None`: no tracking (a lone check, `--check whole`).
    prepared: Option<&'a mut Prepared>,
    /// The check that runs next at the usual place, if known: where it
    /// goes and what it must leave.
    next: Option<(Placement, Expect)>,
    /// Where the check runs, if not at its usual place (a batch's check
    /// run again on its own, at the place the batch gave it).
    at: Option<Placement>,
}

impl Around<'_> {
    fn alone() -> Around<'static> {
        Around {
            source: SourceCheck::Now,
            prepared: None,
            next: None,
            at: None,
        }
    }

    /// What the arena already holds at `p` that serves a check that must
    /// leave `expect` there (its pre-image need not be written again).
    fn kept(&self, expect: Expect, p: &Placement) -> Option<Known> {
        self.prepared
            .as_deref()
            .copied()
            .flatten()
            .filter(|k| k.serves(expect, p))
    }
}

/// What a verified target at `p` (that had to become `expect`) is
/// refilled with for the check after it: nothing where a passed check's
/// result serves it (a constant before another constant, a copy before a
/// copy at a near shift: [`Known::serves`]); a copy's pre-image where the
/// next copy's target overlaps it; else the target pattern.
fn refill_for(p: &Placement, expect: Expect, next: Option<(Placement, Expect)>) -> Refill {
    match next {
        Some((_, Expect::Byte(w))) if matches!(expect, Expect::Byte(v) if v != w) => Refill::No,
        Some((n, Expect::Source))
            if expect == Expect::Source && checker::near(p.shift(), n.shift()) =>
        {
            Refill::No
        }
        Some((n, Expect::Source)) => {
            let (lo, hi) = (p.dst.max(n.dst), (p.dst + p.len).min(n.dst + n.len));
            if lo < hi {
                Refill::Complement {
                    lo,
                    hi,
                    shift: n.shift(),
                }
            } else {
                Refill::No
            }
        }
        Some((_, Expect::Byte(_))) | None => Refill::Target,
        // Its window is written whole.
        Some((_, Expect::Move { .. })) => Refill::No,
    }
}

/// Prepare, call, verify. Returns the record, the checker's time and the
/// bytes it compared.
fn check_one(
    vm: &mut Vm,
    spec: &CheckSpec,
    layout: &Layout,
    pats: &Patterns,
    timeout: Duration,
    mut around: Around<'_>,
    mut whole: Option<&mut checker::Snapshot>,
) -> Result<(CheckRecord, Duration, u64)> {
    let p = around.at.unwrap_or_else(|| placement(spec, layout));
    let expect = spec.expect(pats);
    let known = around.kept(expect, &p);
    checker::prepare_target_except(&vm.ram, &p, pats, expect, known)?;
    let own_source = around.source == SourceCheck::Now && !p.moved;
    if own_source {
        checker::prepare_source(&vm.ram, &p, pats)?;
    }
    if let Some(snap) = whole.as_deref_mut() {
        snap.refresh(&vm.ram, &p)?;
    }
    // The guest may write anywhere from here on.
    if let Some(k) = around.prepared.as_deref_mut() {
        *k = None;
    }
    let cmd = command(vm, spec, &p, pats)?;
    stray::watch(vm, [p.window(), source_span(&p), layout.src_range()])?;
    let r = vm.vcpu(0)?.call(&cmd, timeout)?;
    let strays = stray::after(vm)?;
    let refill = match (&around.prepared, &whole) {
        (Some(_), None) if strays.is_empty() => refill_for(&p, expect, around.next),
        _ => Refill::No,
    };
    let how = How {
        source: around.source,
        refill,
        kept: known,
    };
    let mut done = verify(vm, spec, &p, pats, how, whole, &r)?;
    if !strays.is_empty() {
        let again = Again {
            p: &p,
            own_source,
            cmd: &cmd,
            keep: layout.src_range(),
            timeout,
        };
        locate_strays(vm, spec, pats, again, &strays, &mut done.0)?;
    }
    if let Some(k) = around.prepared {
        *k = known_after(&p, refill, expect, done.0.verdict);
    }
    Ok(done)
}

/// What the target at `p` holds after its check (that had to become
/// `expect`, then was refilled with `refill`): a passed check's own result
/// where nothing was refilled, else what the refill leaves.
fn known_after(p: &Placement, refill: Refill, expect: Expect, verdict: Verdict) -> Option<Known> {
    let (lo, hi) = (p.dst, p.dst + p.len);
    match (refill, expect) {
        (Refill::No, Expect::Byte(value)) if verdict == Verdict::Pass => {
            Some(Known::Constant { lo, hi, value })
        }
        (Refill::No, Expect::Source) if verdict == Verdict::Pass => Some(Known::Copy {
            lo,
            hi,
            shift: p.shift(),
        }),
        (r, _) => r.leaves(p),
    }
}

/// Where a check reads its source (empty for none): its writes there are
/// the source comparison's to judge, byte by byte, not a stray write.
fn source_span(p: &Placement) -> (u64, u64) {
    p.src.map_or((0, 0), |s| (s, s + p.len))
}

/// How to run a check's call again: where, whether it has its own source
/// to write first, the command, what not to refill (the shared source).
struct Again<'a> {
    p: &'a Placement,
    own_source: bool,
    cmd: &'a Command,
    keep: (u64, u64),
    timeout: Duration,
}

/// The check wrote `strays` outside its window: run it again over a known
/// pattern there to find the bytes, and fail its record with them. The
/// arena then holds nothing a later check may count on (the caller drops
/// what it knew).
fn locate_strays(
    vm: &mut Vm,
    spec: &CheckSpec,
    pats: &Patterns,
    a: Again<'_>,
    strays: &[u64],
    rec: &mut CheckRecord,
) -> Result<()> {
    let expect = spec.expect(pats);
    let runs = stray::locate(vm, strays, &[a.keep], pats, &mut |vm| {
        checker::prepare_target(&vm.ram, a.p, pats, expect)?;
        if a.own_source {
            checker::prepare_source(&vm.ram, a.p, pats)?;
        }
        vm.vcpu(0)?.call(a.cmd, a.timeout)?;
        Ok(())
    })?;
    // What the second run wrote is accounted for, so the next check's
    // watch protects it again.
    stray::after(vm)?;
    stray::judge(rec, a.p, strays, &runs);
    Ok(())
}

/// The command that runs `spec` on `p`.
fn command(vm: &Vm, spec: &CheckSpec, p: &Placement, pats: &Patterns) -> Result<Command> {
    let call = Call {
        routine: spec.routine,
        dst: p.dst,
        src: p.src.unwrap_or(0),
        fill: spec.fill.byte(pats),
        len: spec.len,
        count: spec.count,
        step: spec.len as i64,
    };
    let mut cmd = routines::command(&vm.blob, spec.variant, &call)?;
    if let Some((t, i)) = spec.table {
        cmd.table = t;
        cmd.index = i;
    }
    Ok(cmd)
}

/// Verify what the call of `spec` left on `p` and make its record.
fn verify(
    vm: &Vm,
    spec: &CheckSpec,
    p: &Placement,
    pats: &Patterns,
    how: How,
    whole: Option<&mut checker::Snapshot>,
    call: &CallResult,
) -> Result<(CheckRecord, Duration, u64)> {
    let t = Instant::now();
    let expect = spec.expect(pats);
    let mut out = checker::check_with(&vm.ram, p, expect, pats, how)?;
    let (lo, hi) = p.window();
    let mut bytes = hi - lo
        + match (p.src, how.source) {
            (Some(_), SourceCheck::Now) => p.len,
            _ => 0,
        };
    if let Some(snap) = whole {
        let (n, first) = snap.changed_outside(&vm.ram, p)?;
        // What the routine wrote in its own area is judged above; take it
        // in so the next check compares against it.
        snap.refresh(&vm.ram, p)?;
        out.breakdown.outside = n;
        out.bad_bytes = out.breakdown.total();
        if out.first_bad.is_none() {
            out.first_bad = first;
        }
        bytes = vm.ram.end() - arch::BLOB_WINDOW;
    }
    let dt = t.elapsed();
    let mut rec = record(vm.blob.config, spec, pats, Verdict::Pass, None);
    rec.ticks = call.ticks();
    judge(&mut rec, &out);
    if let Some(b) = call.breach {
        breached(&mut rec, b, p);
    }
    Ok((rec, dt, bytes))
}

/// A call that broke the contract fails whatever its memory shows; the
/// breach comes first in the reason (a routine that clobbers a register
/// may also have written nonsense, and one that faulted stopped midway).
fn breached(rec: &mut CheckRecord, b: Breach, p: &Placement) {
    rec.verdict = Verdict::Fail;
    let what = match (b.kind, rec.edge) {
        (crate::vmm::BreachKind::Fault, Some(edge)) => {
            let distance = edge_distance(edge, b, p);
            rec.fault_distance = Some(distance);
            edge_fault(edge, distance, b.want)
        }
        _ => b.to_string(),
    };
    rec.reason = Some(match rec.reason.take() {
        Some(memory) => format!("{what}; {memory}"),
        None => what,
    });
    rec.contract = Some(b);
}

/// An edge check's fault against the buffer at the hole: the access that
/// reached into it began at or before the faulting address, so this is
/// how far past (or before) the buffer it got at least. The guest reports
/// guest-virtual addresses.
fn edge_distance(edge: Edge, b: Breach, p: &Placement) -> u64 {
    let addr = b.got;
    let dst = arch::guest_va(p.dst);
    let src = arch::guest_va(p.src.unwrap_or(p.dst));
    match edge {
        Edge::TargetEnd => addr.wrapping_sub(dst + p.len),
        Edge::SourceEnd => addr.wrapping_sub(src + p.len),
        Edge::SourceStart => src.wrapping_sub(addr),
    }
}

/// [`edge_distance`] said for people.
fn edge_fault(edge: Edge, distance: u64, pc: u64) -> String {
    match edge {
        Edge::TargetEnd => {
            format!("over-write: faulted {distance} bytes past the target end (pc {pc:#x})")
        }
        Edge::SourceEnd => {
            format!("over-read: faulted {distance} bytes past the source end (pc {pc:#x})")
        }
        Edge::SourceStart => {
            format!("under-read: faulted {distance} bytes before the source start (pc {pc:#x})")
        }
    }
}

/// Put a checker outcome into a record: verdict, counts and reason.
fn judge(rec: &mut CheckRecord, out: &checker::Outcome) {
    rec.verdict = if out.passed() {
        Verdict::Pass
    } else {
        Verdict::Fail
    };
    rec.first_bad_offset = out.first_bad;
    rec.bad_bytes = out.bad_bytes;
    rec.breakdown = out.breakdown;
    rec.reason = (!out.passed()).then(|| {
        let first = out
            .first_bad
            .map(|f| format!(", first at offset {f}"))
            .unwrap_or_default();
        format!(
            "{}: {} bad bytes{first}",
            out.breakdown.label(),
            out.bad_bytes
        )
    });
}

/// Copies whose source has not been compared yet: at most this many run
/// between two comparisons of the shared source area.
const DEFER: usize = 64;

/// What [`run`] knows about the arena: whether the shared source area of
/// [`Layout`] holds the stream, the copies that read it since it was last
/// compared, and where the target pattern already lies.
struct Arena {
    layout: Layout,
    written: bool,
    /// Left by the last check's refill; see [`Around::prepared`].
    prepared: Prepared,
    /// (record index, spec) of each copy not yet vouched for.
    pending: Vec<(usize, CheckSpec)>,
    /// The part of the area those copies read.
    lo: u64,
    hi: u64,
}

impl Arena {
    fn new(layout: Layout) -> Arena {
        Arena {
            layout,
            written: false,
            prepared: None,
            pending: Vec::new(),
            lo: u64::MAX,
            hi: 0,
        }
    }

    /// The stream bytes from guest address `lo` to `hi` in the area.
    fn expected<'a>(&self, pats: &'a Patterns, lo: u64, hi: u64) -> Result<&'a [u8]> {
        let (a, b) = (
            (lo - self.layout.src_base) as usize,
            (hi - self.layout.src_base) as usize,
        );
        pats.source().get(a..b).ok_or_else(|| {
            Error::internal(format!(
                "the source area [{a:#x}, {b:#x}) is longer than the source pattern ({} bytes)",
                pats.source().len()
            ))
        })
    }

    /// Write the stream into the area unless it is known to hold it.
    fn ensure(&mut self, vm: &Vm, pats: &Patterns) -> Result<()> {
        if !self.written {
            // The area may hold a target of a check that overlapped it.
            self.prepared = None;
            let (lo, hi) = (
                self.layout.src_base,
                self.layout.src_base + self.layout.src_len,
            );
            vm.ram.write_bytes(lo, self.expected(pats, lo, hi)?)?;
            self.written = true;
        }
        Ok(())
    }

    fn defer(&mut self, index: usize, spec: &CheckSpec, p: &Placement) {
        if let Some(src) = p.src {
            self.lo = self.lo.min(src);
            self.hi = self.hi.max(src + p.len);
        }
        self.pending.push((index, *spec));
    }
}

/// Compare the part of the source area the pending copies read. Unchanged:
/// each of them left its source alone, which is what the per-check
/// comparison would have found. Changed: the area is written afresh and,
/// when the VM can still run (`rerun`), every pending copy runs again on
/// its own with a fresh source compared right after it, so each record
/// says exactly what that copy did. When it cannot (the guest failed or
/// the run was interrupted), each pending copy's own source range is
/// judged as it is now.
fn settle_source(
    vm: &mut Vm,
    area: &mut Arena,
    pats: &Patterns,
    timeout: Duration,
    rerun: bool,
    out: &mut SuiteRun,
) -> Result<()> {
    if area.pending.is_empty() {
        return Ok(());
    }
    let pending = std::mem::take(&mut area.pending);
    let (lo, hi) = (area.lo, area.hi);
    (area.lo, area.hi) = (u64::MAX, 0);
    let t = Instant::now();
    let changed =
        lo < hi && checker::source_changes(&vm.ram, lo, area.expected(pats, lo, hi)?)? > 0;
    out.check_time += t.elapsed();
    out.checked_bytes += hi.saturating_sub(lo);
    if !changed {
        return Ok(());
    }
    area.written = false;
    area.prepared = None;
    for (index, spec) in pending {
        let Some(rec) = out.records.get_mut(index) else {
            continue;
        };
        if !rerun {
            judge_source_now(vm, &spec, &area.layout, pats, rec)?;
            continue;
        }
        let layout = area.layout;
        let around = Around {
            source: SourceCheck::Now,
            prepared: Some(&mut area.prepared),
            next: None,
            at: None,
        };
        match check_one(vm, &spec, &layout, pats, timeout, around, None) {
            Ok((again, dt, bytes)) => {
                out.records[index] = again;
                out.check_time += dt;
                out.checked_bytes += bytes;
            }
            Err(Error::Vmm(VmmError::Guest(f))) => {
                let rec = &mut out.records[index];
                rec.verdict = Verdict::Fail;
                rec.reason = Some(f.detail.clone());
                out.failure = Some(*f);
                return Ok(());
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Judge a pending copy whose run cannot be repeated by its own source
/// range as it is now: changed bytes there count against its record.
fn judge_source_now(
    vm: &Vm,
    spec: &CheckSpec,
    layout: &Layout,
    pats: &Patterns,
    rec: &mut CheckRecord,
) -> Result<()> {
    let p = placement(spec, layout);
    if let Some(src) = p.src {
        let n = checker::source_changes(&vm.ram, src, p.source(pats)?)?;
        if n > 0 {
            let mut o = checker::Outcome {
                first_bad: rec.first_bad_offset,
                bad_bytes: 0,
                breakdown: rec.breakdown,
            };
            o.breakdown.source_modified = n;
            o.bad_bytes = o.breakdown.total();
            judge(rec, &o);
            if let Some(r) = rec.reason.as_mut() {
                r.push_str(
                    " (the source was compared after the VM stopped: this copy or \
                     one run after it changed it)",
                );
            }
        }
    }
    Ok(())
}

/// Run a batch of small checks (packed by [`pack`]) with one exit; each
/// is prepared, timed and verified on its own. A guest failure is
/// recorded against the slot that was running, after the slots before it
/// are verified. `places` comes from `pack(chunk)`.
fn run_batch(
    vm: &mut Vm,
    chunk: &[CheckSpec],
    places: &[Placement],
    area: &mut Arena,
    pats: &Patterns,
    timeout: Duration,
    out: &mut SuiteRun,
) -> Result<()> {
    // The batch area covers the usual place.
    area.prepared = None;
    if chunk.iter().any(CheckSpec::shares_source) {
        area.ensure(vm, pats)?;
    }
    let mut cmds = Vec::with_capacity(chunk.len());
    for (s, p) in chunk.iter().zip(places) {
        checker::prepare_target(&vm.ram, p, pats, s.expect(pats))?;
        cmds.push(command(vm, s, p, pats)?);
    }
    let windows = places.iter().map(Placement::window);
    stray::watch(vm, windows.chain([area.layout.src_range()]))?;
    let (results, failed) = match vm.vcpu(0)?.call_batch(&cmds, timeout) {
        Ok(r) => (r, None),
        Err(VmmError::Guest(f)) => {
            let (cur, done) = vm.vcpu(0)?.batch_progress(&cmds);
            (done, Some((cur, f)))
        }
        Err(e) => return Err(e.into()),
    };
    let strays = stray::after(vm)?;
    let mut done = Vec::with_capacity(results.len());
    for ((spec, p), r) in chunk.iter().zip(places).zip(&results) {
        let how = How {
            source: source_of(spec),
            ..How::default()
        };
        done.push(verify(vm, spec, p, pats, how, None, r)?);
    }
    let failed_check = done.iter().any(|d| d.0.verdict == Verdict::Fail);
    if failed.is_none() && (failed_check || !strays.is_empty()) {
        return run_alone(vm, chunk, places, area, pats, timeout, out);
    }
    for ((spec, p), d) in chunk.iter().zip(places).zip(done) {
        let index = out.add(d);
        if spec.shares_source() {
            area.defer(index, spec, p);
        }
    }
    if let Some((cur, f)) = failed {
        match chunk.get(cur) {
            Some(spec) => out.guest_failed(vm, spec, pats, *f),
            None => out.failure = Some(*f),
        }
        settle_source(vm, area, pats, timeout, false, out)?;
    }
    Ok(())
}

/// A copy of the plan's shared source area compares it later; any other
/// check writes and compares its own.
fn source_of(spec: &CheckSpec) -> SourceCheck {
    if spec.shares_source() {
        SourceCheck::Deferred
    } else {
        SourceCheck::Now
    }
}

/// A batch in which a check failed or the guest wrote outside every
/// window: each check runs again on its own at the place the batch gave
/// it, with only its own window allowed, so what went wrong is blamed on
/// the check that did it (a write into a neighbour's window fails the
/// writer, not the neighbour); the batch's own records are dropped.
fn run_alone(
    vm: &mut Vm,
    chunk: &[CheckSpec],
    places: &[Placement],
    area: &mut Arena,
    pats: &Patterns,
    timeout: Duration,
    out: &mut SuiteRun,
) -> Result<()> {
    if chunk.iter().any(CheckSpec::shares_source) {
        // The batch may have written into it.
        area.written = false;
        area.ensure(vm, pats)?;
    }
    let layout = area.layout;
    for (spec, p) in chunk.iter().zip(places) {
        let around = Around {
            source: source_of(spec),
            prepared: None,
            next: None,
            at: Some(*p),
        };
        match check_one(vm, spec, &layout, pats, timeout, around, None) {
            Ok(done) => {
                let index = out.add(done);
                if spec.shares_source() {
                    area.defer(index, spec, p);
                }
            }
            Err(Error::Vmm(VmmError::Guest(f))) => {
                out.guest_failed(vm, spec, pats, *f);
                return settle_source(vm, area, pats, timeout, false, out);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// How many of `specs` (from the first) run as one batch: consecutive
/// small checks, at most `abi::BATCH_SLOTS`; 0 or 1 means "run the first
/// alone". The batch area lies below the copies' source area
/// ([`Layout::of`]), so no batch overwrites it.
fn batch_len(specs: &[CheckSpec]) -> usize {
    specs
        .iter()
        .take(abi::BATCH_SLOTS as usize)
        .take_while(|s| batchable(s))
        .count()
}

/// Run `specs` in order on `vm`; a guest failure ends the run. Small
/// checks run in batches (see [`run_batch`]) unless `--check whole`.
/// Copies share one source area (see [`Layout`]) that is compared after
/// at most [`DEFER`] of them, before anything overwrites it, and at the
/// end; with `--check whole` every check writes and compares its own
/// source.
pub fn run(
    vm: &mut Vm,
    specs: &[CheckSpec],
    pats: &Patterns,
    opts: &RunOptions,
    watch: &mut Watch<'_>,
) -> Result<SuiteRun> {
    let timeout = opts.timeout;
    let mut out = SuiteRun::default();
    let mut snap = match opts.scope {
        checker::Scope::Whole => Some(checker::Snapshot::take(&vm.ram)?),
        checker::Scope::Target => None,
    };
    // Stray writes: every page the guest writes is accounted for (the
    // whole scope compares every byte instead).
    if snap.is_none() {
        vm.log_dirty_pages()?;
    }
    let mut area = Arena::new(Layout::on(specs, vm.ram.size()));
    let mut i = 0;
    let mut folded = 0;
    while i < specs.len() {
        let r = step(
            vm,
            (specs, &mut i),
            &mut area,
            pats,
            opts,
            snap.as_mut(),
            &mut out,
        );
        watch.bar.set_position(i as u64);
        match r {
            Ok(()) => {}
            Err(Error::Vmm(VmmError::Interrupted)) => {
                out.interrupted = true;
                settle_source(vm, &mut area, pats, timeout, false, &mut out)?;
                break;
            }
            Err(e) => return Err(e),
        }
        if out.failure.is_some() {
            break;
        }
        if settle_and_fold(vm, &mut area, pats, opts, &mut out, &mut folded)?
            && let Some(checkpoint) = watch.checkpoint.as_mut()
        {
            checkpoint(&out);
        }
        if out.failure.is_some() {
            break;
        }
    }
    if out.failure.is_none() && !out.interrupted {
        settle_source(vm, &mut area, pats, timeout, true, &mut out)?;
    }
    out.fold(folded, opts.keep);
    Ok(out)
}

/// One step of [`run`] from `specs[*i]`: a batch of small checks, or one
/// check on its own; `*i` moves past what it ran.
fn step(
    vm: &mut Vm,
    (specs, i): (&[CheckSpec], &mut usize),
    area: &mut Arena,
    pats: &Patterns,
    opts: &RunOptions,
    snap: Option<&mut checker::Snapshot>,
    out: &mut SuiteRun,
) -> Result<()> {
    let rest = &specs[*i..];
    let n = match opts.scope {
        checker::Scope::Target => batch_len(rest),
        checker::Scope::Whole => 0,
    };
    let places = if n > 1 {
        pack(&rest[..n], &area.layout)
    } else {
        Vec::new()
    };
    if places.len() > 1 {
        let n = places.len();
        *i += n;
        return run_batch(vm, &rest[..n], &places, area, pats, opts.timeout, out);
    }
    *i += 1;
    let pair = (&rest[0], rest.get(1));
    run_single(vm, pair, area, pats, opts.timeout, snap, out)
}

/// Between two steps of [`run`]: compare the shared source area once
/// [`DEFER`] copies wait on it (with [`Keep::Failures`], after every step,
/// so records can be folded), then fold the records from `folded` on when
/// none is still pending.
/// Whether it folded: every record in `out` is then final and counted in
/// its rows (a consistent checkpoint).
fn settle_and_fold(
    vm: &mut Vm,
    area: &mut Arena,
    pats: &Patterns,
    opts: &RunOptions,
    out: &mut SuiteRun,
    folded: &mut usize,
) -> Result<bool> {
    let eager = opts.keep == Keep::Failures && !area.pending.is_empty();
    if area.pending.len() >= DEFER || eager {
        settle_source(vm, area, pats, opts.timeout, true, out)?;
    }
    if area.pending.is_empty() {
        out.fold(*folded, opts.keep);
        *folded = out.records.len();
        return Ok(true);
    }
    Ok(false)
}

/// One check on its own (a large one, or any with `--check whole`).
fn run_single(
    vm: &mut Vm,
    (spec, next): (&CheckSpec, Option<&CheckSpec>),
    area: &mut Arena,
    pats: &Patterns,
    timeout: Duration,
    snap: Option<&mut checker::Snapshot>,
    out: &mut SuiteRun,
) -> Result<()> {
    let layout = area.layout;
    let p = placement(spec, &layout);
    let shared = snap.is_none() && spec.shares_source();
    if !shared && layout.overlaps(&p) {
        settle_source(vm, area, pats, timeout, true, out)?;
        area.written = false;
        if out.failure.is_some() {
            return Ok(());
        }
    }
    if shared {
        area.ensure(vm, pats)?;
    }
    let tracked = snap.is_none();
    let around = Around {
        source: if shared {
            SourceCheck::Deferred
        } else {
            SourceCheck::Now
        },
        prepared: tracked.then_some(&mut area.prepared),
        next: next.map(|n| (placement(n, &layout), n.expect(pats))),
        at: None,
    };
    match check_one(vm, spec, &layout, pats, timeout, around, snap) {
        Ok(done) => {
            let index = out.add(done);
            if shared {
                area.defer(index, spec, &p);
            }
            Ok(())
        }
        Err(Error::Vmm(VmmError::Guest(f))) => {
            out.guest_failed(vm, spec, pats, *f);
            settle_source(vm, area, pats, timeout, false, out)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::blob::LinkConfig;
    use crate::kernel::Side;

    proptest::proptest! {
        /// Issue 38: `verify -s 18446744073709551615` wrapped here to a
        /// small footprint that passed the fit check. Over the whole u64
        /// range the footprint is the exact one (computed in u128), or
        /// `u64::MAX` where that does not fit: never smaller.
        #[test]
        fn footprints_are_exact_or_saturate_never_wrap(
            len in proptest::prelude::any::<u64>(),
            count in 1..=64u64,
            kind in proptest::sample::select(vec![Kind::Zero, Kind::Fill, Kind::Copy]),
            batched in proptest::prelude::any::<bool>(),
        ) {
            let total = len as u128 * count as u128;
            let page = PAGE_SIZE as u128;
            let reach = if batched || kind == Kind::Copy { BATCH_AREA as u128 } else { 0 };
            let guard = GUARD as u128;
            let dst = guard.next_multiple_of(page) + 64 + reach + total + guard;
            let src = if kind == Kind::Copy { page + total + 64 + page } else { 0 };
            let exact = dst.next_multiple_of(page) + src + page;
            let got = footprint_of(kind, len.saturating_mul(count), batched);
            proptest::prop_assert_eq!(got as u128, exact.min(u64::MAX as u128));
            let mem = mem_for(got) as u128;
            proptest::prop_assert!(mem >= exact.min(u64::MAX as u128) || mem == u64::MAX as u128);
        }
    }

    /// A passed memset record, for tests of what judges records.
    pub(crate) fn record_for_tests() -> CheckRecord {
        let s = spec(Routine::Memset, 100, 0, None);
        record(
            LinkConfig::Vanilla,
            &s,
            &Patterns::new(1, 0),
            Verdict::Pass,
            None,
        )
    }

    fn spec(routine: Routine, len: u64, dst_offset: u64, src_offset: Option<u64>) -> CheckSpec {
        let side: Side = LinkConfig::Vanilla.into();
        CheckSpec {
            routine,
            variant: routines::variants(routine, &side)[0],
            len,
            count: 1,
            dst_offset,
            src_offset,
            fill: Fill::Seeded,
            overlap: None,
            table: None,
            edge: None,
        }
    }

    #[test]
    fn the_source_area_lies_above_every_copy_and_every_batch() {
        let mut specs = Vec::new();
        for len in [1, 4097, BATCH_MAX, (2 << 20) + 1] {
            for off in [0, 63] {
                for src in [0, 1, 63] {
                    specs.push(spec(Routine::Memcpy, len, off, Some(src)));
                }
            }
        }
        specs.push(spec(Routine::CopyPage, PAGE_SIZE, 0, Some(PAGE_SIZE)));
        let layout = Layout::of(&specs);
        assert_eq!(layout.src_len, (2 << 20) + 1 + 63);
        let biggest = specs.iter().map(footprint).max().unwrap();
        let check = |p: &Placement, what: &str| {
            assert!(p.window().1 + PAGE_SIZE <= layout.src_base, "{what}");
            assert!(!layout.overlaps(p), "{what}");
            let src = p.src.unwrap();
            assert!(src >= layout.src_base);
            assert!(src + p.len <= layout.src_base + layout.src_len);
            assert_eq!(src - layout.src_base, p.src_index as u64);
            // The whole layout fits the footprint the plan checks the
            // arena against.
            assert!(layout.src_base + layout.src_len <= arch::ARENA_BASE + biggest);
        };
        for s in &specs {
            check(&placement(s, &layout), &format!("{s:?} alone"));
        }
        let small: Vec<CheckSpec> = specs.iter().copied().filter(batchable).collect();
        let many: Vec<CheckSpec> = small
            .iter()
            .cycle()
            .take(abi::BATCH_SLOTS as usize)
            .copied()
            .collect();
        for (k, p) in pack(&many, &layout).iter().enumerate() {
            check(p, &format!("slot {k}"));
        }
        // A plan without batched copies still keeps batches off the area.
        let mixed = [
            spec(Routine::Memset, 64, 0, None),
            spec(Routine::Memcpy, 2 << 20, 0, Some(0)),
        ];
        let layout = Layout::of(&mixed);
        let batch = pack(&[mixed[0]; 512], &layout);
        assert!(batch.iter().all(|p| !layout.overlaps(p)));
    }

    #[test]
    fn packed_windows_touch_and_never_share_a_byte() {
        let layout = Layout::default();
        let chunk: Vec<CheckSpec> = (0..abi::BATCH_SLOTS - 1)
            .map(|k| spec(Routine::Memset, k % 1025, k % 64, None))
            .chain([spec(Routine::ClearPage, PAGE_SIZE, PAGE_SIZE, None)])
            .collect();
        let places = pack(&chunk, &layout);
        assert_eq!(places.len(), chunk.len());
        for (p, s) in places.iter().zip(&chunk) {
            let align = if s.routine.page_granular() {
                PAGE_SIZE
            } else {
                64
            };
            assert_eq!(p.dst % align, s.dst_offset % align, "{s:?}");
            assert!(p.guard_lo >= SLOT_GUARD && p.guard_hi >= SLOT_GUARD);
        }
        assert_eq!(places[0].guard_lo, GUARD);
        assert_eq!(places.last().unwrap().guard_hi, GUARD);
        for pair in places.windows(2) {
            assert_eq!(pair[0].window().1, pair[1].window().0, "{pair:?}");
        }
        // Large checks: as many as fit the batch area.
        let big = vec![spec(Routine::Memset, BATCH_MAX, 63, None); 512];
        let places = pack(&big, &layout);
        assert!(places.len() > 100 && places.len() < 512);
        let (lo, hi) = (places[0].window().0, places.last().unwrap().window().1);
        assert!(hi - lo <= GUARD.next_multiple_of(PAGE_SIZE) + BATCH_AREA);
        assert!(dst_window_end(&big[0]) >= hi);
    }

    #[test]
    fn batches_take_consecutive_small_checks_only() {
        let small = spec(Routine::Memset, 64, 0, None);
        let big = spec(Routine::Memset, BATCH_MAX + 1, 0, None);
        assert_eq!(batch_len(&[small; 600]), abi::BATCH_SLOTS as usize);
        assert_eq!(batch_len(&[small, small, big, small]), 2);
        assert_eq!(batch_len(&[big, small]), 0);
        let mut selftest = small;
        selftest.table = Some((abi::TABLE_SELFTEST, 0));
        assert_eq!(batch_len(&[small, selftest]), 1);
    }

    #[test]
    fn overlapping_copies_pack_like_the_others() {
        let layout = Layout::default();
        let chunk: Vec<CheckSpec> = OVERLAP_DELTAS
            .iter()
            .map(|&d| CheckSpec {
                overlap: Some(d),
                ..spec(Routine::Memcpy, 100, 1, None)
            })
            .collect();
        let places = pack(&chunk, &layout);
        assert_eq!(places.len(), chunk.len());
        for (p, s) in places.iter().zip(&chunk) {
            assert!(p.moved);
            assert_eq!(p.src, Some(p.dst.wrapping_add_signed(s.overlap.unwrap())));
            assert_eq!(p.dst % 64, 1);
            let (lo, hi) = p.span();
            assert_eq!(hi - lo, 100 + s.overlap.unwrap().unsigned_abs());
        }
        for pair in places.windows(2) {
            assert_eq!(pair[0].window().1, pair[1].window().0, "{pair:?}");
        }
        assert!(chunk.iter().all(|s| !s.shares_source()));
        let f = Filter::default();
        let shapes = overlap_shapes(&f);
        assert!(shapes.contains(&(4097, 63, -64)) && shapes.contains(&(8, 0, 7)));
        assert!(!shapes.iter().any(|&(len, _, d)| len <= d.unsigned_abs()));
    }

    #[test]
    fn geometries_cover_what_they_promise() {
        let quick = Filter::default();
        let full = Filter {
            geometry: Geometry::Full,
            ..Filter::default()
        };
        for routine in [Routine::Memset, Routine::Memcpy] {
            quick_covers(routine, &quick, &full);
        }
        default_fills(&quick);
        full_covers(&full);
    }

    /// quick's memset or memcpy checks: the listed sizes at their offsets,
    /// memcpy at every source offset; memset with every fill up to
    /// BATCH_MAX, above it with zero and one of the others; every residue
    /// at each magnitude; a size above 32 MiB; the random sizes.
    fn quick_covers(routine: Routine, quick: &Filter, full: &Filter) {
        let got: BTreeSet<Shape> = shapes(routine, quick).into_iter().collect();
        let copy = routine == Routine::Memcpy;
        let has = |len, d, s| has_placement(&got, copy, (len, d, s));
        let srcs: &[u64] = if copy { SRC_OFFSETS } else { &[0] };
        for &len in SIZES.iter().chain(LARGE_SIZES) {
            let dsts = if len <= (2 << 20) + 1 {
                (0..64).collect()
            } else {
                LARGE_DST_OFFSETS.to_vec()
            };
            if len <= 4097 {
                for d in dsts {
                    assert!(srcs.iter().all(|&s| has(len, d, s)), "{routine} {len} {d}");
                }
                continue;
            }
            // Above it: every dst offset from src+0, every src offset.
            for d in dsts {
                assert!(has(len, d, 0), "{routine} {len} dst+{d}");
            }
            let at: Vec<&Shape> = got.iter().filter(|x| x.0 == len).collect();
            for &s in srcs {
                assert!(
                    at.iter().any(|x| x.3 == copy.then_some(s)),
                    "{routine} {len} src+{s}"
                );
            }
        }
        residues_covered(routine, &got);
        // Above 32 MiB by default; above 4 GiB in full only.
        assert!(got.iter().any(|s| s.0 > 32 << 20 && s.0 < 1 << 30));
        assert!(!got.iter().any(|s| s.0 > 4 << 30));
        let full_got = shapes(routine, full);
        assert!(full_got.iter().any(|s| s.0 > 4 << 30), "{routine}");
        // The seed's random sizes, at their offsets.
        for r in quick.random_sizes() {
            assert!(has(r.size, r.dst_offset, r.src_offset), "{routine} {r:?}");
        }
        let mut seen = BTreeSet::new();
        assert!(shapes(routine, quick).iter().all(|c| seen.insert(*c)));
    }

    /// Whether `got` has the (size, dst, src) placement with the fills it
    /// should: a copy once, a memset with every fill up to BATCH_MAX,
    /// above it with zero and one other.
    fn has_placement(got: &BTreeSet<Shape>, copy: bool, (len, d, s): (u64, u64, u64)) -> bool {
        let fills: Vec<Fill> = Fill::ALL
            .into_iter()
            .filter(|&f| got.contains(&(len, 1, d, copy.then_some(s), f)))
            .collect();
        match (copy, len <= BATCH_MAX) {
            (true, _) => fills == [Fill::Zero],
            (false, true) => fills == Fill::ALL,
            (false, false) => fills.len() == 2 && fills[0] == Fill::Zero,
        }
    }

    /// No hiding place in size: every residue mod 64 at each magnitude,
    /// at dst+0 (src+0 or +32), where no head alignment moves it; memset
    /// at 2 MiB with one fill each, all three in turn; up to 64 KiB also
    /// at every dst offset.
    fn residues_covered(routine: Routine, got: &BTreeSet<Shape>) {
        let copy = routine == Routine::Memcpy;
        let has = |len, d, s| has_placement(got, copy, (len, d, s));
        for base in [1 << 10, 4 << 10, 64 << 10, 2 << 20] {
            for r in 0..64 {
                let (len, s) = (base + r, copy.then_some(32 * (r % 2)));
                let fills: Vec<Fill> = got
                    .iter()
                    .filter(|x| (x.0, x.2, x.3) == (len, 0, s))
                    .map(|x| x.4)
                    .collect();
                let ok = match (copy, base) {
                    (true, _) => fills == [Fill::Zero],
                    // 2 MiB and 2 MiB+1 are listed sizes, with their fills.
                    (false, 0x20_0000) => fills.len() == 1 || (r < 2 && has(len, 0, 0)),
                    (false, _) => has(len, 0, 0),
                };
                assert!(ok, "{routine} {base}+{r}: {fills:?}");
            }
        }
        if !copy {
            let at_2m = |f| {
                got.iter()
                    .filter(move |x| x.0 >> 21 == 1 && x.2 == 0 && x.4 == f)
            };
            assert!(Fill::ALL.iter().all(|&f| at_2m(f).count() >= 21));
        }
        // And up to 64 KiB at a spread placement: every dst offset.
        for base in [1 << 10, 4 << 10, 64 << 10] {
            let offsets: BTreeSet<u64> = got
                .iter()
                .filter(|s| (base..base + 64).contains(&s.0))
                .map(|s| s.2)
                .collect();
            assert_eq!(offsets.len(), 64, "{routine} {base}");
        }
    }

    /// The default fills: 0x00, 0xff (top bit set) and the seeded byte,
    /// which is neither for any seed.
    fn default_fills(quick: &Filter) {
        let fills: BTreeSet<Fill> = shapes(Routine::Memset, quick).iter().map(|s| s.4).collect();
        assert_eq!(fills.into_iter().collect::<Vec<_>>(), Fill::ALL);
        for seed in 0..256 {
            let pats = Patterns::new(seed, 0);
            let bytes: BTreeSet<u8> = Fill::ALL.iter().map(|f| f.byte(&pats)).collect();
            assert_eq!(bytes.len(), 3, "seed {seed}");
            assert!(bytes.contains(&0) && bytes.contains(&0xff));
        }
    }

    /// full: every (size <= 1024, dst offset) at every fill; memcpy at
    /// every dst offset and every src offset too; the clear_pages extents.
    fn full_covers(full: &Filter) {
        let quick = Filter::default();
        // every dst offset and every src offset too.
        let shapes_full: BTreeSet<Shape> = shapes(Routine::Memset, full).into_iter().collect();
        for fill in [Fill::Zero, Fill::Ones, Fill::Seeded] {
            for len in 0..=FULL_MAX {
                for d in 0..64 {
                    assert!(shapes_full.contains(&(len, 1, d, None, fill)), "{len} {d}");
                }
            }
            for order in 0..=FULL_MAX_ORDER {
                assert!(shapes_full.contains(&(PAGE_SIZE << order, 1, 0, None, fill)));
            }
        }
        let copies = shapes(Routine::Memcpy, full);
        let copy_set: BTreeSet<Shape> = copies.iter().copied().collect();
        for len in 0..=FULL_MAX {
            for o in 0..64 {
                assert!(copy_set.contains(&(len, 1, o, Some(0), Fill::Zero)));
                assert!(copy_set.contains(&(len, 1, 0, Some(o), Fill::Zero)));
            }
        }
        // full crosses every dst with every src offset up to 8 MiB + 1.
        for len in [(2 << 20) - 1, 2 << 20, (2 << 20) + 1] {
            for d in 0..64 {
                for &s in SRC_OFFSETS {
                    assert!(copy_set.contains(&(len, 1, d, Some(s), Fill::Zero)));
                }
            }
        }
        for &d in LARGE_DST_OFFSETS {
            for &s in SRC_OFFSETS {
                assert!(copy_set.contains(&(PAIRED_MAX, 1, d, Some(s), Fill::Zero)));
            }
        }
        let mut seen = BTreeSet::new();
        assert!(copies.iter().all(|c| seen.insert(*c)), "no check twice");
        let pages = shapes(Routine::ClearPages, full);
        for n in CLEAR_PAGES_N
            .iter()
            .chain(FULL_CLEAR_PAGES_N)
            .chain(CLEAR_PAGES_EXTENTS)
            .chain(FULL_CLEAR_PAGES_EXTENTS)
        {
            assert!(pages.contains(&(n * PAGE_SIZE, 1, 0, None, Fill::Zero)));
        }
        // quick has the 32 MiB batch, not the 1 GiB folio.
        let quick_pages = shapes(Routine::ClearPages, &quick);
        assert!(quick_pages.contains(&(32 << 20, 1, 0, None, Fill::Zero)));
        assert!(!quick_pages.iter().any(|p| p.0 == 1 << 30));
        // An explicit size keeps the suite's source offsets.
        let sized = Filter {
            sizes: vec![100],
            ..Filter::default()
        };
        let c = shapes(Routine::Memcpy, &sized);
        assert_eq!(c.len(), 64 * SRC_OFFSETS.len());
        assert!(c.contains(&(100, 1, 5, Some(33), Fill::Zero)));
        assert!(sized.random_sizes().is_empty());
    }

    #[test]
    fn random_sizes_come_from_the_seed() {
        let a = random_sizes(7);
        assert_eq!(a, random_sizes(7), "--seed reproduces them");
        assert_eq!(a.len(), RANDOM_SIZES);
        assert_ne!(a, random_sizes(8));
        let with = |seed| Filter {
            seed,
            ..Filter::default()
        };
        assert_ne!(
            shapes(Routine::Memcpy, &with(7)),
            shapes(Routine::Memcpy, &with(8))
        );
        assert_eq!(
            shapes(Routine::Memset, &with(7)),
            shapes(Routine::Memset, &with(7))
        );
        // Spread over the magnitudes above FULL_MAX.
        let mut octaves = BTreeSet::new();
        for seed in 0..64 {
            for r in random_sizes(seed) {
                assert!((RANDOM_MIN..RANDOM_MAX).contains(&r.size), "{r:?}");
                assert!(r.dst_offset < 64 && r.src_offset < 64);
                octaves.insert(r.size.ilog2());
            }
        }
        assert_eq!(
            octaves.len(),
            (RANDOM_MAX.ilog2() - RANDOM_MIN.ilog2()) as usize
        );
    }

    /// The plan runs windows smallest first, edge checks last, every
    /// variant interleaved, and loses nothing on the way.
    #[test]
    fn the_plan_runs_windows_smallest_first_and_edges_last() {
        let side: Side = LinkConfig::Vanilla.into();
        let caps = arch::CpuCaps::default();
        let quick = Filter::default();
        let pats = Patterns::new(1, 0);
        let (specs, _) = plan(&side, &caps, &quick, u64::MAX, &pats);
        let key = |s: &CheckSpec| (s.edge.is_some(), s.total());
        assert!(specs.windows(2).all(|w| key(&w[0]) <= key(&w[1])));
        let mut per_variant = BTreeSet::new();
        for s in &specs {
            per_variant.insert((s.routine, s.variant.name));
        }
        let mut want = 0;
        for (routine, name) in per_variant {
            let v = routines::variants(routine, &side)
                .into_iter()
                .find(|v| v.name == name)
                .expect("a planned variant");
            let shapes = shapes(routine, &quick);
            want += variant_specs((routine, v), &shapes, &overlap_shapes(&quick), &quick).len();
        }
        assert_eq!(specs.len(), want);
    }

    #[test]
    fn a_size_larger_than_guest_ram_is_skipped_naming_the_mem_it_needs() {
        let side: Side = LinkConfig::Vanilla.into();
        let caps = arch::CpuCaps::default();
        let full = Filter {
            routines: vec![Routine::Memset, Routine::Memcpy],
            geometry: Geometry::Full,
            ..Filter::default()
        };
        let pats = Patterns::new(1, 0);
        // The default --mem (256 MiB) holds the quick huge size, not 4 GiB.
        let arena = (256 << 20) - (arch::ARENA_BASE - arch::RAM_BASE);
        let (specs, skipped) = plan(&side, &caps, &full, arena, &pats);
        assert!(specs.iter().any(|s| s.len == HUGE_SIZES[0]));
        // Variants the default caps lack (aarch64's MOPS) are skipped for
        // that, at every size.
        let huge: Vec<&CheckRecord> = skipped
            .iter()
            .filter(|r| r.size == FULL_HUGE_SIZES[0])
            .filter(|r| {
                !r.reason
                    .as_deref()
                    .is_some_and(|w| w.starts_with("the CPU does not have"))
            })
            .collect();
        assert!(!huge.is_empty());
        for r in huge {
            let reason = r.reason.as_deref().unwrap_or_default();
            let want = match r.routine {
                Routine::Memset => "needs --mem 4160MB or more (4097MB of arena)",
                _ => "needs --mem 8256MB or more (8197MB of arena)",
            };
            assert!(reason.starts_with(want), "{reason}");
        }
        // Only copies above 4 GiB would need a source that long.
        let (largest, copy) = largest_sizes(&full, arena);
        assert_eq!((largest, copy), (HUGE_SIZES[0], HUGE_SIZES[0]));
        let (largest, _) = largest_sizes(&full, 5 << 30);
        assert_eq!(largest, FULL_HUGE_SIZES[0]);
    }
}
