//! The host-side checker: seeded patterns, guard zones, and a fast
//! word-at-a-time comparison that reports the first bad offset, how many
//! bytes are wrong and what kind of wrong they are.
//!
//! Layout of one check (addresses in guest RAM):
//!
//! ```text
//! [dst - guard_lo, dst)     guard pattern  (must stay)
//! [dst, dst + len)          pre-image      (must become 0 / fill / source)
//! [dst + len, + guard_hi)   guard pattern  (must stay)
//! [src, src + len)          source bytes   (must stay; copies only)
//! ```
//!
//! No byte can hide: the pre-image of every target byte differs from what
//! the routine must write there (the target pattern never equals a fill
//! byte, and a copy's target starts as the complement of its source), so a
//! byte left unwritten is always seen. Pattern bytes are chosen so that
//! every classification is unambiguous: the target pattern, the guard
//! pattern and the fill bytes never share a byte value at the same position.
use crate::error::{Error, Result};
use crate::routines::Kind;
use crate::vmm::memory::GuestRam;
use rand_core::{Rng, SeedableRng};
use serde::Serialize;

/// Guard zone on each side: one page plus a cache line.
pub const GUARD: u64 = 4096 + 64;

/// Room in the source stream beyond the largest copy, for source offsets
/// (a page, as copy_page's source offset, plus a cache line) and for the
/// stream's continuation that a copy's guard after the target is made from.
pub(crate) const SOURCE_SLACK: usize = 2 * (4096 + 64);

/// Seeded byte patterns for one run.
#[derive(Debug, Clone)]
pub struct Patterns {
    pub target: [u8; 8],
    pub guard: [u8; 8],
    /// The seeded fill byte (never 0 or 0xff, which are filled too).
    pub fill: u8,
    seed: u64,
    source_len: usize,
    /// The seeded source stream for copies, made on first use (tens of MB:
    /// off the path to the first hypercall, and never for a run without
    /// copies).
    source: std::sync::OnceLock<Vec<u8>>,
    /// `BLOCK`-byte templates of the target and guard patterns, one per
    /// address phase (`addr % 8`), made on first use.
    templates: std::sync::OnceLock<[[Vec<u8>; 8]; 2]>,
}

/// The fill bytes every memset is verified with: zero (every memset the
/// nVHE hypervisor makes, and arm64's DC ZVA path), all ones, and the
/// seeded byte of [`Patterns::fill`].
pub(crate) const FIXED_FILLS: [u8; 2] = [0, 0xff];

impl Patterns {
    /// The patterns of `seed`, with a source stream long enough for a copy
    /// of `max_copy` bytes at any source offset the suite uses.
    pub fn new(seed: u64, max_copy: usize) -> Patterns {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x7061_7474);
        let mut byte = |avoid: &[u8]| loop {
            let b = (rng.next_u32() & 0xff) as u8;
            if !FIXED_FILLS.contains(&b) && !avoid.contains(&b) {
                return b;
            }
        };
        let fill = byte(&[]);
        let mut target = [0u8; 8];
        let mut guard = [0u8; 8];
        for i in 0..8 {
            // Never a fill byte nor the seeded fill's complement, so a
            // byte left unwritten never reads as written, and an inverted
            // fill byte always reads as "wrong value".
            target[i] = byte(&[fill, !fill]);
            guard[i] = byte(&[fill, target[i]]);
        }
        Patterns {
            target,
            guard,
            fill,
            seed,
            source_len: max_copy + SOURCE_SLACK,
            source: std::sync::OnceLock::new(),
            templates: std::sync::OnceLock::new(),
        }
    }

    /// Every fill byte a memset check may use (see [`FIXED_FILLS`]).
    pub fn fills(&self) -> [u8; 3] {
        [FIXED_FILLS[0], FIXED_FILLS[1], self.fill]
    }

    /// The source stream: a copy's source holds
    /// `source()[Placement::src_index..][..len]`. No byte value repeats
    /// within [`SOURCE_DISTINCT`] bytes, so a copy read from a source
    /// offset up to that far off is wrong at every byte, and a passed
    /// copy's result is a pre-image with no hiding place for the next copy
    /// at such a shift ([`Known::Copy`]).
    pub fn source(&self) -> &[u8] {
        self.source.get_or_init(|| {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(self.seed ^ 0x7372_6373);
            let mut source = vec![0u8; self.source_len];
            rng.fill_bytes(&mut source);
            distinct_walk(&mut source, &mut rng);
            source
        })
    }

    /// `BLOCK` bytes of the target or guard pattern laid out from address
    /// `addr`; since `BLOCK` is a multiple of 8 the same template serves
    /// every block of a range.
    fn template(&self, addr: u64, which: Pattern) -> &[u8] {
        let t = self.templates.get_or_init(|| {
            let make = |p: [u8; 8]| std::array::from_fn(|phase| template(phase as u64, p));
            [make(self.target), make(self.guard)]
        });
        &t[which as usize][(addr % 8) as usize]
    }
}

/// Which of the two address-anchored patterns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pattern {
    Target = 0,
    Guard = 1,
}

/// A copy's source offset may be this far off (or a passed copy's result
/// this far from the next copy's shift) and still differ at every byte.
pub(crate) const SOURCE_DISTINCT: u64 = 64;

/// Turn random bytes into a stream in which any [`SOURCE_DISTINCT`]
/// consecutive bytes differ: a walk `y += 1..=3` (mod 256: 64 steps sum to
/// 64..=192, never a multiple of 256) through a seeded permutation of the
/// byte values. Each random byte gives a step of 1 + its two low bits'
/// sum; eight steps at a time, their running sums in one multiplication
/// (at most 24 a lane, so no lane carries into the next).
fn distinct_walk(buf: &mut [u8], rng: &mut impl Rng) {
    const LANES: u64 = 0x0101_0101_0101_0101;
    let mut perm: [u8; 256] = std::array::from_fn(|i| i as u8);
    for i in (1..256).rev() {
        let j = (rng.next_u32() as usize) % (i + 1);
        perm.swap(i, j);
    }
    let mut y = 0u8;
    let mut chunks = buf.chunks_exact_mut(8);
    for c in &mut chunks {
        let r = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        let steps = LANES + (r & LANES) + ((r >> 1) & LANES);
        let sums = steps.wrapping_mul(LANES).to_le_bytes();
        for (b, s) in c.iter_mut().zip(sums) {
            *b = perm[y.wrapping_add(s) as usize];
        }
        y = y.wrapping_add(sums[7]);
    }
    for b in chunks.into_remainder() {
        y = y.wrapping_add(1 + (*b & 1) + ((*b >> 1) & 1));
        *b = perm[y as usize];
    }
}
const _: () = assert!(SOURCE_DISTINCT * 3 < 256);

/// Fill `buf`, which starts at guest address `addr`, with the 8-byte pattern
/// `pat` laid out by absolute address (byte `a` gets `pat[a % 8]`).
pub(crate) fn fill_pattern(buf: &mut [u8], addr: u64, pat: [u8; 8]) {
    let rot = (addr % 8) as usize;
    let word = u64::from_le_bytes(pat).rotate_right(8 * rot as u32);
    let wb = word.to_le_bytes();
    if buf.len() >= 4 * BLOCK {
        // Large: one block of the pattern, then block copies (the C
        // library's widest stores; a block is a multiple of 8, so the
        // phase carries over).
        let mut block = [0u8; BLOCK];
        for c in block.chunks_exact_mut(8) {
            c.copy_from_slice(&wb);
        }
        let mut blocks = buf.chunks_exact_mut(BLOCK);
        for c in &mut blocks {
            c.copy_from_slice(&block);
        }
        let rest = blocks.into_remainder();
        let n = rest.len();
        rest.copy_from_slice(&block[..n]);
        return;
    }
    let mut chunks = buf.chunks_exact_mut(8);
    for c in &mut chunks {
        c.copy_from_slice(&wb);
    }
    let rest = chunks.into_remainder();
    rest.copy_from_slice(&wb[..rest.len()]);
}

/// Block size of the fast comparison path.
const BLOCK: usize = 4096;

/// Compare `buf` with what it should hold, block by block at memcmp speed;
/// only a block that differs is walked byte by byte. `expected(i, n)` gives
/// the `n` expected bytes at index `i` (a multiple of `BLOCK`). Returns
/// (first bad index, bad byte count) and calls `each` for every bad byte.
fn scan<'a>(
    buf: &[u8],
    mut expected: impl FnMut(usize, usize) -> &'a [u8],
    mut each: impl FnMut(usize, u8),
) -> (Option<usize>, u64) {
    let mut tally = (None, 0u64);
    for (blk, c) in buf.chunks(BLOCK).enumerate() {
        let i = blk * BLOCK;
        scan_block(c, expected(i, c.len()), i, &mut tally, &mut each);
    }
    tally
}

/// [`scan`], and each block, once compared, is handed to `refill` (with
/// its index) to be overwritten while it is still in the cache.
fn scan_refill<'a>(
    buf: &mut [u8],
    mut refill: impl FnMut(usize, &mut [u8]),
    mut expected: impl FnMut(usize, usize) -> &'a [u8],
    mut each: impl FnMut(usize, u8),
) -> (Option<usize>, u64) {
    let mut tally = (None, 0u64);
    for (blk, c) in buf.chunks_mut(BLOCK).enumerate() {
        let i = blk * BLOCK;
        scan_block(c, expected(i, c.len()), i, &mut tally, &mut each);
        refill(i, c);
    }
    tally
}

/// One block of [`scan`]: the fast equality test, else a byte walk.
fn scan_block(
    c: &[u8],
    exp: &[u8],
    i: usize,
    (first, count): &mut (Option<usize>, u64),
    each: &mut impl FnMut(usize, u8),
) {
    if c == exp {
        return;
    }
    for (j, (b, e)) in c.iter().zip(exp).enumerate() {
        if b != e {
            first.get_or_insert(i + j);
            *count += 1;
            each(i + j, *b);
        }
    }
}

/// `BLOCK` bytes of `pat` laid out from guest address `addr`; since
/// `BLOCK` is a multiple of 8 the same template serves every block.
fn template(addr: u64, pat: [u8; 8]) -> Vec<u8> {
    let mut t = vec![0u8; BLOCK];
    fill_pattern(&mut t, addr, pat);
    t
}

/// How bytes went wrong.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Breakdown {
    /// Target bytes still holding the pre-fill pattern (not written).
    pub not_written: u64,
    /// Target bytes with a value that is neither expected nor the pre-fill.
    pub wrong_value: u64,
    /// Guard bytes after the end that changed (overrun).
    pub overrun: u64,
    /// Guard bytes before the start that changed (underrun).
    pub underrun: u64,
    /// Source bytes that changed.
    pub source_modified: u64,
    /// `--check whole`: bytes changed anywhere else in guest RAM outside
    /// the harness areas (stray writes far from the target).
    pub outside: u64,
}

impl Breakdown {
    pub fn total(&self) -> u64 {
        self.not_written
            + self.wrong_value
            + self.overrun
            + self.underrun
            + self.source_modified
            + self.outside
    }

    /// The dominant kind, for the one-word verdict.
    pub fn label(&self) -> &'static str {
        let v = [
            (self.underrun, "underrun"),
            (self.overrun, "overrun"),
            (self.wrong_value, "wrong value"),
            (self.not_written, "short"),
            (self.source_modified, "source modified"),
            (self.outside, "stray write"),
        ];
        v.iter()
            .filter(|(n, _)| *n > 0)
            .max_by_key(|(n, _)| *n)
            .map(|(_, l)| *l)
            .unwrap_or("ok")
    }
}

/// Outcome of one check.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Outcome {
    /// First bad byte, relative to `dst` (negative: in the guard before it).
    pub first_bad: Option<i64>,
    pub bad_bytes: u64,
    pub breakdown: Breakdown,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.bad_bytes == 0
    }
}

/// What a check's target must hold after the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Every byte this value (clear_page: 0; memset: its fill byte).
    Byte(u8),
    /// The source bytes (copies).
    Source,
    /// The source bytes, copied from `src = dst + delta` inside the same
    /// window (memmove: the buffers overlap). The part of the source
    /// outside the target must stay.
    Move { delta: i64 },
}

impl Expect {
    /// What a `kind` routine called with fill byte `fill` must leave.
    pub fn of(kind: Kind, fill: u8) -> Expect {
        match kind {
            Kind::Zero => Expect::Byte(0),
            Kind::Fill => Expect::Byte(fill),
            Kind::Copy => Expect::Source,
        }
    }
}

/// Where one check lives in guest RAM.
#[derive(Debug, Clone, Copy)]
pub struct Placement {
    pub dst: u64,
    pub len: u64,
    /// Source address for copies.
    pub src: Option<u64>,
    /// Where in the seeded source stream the source starts.
    pub src_index: usize,
    /// Guard bytes before and after the target (with `moved`: before and
    /// after the union of target and source).
    pub guard_lo: u64,
    pub guard_hi: u64,
    /// The source overlaps the target ([`Expect::Move`]).
    pub moved: bool,
}

impl Placement {
    /// A target of `len` bytes at `dst` with a [`GUARD`] on each side.
    pub fn new(dst: u64, len: u64, src: Option<u64>, src_index: usize) -> Placement {
        Placement {
            dst,
            len,
            src,
            src_index,
            guard_lo: GUARD,
            guard_hi: GUARD,
            moved: false,
        }
    }

    /// The bytes a call may write or read: the target, and with `moved`
    /// the source overlapping it.
    pub fn span(&self) -> (u64, u64) {
        match (self.moved, self.src) {
            (true, Some(src)) => (self.dst.min(src), self.dst.max(src) + self.len),
            _ => (self.dst, self.dst + self.len),
        }
    }

    /// The span with its guards: `[lo, hi)`.
    pub fn window(&self) -> (u64, u64) {
        let (lo, hi) = self.span();
        (lo - self.guard_lo, hi + self.guard_hi)
    }

    /// Where a copy puts the source stream: byte `a` of the target must
    /// become `source()[a - shift]` (wrapping arithmetic).
    pub fn shift(&self) -> u64 {
        self.dst.wrapping_sub(self.src_index as u64)
    }

    /// The bytes the source must hold (and a copy's target must become).
    pub fn source<'a>(&self, pats: &'a Patterns) -> Result<&'a [u8]> {
        let len = usize::try_from(self.len).unwrap_or(usize::MAX);
        self.src_index
            .checked_add(len)
            .and_then(|end| pats.source().get(self.src_index..end))
            .ok_or_else(|| {
                Error::internal(format!(
                    "the source pattern ({} bytes) is shorter than a copy of {len} bytes at index {}",
                    pats.source().len(),
                    self.src_index
                ))
            })
    }
}

/// A range of guest RAM whose content the harness knows, left there by the
/// last check's refill: the next check at the same place need not write
/// its pre-image again where this serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known {
    /// The target pattern ([`Refill::Target`]).
    Pattern { lo: u64, hi: u64 },
    /// A copy's pre-image ([`Refill::Complement`]): byte `a` holds
    /// `!source()[a - shift]`.
    Complement { lo: u64, hi: u64, shift: u64 },
    /// Every byte `value`: a constant check that passed.
    Constant { lo: u64, hi: u64, value: u8 },
    /// A copy that passed: byte `a` holds `source()[a - shift]`.
    Copy { lo: u64, hi: u64, shift: u64 },
}

impl Known {
    pub fn range(&self) -> (u64, u64) {
        match *self {
            Known::Pattern { lo, hi }
            | Known::Complement { lo, hi, .. }
            | Known::Constant { lo, hi, .. }
            | Known::Copy { lo, hi, .. } => (lo, hi),
        }
    }

    /// Whether this content may stand as the pre-image of a check on `p`
    /// that must leave `expect`: every byte the routine fails to write
    /// must differ from what it should write. The target pattern never
    /// equals a fill byte, so it serves every constant, never a copy (it
    /// equals a source byte 1 time in 256); a complement serves only the
    /// copy at its own shift, a constant every other constant, and a
    /// copy's result a copy at a shift up to [`SOURCE_DISTINCT`] away (the
    /// source stream never repeats a byte that close).
    pub fn serves(&self, expect: Expect, p: &Placement) -> bool {
        match (*self, expect) {
            (Known::Pattern { .. }, Expect::Byte(_)) => true,
            (Known::Complement { shift, .. }, Expect::Source) => shift == p.shift(),
            (Known::Constant { value, .. }, Expect::Byte(v)) => v != value,
            (Known::Copy { shift, .. }, Expect::Source) => near(shift, p.shift()),
            _ => false,
        }
    }

    /// The byte this content holds at `a` (inside the range), where it is
    /// not what `prepare_target` writes (a constant, a copy's result).
    fn kept_at(&self, a: u64, pats: &Patterns) -> Option<u8> {
        if !(self.range().0..self.range().1).contains(&a) {
            return None;
        }
        match *self {
            Known::Constant { value, .. } => Some(value),
            Known::Copy { shift, .. } => pats.source().get(a.wrapping_sub(shift) as usize).copied(),
            Known::Pattern { .. } | Known::Complement { .. } => None,
        }
    }
}

/// Whether two copy shifts are 1..=[`SOURCE_DISTINCT`] apart.
pub fn near(a: u64, b: u64) -> bool {
    (1..=SOURCE_DISTINCT).contains(&(a.wrapping_sub(b) as i64).unsigned_abs())
}

/// When a copy's source is compared with what it must hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SourceCheck {
    #[default]
    /// In this check (every check of a copy, unless the suite defers it).
    Now,
    /// Later, by the caller, over several checks' shared source area
    /// (`suite::run` does this, and re-runs the checks one by one with a
    /// fresh source if that area changed).
    Deferred,
}

/// Write `pattern` (seeded by guest address) over `[gpa, gpa + len)`.
///
/// Callers run between guest commands: a vCPU runs only inside a `Vcpu`
/// method, which returns with the guest stopped in the host, and the host
/// thread that prepares a region is the one that then runs the command.
fn fill_guest(ram: &GuestRam, gpa: u64, len: u64, pattern: [u8; 8]) -> Result<()> {
    // SAFETY: no vCPU runs while the host prepares (see above), and the
    // slice is dropped before this function returns.
    fill_pattern(unsafe { ram.slice_mut(gpa, len)? }, gpa, pattern);
    Ok(())
}

/// Write the guard pattern on both sides of the target only (the target
/// itself stays untouched, e.g. for a first-touch measurement).
pub(crate) fn prepare_guards(ram: &GuestRam, p: &Placement, pats: &Patterns) -> Result<()> {
    fill_guest(ram, p.dst - p.guard_lo, p.guard_lo, pats.guard)?;
    fill_guest(ram, p.dst + p.len, p.guard_hi, pats.guard)
}

/// Write the source of a copy (if `p` has one).
pub(crate) fn prepare_source(ram: &GuestRam, p: &Placement, pats: &Patterns) -> Result<()> {
    match p.src {
        Some(src) => Ok(ram.write_bytes(src, p.source(pats)?)?),
        None => Ok(()),
    }
}

/// Write a copy's pre-image over `[lo, hi)` of its target: the complement
/// of the source byte each target byte must become, so that no unwritten
/// byte can read as copied.
fn fill_complement(ram: &GuestRam, p: &Placement, pats: &Patterns, lo: u64, hi: u64) -> Result<()> {
    if lo >= hi {
        return Ok(());
    }
    let src = p.source(pats)?;
    let (a, b) = ((lo - p.dst) as usize, (hi - p.dst) as usize);
    // SAFETY: as in `fill_guest`.
    let t = unsafe { ram.slice_mut(lo, hi - lo)? };
    complement_into(t, &src[a..b]);
    Ok(())
}

/// `dst[i] = !src[i]`.
fn complement_into(dst: &mut [u8], src: &[u8]) {
    for (t, s) in dst.iter_mut().zip(src) {
        *t = !s;
    }
}

/// Write the patterns around and into the target: the guard pattern in
/// the guards; in the target, the target pattern before a constant
/// ([`Expect::Byte`]) and the complement of the source before a copy.
pub(crate) fn prepare_target(
    ram: &GuestRam,
    p: &Placement,
    pats: &Patterns,
    expect: Expect,
) -> Result<()> {
    prepare_target_except(ram, p, pats, expect, None)
}

/// [`prepare_target`], skipping the part of the target inside `prepared`,
/// a range known to hold this check's pre-image already (see
/// [`Known::serves`]).
pub(crate) fn prepare_target_except(
    ram: &GuestRam,
    p: &Placement,
    pats: &Patterns,
    expect: Expect,
    prepared: Option<Known>,
) -> Result<()> {
    if let Expect::Move { .. } = expect {
        return prepare_move(ram, p, pats);
    }
    prepare_guards(ram, p, pats)?;
    let (lo, hi) = (p.dst, p.dst + p.len);
    let fill = |a: u64, b: u64| match expect {
        Expect::Byte(_) => fill_guest(ram, a, b - a, pats.target),
        Expect::Source | Expect::Move { .. } => fill_complement(ram, p, pats, a, b),
    };
    match prepared.filter(|k| k.serves(expect, p)).map(|k| k.range()) {
        Some((a, b)) if a < hi && lo < b => {
            if lo < a {
                fill(lo, a)?;
            }
            if b < hi {
                fill(b, hi)?;
            }
            Ok(())
        }
        _ => fill(lo, hi),
    }
}

/// An overlapping copy's window: guards around the span, the complement
/// of the expected bytes in the target, then the source over it (where
/// the two overlap, the source byte a shift of at most
/// [`SOURCE_DISTINCT`] away, which never equals the expected one).
fn prepare_move(ram: &GuestRam, p: &Placement, pats: &Patterns) -> Result<()> {
    let (lo, hi) = p.span();
    fill_guest(ram, lo - p.guard_lo, p.guard_lo, pats.guard)?;
    fill_guest(ram, hi, p.guard_hi, pats.guard)?;
    fill_complement(ram, p, pats, p.dst, p.dst + p.len)?;
    prepare_source(ram, p, pats)
}

/// Write the patterns around and into the target, and the source.
pub fn prepare(ram: &GuestRam, p: &Placement, pats: &Patterns, expect: Expect) -> Result<()> {
    prepare_target(ram, p, pats, expect)?;
    prepare_source(ram, p, pats)
}

/// How much guest RAM a check verifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The target, a guard on each side, and the copy source.
    #[default]
    Target,
    /// Also every other byte of guest RAM from the blob window to the end
    /// (blob, arena): "nothing more" was written. The harness areas below
    /// the blob window (page tables, descriptor tables, mailboxes, stacks)
    /// change legitimately and are not compared. Costs a host copy of that
    /// RAM and two passes over it per check.
    Whole,
}

/// A host copy of guest RAM from the blob window to the end, kept across
/// the checks of one VM: taken once, then refreshed only where the harness
/// itself writes (each check's target, guards and source, before and after
/// the guest runs), so each check costs one comparison pass, not a copy.
pub struct Snapshot {
    base: u64,
    bytes: Vec<u8>,
}

impl Snapshot {
    /// Copy `[arch::BLOB_WINDOW, end of RAM)`.
    pub fn take(ram: &GuestRam) -> Result<Snapshot> {
        let base = crate::arch::BLOB_WINDOW;
        let len = ram.end().saturating_sub(base);
        let mut bytes = vec![0u8; usize::try_from(len).unwrap_or(usize::MAX)];
        ram.read_into(base, &mut bytes)?;
        Ok(Snapshot { base, bytes })
    }

    /// Re-read the areas of `p` the harness owns: the target with its
    /// guards, and the source.
    pub fn refresh(&mut self, ram: &GuestRam, p: &Placement) -> Result<()> {
        let (lo, hi) = p.window();
        let mut areas = vec![(lo, hi - lo)];
        if let Some(src) = p.src {
            areas.push((src, p.len));
        }
        for (gpa, len) in areas {
            let lo = gpa.max(self.base);
            let hi = (gpa + len).min(self.base + self.bytes.len() as u64);
            if lo < hi {
                let (a, b) = ((lo - self.base) as usize, (hi - self.base) as usize);
                ram.read_into(lo, &mut self.bytes[a..b])?;
            }
        }
        Ok(())
    }

    /// Bytes that changed outside the target's window with its guards (that
    /// range is judged by [`check`]), and the first, relative to `dst`.
    pub fn changed_outside(&self, ram: &GuestRam, p: &Placement) -> Result<(u64, Option<i64>)> {
        // SAFETY: as in `check_with`: called between commands by the suite,
        // which holds the `&mut Vm` owning every vCPU.
        let now = unsafe { ram.slice(self.base, self.bytes.len() as u64) }?;
        let (lo, hi) = p.window();
        let skip_lo = lo.saturating_sub(self.base) as usize;
        let skip_hi = hi.saturating_sub(self.base) as usize;
        let mut n = 0u64;
        let mut first = None;
        for (lo, hi) in [
            (0, skip_lo.min(now.len())),
            (skip_hi.min(now.len()), now.len()),
        ] {
            let (a, b) = (&now[lo..hi], &self.bytes[lo..hi]);
            if a == b {
                continue;
            }
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                if x != y {
                    n += 1;
                    if first.is_none() {
                        first = Some((self.base + (lo + i) as u64) as i64 - p.dst as i64);
                    }
                }
            }
        }
        Ok((n, first))
    }
}

/// Check that `p` holds `expect` (its source included).
pub fn check(ram: &GuestRam, p: &Placement, expect: Expect, pats: &Patterns) -> Result<Outcome> {
    check_with(ram, p, expect, pats, How::default())
}

/// How [`check_with`] goes about a check.
#[derive(Debug, Clone, Copy, Default)]
pub struct How {
    pub source: SourceCheck,
    pub refill: Refill,
    /// What served as part of the pre-image ([`prepare_target_except`]'s
    /// `prepared`): what tells "not written" from "wrong value" there.
    pub kept: Option<Known>,
}

/// Bytes of a copy's source (from `src`, holding `expected`) that changed.
pub(crate) fn source_changes(ram: &GuestRam, src: u64, expected: &[u8]) -> Result<u64> {
    // SAFETY: as in `check_with`: between commands, with the `&mut Vm`
    // that owns every vCPU of this RAM held by the caller.
    let s = unsafe { ram.slice(src, expected.len() as u64) }?;
    Ok(if s == expected {
        0
    } else {
        s.iter().zip(expected).filter(|(a, b)| a != b).count() as u64
    })
}

/// Whether [`check_with`] leaves the target as it found it, or writes the
/// next check's pre-image over it as it goes (the next check at the same
/// place then finds it prepared: one pass over the target instead of two).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Refill {
    #[default]
    No,
    /// The target pattern, the pre-image of a constant.
    Target,
    /// The pre-image of the copy at `shift` whose target overlaps this
    /// one in `[lo, hi)`, written there only.
    Complement { lo: u64, hi: u64, shift: u64 },
}

impl Refill {
    /// What the target holds after a check with this refill.
    pub fn leaves(self, p: &Placement) -> Option<Known> {
        let (lo, hi) = (p.dst, p.dst + p.len);
        match self {
            Refill::No => None,
            Refill::Target => Some(Known::Pattern { lo, hi }),
            Refill::Complement { lo, hi, shift } => Some(Known::Complement { lo, hi, shift }),
        }
    }
}

/// [`check`], with the source compared now or left to the caller, and the
/// target optionally refilled.
pub(crate) fn check_with(
    ram: &GuestRam,
    p: &Placement,
    expect: Expect,
    pats: &Patterns,
    how: How,
) -> Result<Outcome> {
    if let Expect::Move { .. } = expect {
        return check_move(ram, p, pats);
    }
    let mut b = Breakdown::default();
    let mut first: Option<i64> = None;
    let mut note = |off: i64| {
        if first.is_none_or(|f| off < f) {
            first = Some(off);
        }
    };

    let (lo, hi) = (p.dst - p.guard_lo, p.dst + p.len);
    let (f, n) = scan_guard(ram, lo, p.guard_lo, pats)?;
    if let Some(f) = f {
        note(f as i64 - p.guard_lo as i64);
        b.underrun = n;
    }

    let (f, not_written, wrong) = check_target(ram, p, expect, pats, how)?;
    if let Some(f) = f {
        note(f as i64);
    }
    b.not_written = not_written;
    b.wrong_value = wrong;

    let (f, n) = scan_guard(ram, hi, p.guard_hi, pats)?;
    if let Some(f) = f {
        note((p.len + f as u64) as i64);
        b.overrun = n;
    }

    if let (Some(src), SourceCheck::Now) = (p.src, how.source) {
        b.source_modified = source_changes(ram, src, p.source(pats)?)?;
    }
    Ok(Outcome {
        first_bad: first,
        bad_bytes: b.total(),
        breakdown: b,
    })
}

/// [`check_with`] for an overlapping copy: guards around the span, the
/// target against the source stream, and the part of the source outside
/// the target against what was written there.
fn check_move(ram: &GuestRam, p: &Placement, pats: &Patterns) -> Result<Outcome> {
    let src = p
        .src
        .ok_or_else(|| Error::internal("an overlapping copy without a source"))?;
    let stream = p.source(pats)?;
    let (lo, hi) = p.span();
    let mut b = Breakdown::default();
    let mut first: Option<i64> = None;
    let mut note = |off: i64| {
        if first.is_none_or(|f| off < f) {
            first = Some(off);
        }
    };
    let rel = |a: u64| a as i64 - p.dst as i64;
    let (f, n) = scan_guard(ram, lo - p.guard_lo, p.guard_lo, pats)?;
    if let Some(f) = f {
        note(rel(lo - p.guard_lo + f as u64));
        b.underrun = n;
    }
    let (f, n) = scan_guard(ram, hi, p.guard_hi, pats)?;
    if let Some(f) = f {
        note(rel(hi + f as u64));
        b.overrun = n;
    }
    // SAFETY: as in `scan_guard`.
    let span = unsafe { ram.slice(lo, hi - lo) }?;
    let in_src = |a: u64| (src..src + p.len).contains(&a);
    for (a, &v) in (lo..hi).zip(span) {
        let in_dst = (p.dst..p.dst + p.len).contains(&a);
        let from_src = in_src(a).then(|| stream[(a - src) as usize]);
        let (want, pre) = if in_dst {
            let want = stream[(a - p.dst) as usize];
            (want, from_src.unwrap_or(!want))
        } else {
            // Outside the target: the source, left alone.
            let s = from_src.unwrap_or(v);
            (s, s)
        };
        if v == want {
            continue;
        }
        note(rel(a));
        match (in_dst, v == pre) {
            (true, true) => b.not_written += 1,
            (true, false) => b.wrong_value += 1,
            (false, _) => b.source_modified += 1,
        }
    }
    Ok(Outcome {
        first_bad: first,
        bad_bytes: b.total(),
        breakdown: b,
    })
}

/// Compare the guard `[gpa, gpa + len)` with the guard pattern: the first
/// changed byte (relative to `gpa`) and how many changed.
fn scan_guard(ram: &GuestRam, gpa: u64, len: u64, pats: &Patterns) -> Result<(Option<usize>, u64)> {
    // SAFETY: the checker runs between commands, called by the suite
    // (`suite::verify`) or bench's verification pass, which hold the
    // `&mut Vm` that owns every vCPU of this RAM; vCPUs run only inside
    // `Vcpu` methods, so none runs while this slice lives.
    let view = unsafe { ram.slice(gpa, len) }?;
    let t = pats.template(gpa, Pattern::Guard);
    Ok(scan(view, |_, n| &t[..n], |_, _| {}))
}

/// The target part of [`check_with`]: the first bad byte (relative to
/// `dst`) and the bad bytes that still hold the pre-image (not written)
/// and that hold anything else (wrong value).
fn check_target(
    ram: &GuestRam,
    p: &Placement,
    expect: Expect,
    pats: &Patterns,
    How { refill, kept, .. }: How,
) -> Result<(Option<usize>, u64, u64)> {
    let pattern = |a: u64| pats.target[(a % 8) as usize];
    let (value, src) = match expect {
        Expect::Byte(v) => (v, &[][..]),
        Expect::Source | Expect::Move { .. } => (0, p.source(pats)?),
    };
    // The pre-image `prepare_target_except` wrote or kept.
    let pre = |i: usize| {
        let a = p.dst + i as u64;
        match expect {
            Expect::Byte(_) => kept
                .and_then(|k| k.kept_at(a, pats))
                .unwrap_or_else(|| pattern(a)),
            Expect::Source | Expect::Move { .. } => {
                kept.and_then(|k| k.kept_at(a, pats)).unwrap_or(!src[i])
            }
        }
    };
    let mut not_written = 0;
    let mut wrong = 0;
    let constant = [value; BLOCK];
    let expected = |i: usize, n: usize| match expect {
        Expect::Source | Expect::Move { .. } => &src[i..i + n],
        Expect::Byte(_) => &constant[..n],
    };
    let each = |i, v| {
        if v == pre(i) {
            not_written += 1
        } else {
            wrong += 1
        }
    };
    let (f, _) = scan_target(ram, p, pats, refill, expected, each)?;
    Ok((f, not_written, wrong))
}

/// Scan the target at `p` block by block against `expected` (`each` gets
/// every byte that differs) and, with a `refill`, write the next check's
/// pre-image over each block once it is scanned.
fn scan_target<'a>(
    ram: &GuestRam,
    p: &Placement,
    pats: &Patterns,
    refill: Refill,
    expected: impl FnMut(usize, usize) -> &'a [u8],
    each: impl FnMut(usize, u8),
) -> Result<(Option<usize>, u64)> {
    Ok(match refill {
        // SAFETY: as in `scan_guard`.
        Refill::No => scan(unsafe { ram.slice(p.dst, p.len) }?, expected, each),
        Refill::Target => {
            // SAFETY: as above; the only slice of the target alive, dropped
            // before the caller reads the guard after it.
            let target = unsafe { ram.slice_mut(p.dst, p.len) }?;
            let t = pats.template(p.dst, Pattern::Target);
            let refill = |_, c: &mut [u8]| {
                let n = c.len();
                c.copy_from_slice(&t[..n])
            };
            scan_refill(target, refill, expected, each)
        }
        Refill::Complement { lo, hi, shift } => {
            // SAFETY: as above.
            let target = unsafe { ram.slice_mut(p.dst, p.len) }?;
            let stream = pats.source();
            let refill = |i: usize, c: &mut [u8]| {
                let a0 = p.dst + i as u64;
                let (a, b) = (lo.max(a0), hi.min(a0 + c.len() as u64));
                if a >= b {
                    return;
                }
                let s0 = a.wrapping_sub(shift) as usize;
                if let Some(s) = stream.get(s0..s0 + (b - a) as usize) {
                    complement_into(&mut c[(a - a0) as usize..(b - a0) as usize], s);
                }
            };
            scan_refill(target, refill, expected, each)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_never_collide() {
        for seed in 0..200 {
            let p = Patterns::new(seed, 16);
            for i in 0..8 {
                assert_ne!(p.target[i], 0);
                assert_ne!(p.guard[i], 0);
                assert_ne!(p.target[i], p.fill);
                assert_ne!(p.guard[i], p.fill);
                assert_ne!(p.guard[i], p.target[i]);
                assert_ne!(p.target[i], !p.fill);
                for f in FIXED_FILLS {
                    assert_ne!(p.target[i], f);
                    assert_ne!(p.guard[i], f);
                    assert_ne!(p.fill, f);
                }
            }
        }
        assert_eq!(Patterns::new(7, 64).source(), Patterns::new(7, 64).source());
        assert_ne!(Patterns::new(7, 64).source(), Patterns::new(8, 64).source());
        assert_eq!(Patterns::new(7, 64).source().len(), 64 + SOURCE_SLACK);
    }

    #[test]
    fn fill_pattern_is_address_anchored() {
        let pat = [1, 2, 3, 4, 5, 6, 7, 8];
        let mut a = vec![0u8; 21];
        fill_pattern(&mut a, 0x1003, pat);
        for (i, b) in a.iter().enumerate() {
            assert_eq!(*b, pat[(0x1003 + i) % 8]);
        }
        let t = template(0x1003, pat);
        assert_eq!(t[..21], a[..]);
        // The block-copy path for large buffers, with a ragged end.
        let mut big = vec![0u8; 5 * BLOCK + 13];
        fill_pattern(&mut big, 0x2005, pat);
        for (i, b) in big.iter().enumerate() {
            assert_eq!(*b, pat[(0x2005 + i) % 8], "byte {i}");
        }
    }

    #[test]
    fn scan_counts_and_locates() {
        let mut buf = vec![0u8; 100];
        buf[13] = 1;
        buf[14] = 1;
        buf[99] = 9;
        let mut seen = vec![];
        let zeros = vec![0u8; BLOCK];
        let (first, n) = scan(&buf, |_, n| &zeros[..n], |i, v| seen.push((i, v)));
        assert_eq!(first, Some(13));
        assert_eq!(n, 3);
        assert_eq!(seen, vec![(13, 1), (14, 1), (99, 9)]);
        let (first, n) = scan(&[0u8; 64], |_, n| &zeros[..n], |_, _| {});
        // Differences past the first block are found too.
        let mut big = vec![0u8; 3 * BLOCK + 5];
        big[2 * BLOCK + 4] = 7;
        let (f, c) = scan(&big, |_, n| &zeros[..n], |_, _| {});
        assert_eq!((f, c), (Some(2 * BLOCK + 4), 1));
        assert_eq!((first, n), (None, 0));
    }

    #[test]
    fn scan_refill_reports_like_scan_and_leaves_the_template() {
        let mut buf = vec![0u8; 2 * BLOCK + 100];
        buf[5] = 3;
        buf[BLOCK + 7] = 4;
        let zeros = vec![0u8; BLOCK];
        let refill = template(0x1000, [9, 8, 7, 6, 5, 4, 3, 2]);
        let before = scan(&buf, |_, n| &zeros[..n], |_, _| {});
        let mut seen = vec![];
        let after = scan_refill(
            &mut buf,
            |_, c| {
                let n = c.len();
                c.copy_from_slice(&refill[..n])
            },
            |_, n| &zeros[..n],
            |i, v| seen.push((i, v)),
        );
        assert_eq!(before, after);
        assert_eq!(after, (Some(5), 2));
        assert_eq!(seen, vec![(5, 3), (BLOCK + 7, 4)]);
        let mut want = vec![0u8; buf.len()];
        fill_pattern(&mut want, 0x1000, [9, 8, 7, 6, 5, 4, 3, 2]);
        assert_eq!(buf, want);
    }

    #[test]
    fn the_pattern_serves_constants_never_copies() {
        let p = Placement::new(0x10005, 4096, Some(0x900000), 1);
        let k = Known::Pattern {
            lo: 0x10000,
            hi: 0x12000,
        };
        for v in [0, 0xff, 0x5a] {
            assert!(k.serves(Expect::Byte(v), &p));
        }
        assert!(!k.serves(Expect::Source, &p));
        assert_eq!(k.range(), (0x10000, 0x12000));
        let c = |shift| Known::Complement {
            lo: 0x10000,
            hi: 0x12000,
            shift,
        };
        assert_eq!(p.shift(), 0x10004);
        assert!(c(p.shift()).serves(Expect::Source, &p));
        assert!(
            !c(p.shift() + 1).serves(Expect::Source, &p),
            "another shift"
        );
        assert!(!c(p.shift()).serves(Expect::Byte(0), &p));
        assert_eq!(
            Refill::Complement {
                lo: 1,
                hi: 2,
                shift: 3
            }
            .leaves(&p),
            Some(Known::Complement {
                lo: 1,
                hi: 2,
                shift: 3
            })
        );
        assert_eq!(Expect::of(Kind::Zero, 7), Expect::Byte(0));
        assert_eq!(Expect::of(Kind::Fill, 7), Expect::Byte(7));
        assert_eq!(Expect::of(Kind::Copy, 7), Expect::Source);
    }

    /// No hiding place: for every expectation (zero, every fill byte, a
    /// copy), every way the pre-image is made (fresh, or partly left by a
    /// refilling check before) and every refill mode, a routine that
    /// writes nothing is caught at every byte, and one that skips a single
    /// byte is caught at exactly that byte, whatever the seed.
    #[test]
    fn every_unwritten_byte_is_seen() {
        let ram = GuestRam::new(0, 1 << 20, crate::vmm::memory::Backing::Anon, false).unwrap();
        for seed in 0..24 {
            let pats = Patterns::new(seed, 4096);
            let mut p = Placement::new(0x10003, 301, Some(0x80000), (seed % 64) as usize);
            p.guard_hi = 77;
            let mut expects: Vec<Expect> = pats.fills().iter().map(|&v| Expect::Byte(v)).collect();
            expects.push(Expect::Source);
            let refills = [
                Refill::No,
                Refill::Target,
                Refill::Complement {
                    lo: p.dst + 10,
                    hi: p.dst + 200,
                    shift: p.shift() + 3,
                },
            ];
            for expect in expects {
                for known in knowns(&p, expect, seed) {
                    for refill in refills {
                        let what = format!("seed {seed} {expect:?} {known:?} {refill:?}");
                        nothing_written(&ram, &p, &pats, (expect, known, refill), &what);
                        for skip in [0, 1, 150, p.len - 1] {
                            one_skipped(&ram, &p, &pats, (expect, refill, skip), &what);
                        }
                    }
                }
            }
        }
    }

    /// Every kind of content a check may find as (part of) its pre-image.
    fn knowns(p: &Placement, expect: Expect, seed: u64) -> [Option<Known>; 6] {
        [
            None,
            Some(Known::Pattern {
                lo: 0x10000,
                hi: 0x10100,
            }),
            Some(Known::Constant {
                lo: p.dst + 5,
                hi: p.dst + 250,
                value: match expect {
                    Expect::Byte(v) => !v,
                    Expect::Source | Expect::Move { .. } => 0,
                },
            }),
            Some(Known::Complement {
                lo: p.dst,
                hi: p.dst + 100,
                shift: p.shift(),
            }),
            Some(Known::Copy {
                lo: p.dst + 1,
                hi: p.dst + 300,
                shift: p.shift().wrapping_add(1 + seed % SOURCE_DISTINCT),
            }),
            Some(Known::Copy {
                lo: p.dst,
                hi: p.dst + 301,
                shift: p.shift().wrapping_sub(SOURCE_DISTINCT),
            }),
        ]
    }

    /// Write what `known` claims is there.
    fn lay(ram: &GuestRam, p: &Placement, pats: &Patterns, known: Option<Known>) {
        match known {
            Some(Known::Pattern { lo, hi }) => fill_guest(ram, lo, hi - lo, pats.target).unwrap(),
            Some(Known::Complement { lo, hi, .. }) => {
                fill_complement(ram, p, pats, lo, hi).unwrap()
            }
            Some(Known::Constant { lo, hi, value }) => ram
                .write_bytes(lo, &vec![value; (hi - lo) as usize])
                .unwrap(),
            Some(Known::Copy { lo, hi, shift }) => {
                let at = |a: u64| pats.source()[a.wrapping_sub(shift) as usize];
                let bytes: Vec<u8> = (lo..hi).map(at).collect();
                ram.write_bytes(lo, &bytes).unwrap()
            }
            None => {}
        }
    }

    /// A routine that writes nothing is caught at every byte, as unwritten.
    fn nothing_written(
        ram: &GuestRam,
        p: &Placement,
        pats: &Patterns,
        (expect, known, refill): (Expect, Option<Known>, Refill),
        what: &str,
    ) {
        lay(ram, p, pats, known);
        prepare_target_except(ram, p, pats, expect, known).unwrap();
        prepare_source(ram, p, pats).unwrap();
        let how = How {
            source: SourceCheck::Now,
            refill,
            kept: known.filter(|k| k.serves(expect, p)),
        };
        let out = check_with(ram, p, expect, pats, how).unwrap();
        assert_eq!(out.breakdown.not_written, p.len, "{what}");
        assert_eq!(out.bad_bytes, p.len, "{what}");
    }

    /// A routine that writes everything but byte `skip` is caught there.
    fn one_skipped(
        ram: &GuestRam,
        p: &Placement,
        pats: &Patterns,
        (expect, refill, skip): (Expect, Refill, u64),
        what: &str,
    ) {
        prepare_target_except(ram, p, pats, expect, None).unwrap();
        let mut want = match expect {
            Expect::Byte(v) => vec![v; p.len as usize],
            Expect::Source | Expect::Move { .. } => p.source(pats).unwrap().to_vec(),
        };
        let mut pre = [0u8];
        ram.read_into(p.dst + skip, &mut pre).unwrap();
        want[skip as usize] = pre[0];
        ram.write_bytes(p.dst, &want).unwrap();
        let how = How {
            refill,
            ..How::default()
        };
        let out = check_with(ram, p, expect, pats, how).unwrap();
        assert_eq!(out.first_bad, Some(skip as i64), "{what} skip {skip}");
        assert_eq!(out.breakdown.not_written, 1, "{what} skip {skip}");
        assert_eq!(out.bad_bytes, 1, "{what} skip {skip}");
    }

    #[test]
    fn the_source_never_repeats_a_byte_within_its_distance() {
        for seed in 0..8 {
            let pats = Patterns::new(seed, 1 << 16);
            let src = pats.source();
            for i in 0..src.len() {
                for d in 1..=SOURCE_DISTINCT as usize {
                    if let Some(b) = src.get(i + d) {
                        assert_ne!(src[i], *b, "seed {seed} at {i} + {d}");
                    }
                }
            }
            // Still every byte value, about evenly.
            let mut seen = [0u32; 256];
            for &b in src {
                seen[b as usize] += 1;
            }
            assert!(seen.iter().all(|&n| n > 100), "{seen:?}");
        }
        assert!(near(10, 11) && near(11, 10) && near(0, u64::MAX) && near(64, 0));
        assert!(!near(5, 5) && !near(0, 65));
    }

    /// memmove checks: a correct move passes at every delta; a forward
    /// byte loop breaks where the source lies below the target, a backward
    /// one where it lies above, and a move that skips a byte is short
    /// there; a write into the source outside the target is named.
    #[test]
    fn overlapping_copies_catch_the_wrong_direction() {
        let ram = GuestRam::new(0, 1 << 20, crate::vmm::memory::Backing::Anon, false).unwrap();
        let pats = Patterns::new(9, 4096);
        // A move: the window's bytes, target and source offsets, length.
        type Mover<'a> = &'a dyn Fn(&mut [u8], usize, usize, usize);
        let run = |delta: i64, how: Mover| {
            let mut p =
                Placement::new(0x20000, 200, Some(0x20000u64.wrapping_add_signed(delta)), 3);
            p.moved = true;
            let expect = Expect::Move { delta };
            prepare_target(&ram, &p, &pats, expect).unwrap();
            let (lo, hi) = p.span();
            let mut buf = vec![0u8; (hi - lo) as usize];
            ram.read_into(lo, &mut buf).unwrap();
            let (d, s) = ((p.dst - lo) as usize, (p.src.unwrap() - lo) as usize);
            how(&mut buf, d, s, p.len as usize);
            ram.write_bytes(lo, &buf).unwrap();
            check(&ram, &p, expect, &pats).unwrap()
        };
        let memmove = |b: &mut [u8], d: usize, s: usize, n: usize| b.copy_within(s..s + n, d);
        let forward = |b: &mut [u8], d: usize, s: usize, n: usize| {
            for i in 0..n {
                b[d + i] = b[s + i];
            }
        };
        let backward = |b: &mut [u8], d: usize, s: usize, n: usize| {
            for i in (0..n).rev() {
                b[d + i] = b[s + i];
            }
        };
        for delta in [-64, -7, -1, 1, 8, 64] {
            assert!(run(delta, &memmove).passed(), "{delta}");
            let f = run(delta, &forward);
            let b = run(delta, &backward);
            assert_eq!(f.passed(), delta > 0, "forward, {delta}: {f:?}");
            assert_eq!(b.passed(), delta < 0, "backward, {delta}: {b:?}");
        }
        let skip = |b: &mut [u8], d: usize, s: usize, n: usize| {
            let keep = b[d + 150];
            b.copy_within(s..s + n, d);
            b[d + 150] = keep;
        };
        for delta in [-64, -1, 1, 64] {
            let out = run(delta, &skip);
            assert_eq!(out.first_bad, Some(150), "{delta}");
            assert_eq!(
                (out.breakdown.not_written, out.bad_bytes),
                (1, 1),
                "{delta}"
            );
        }
        let scribble = |b: &mut [u8], d: usize, s: usize, n: usize| {
            b.copy_within(s..s + n, d);
            let outside = if s > d { s + n - 1 } else { s };
            b[outside] ^= 0xff;
        };
        let out = run(16, &scribble);
        assert_eq!(out.breakdown.source_modified, 1);
        assert_eq!(out.first_bad, Some(200 + 16 - 1));
        let out = run(-16, &scribble);
        assert_eq!(
            (out.breakdown.source_modified, out.first_bad),
            (1, Some(-16))
        );
    }

    #[test]
    fn guards_are_as_wide_as_the_placement_says() {
        let ram = GuestRam::new(0, 1 << 20, crate::vmm::memory::Backing::Anon, false).unwrap();
        let pats = Patterns::new(3, 0);
        let mut p = Placement::new(0x20000, 64, None, 0);
        (p.guard_lo, p.guard_hi) = (100, 30);
        assert_eq!(p.window(), (0x20000 - 100, 0x20000 + 64 + 30));
        prepare_target(&ram, &p, &pats, Expect::Byte(0)).unwrap();
        ram.write_bytes(0x20000, &[0; 64]).unwrap();
        assert!(check(&ram, &p, Expect::Byte(0), &pats).unwrap().passed());
        // The last guard byte after, the first before.
        ram.write_bytes(0x20000 + 64 + 29, &[0]).unwrap();
        ram.write_bytes(0x20000 - 100, &[0]).unwrap();
        let out = check(&ram, &p, Expect::Byte(0), &pats).unwrap();
        assert_eq!((out.breakdown.overrun, out.breakdown.underrun), (1, 1));
        assert_eq!(out.first_bad, Some(-100));
    }

    #[test]
    fn prepare_skips_only_what_is_prepared() {
        let ram = GuestRam::new(0, 1 << 20, crate::vmm::memory::Backing::Anon, false).unwrap();
        let pats = Patterns::new(1, 0);
        let p = Placement::new(0x10000, 0x3000, None, 0);
        // A stale byte inside the prepared range stays (it is trusted to
        // hold the pattern); everything outside it is written.
        fill_guest(&ram, 0x10400, 0xc00, pats.target).unwrap();
        ram.write_bytes(0x10800, &[0xee]).unwrap();
        let known = Some(Known::Pattern {
            lo: 0x10400,
            hi: 0x11000,
        });
        prepare_target_except(&ram, &p, &pats, Expect::Byte(0), known).unwrap();
        let mut t = vec![0u8; 0x3000];
        ram.read_into(0x10000, &mut t).unwrap();
        let mut want = vec![0u8; 0x3000];
        fill_pattern(&mut want, 0x10000, pats.target);
        assert_eq!(t[0x800], 0xee);
        t[0x800] = want[0x800];
        assert_eq!(t, want);
        // Guards are always written.
        let mut g = vec![0u8; GUARD as usize];
        ram.read_into(0x10000 - GUARD, &mut g).unwrap();
        let mut gw = vec![0u8; GUARD as usize];
        fill_pattern(&mut gw, 0x10000 - GUARD, pats.guard);
        assert_eq!(g, gw);
        // No overlap: the whole target.
        ram.write_bytes(0x10800, &[0xee]).unwrap();
        let far = Some(Known::Pattern {
            lo: 0x20000,
            hi: 0x21000,
        });
        prepare_target_except(&ram, &p, &pats, Expect::Byte(0), far).unwrap();
        ram.read_into(0x10000, &mut t).unwrap();
        assert_eq!(t, want);
    }

    #[test]
    fn breakdown_label_picks_dominant_kind() {
        let b = Breakdown {
            overrun: 1,
            ..Default::default()
        };
        assert_eq!(b.label(), "overrun");
        let b = Breakdown {
            not_written: 5,
            overrun: 1,
            ..Default::default()
        };
        assert_eq!(b.label(), "short");
        assert_eq!(Breakdown::default().label(), "ok");
    }
}
