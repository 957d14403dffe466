//! The host-side checker: seeded patterns, guard zones, and a fast
//! word-at-a-time comparison that reports the first bad offset, how many
//! bytes are wrong and what kind of wrong they are.
//!
//! Layout of one check (addresses in guest RAM):
//!
//! ```text
//! [dst - guard, dst)        guard pattern  (must stay)
//! [dst, dst + len)          target pattern (must become 0 / fill / source)
//! [dst + len, + guard)      guard pattern  (must stay)
//! [src, src + len)          source bytes   (must stay; copies only)
//! ```
//!
//! Pattern bytes are chosen so that every classification is unambiguous: the
//! target pattern, the guard pattern, zero and the fill byte never share a
//! byte value at the same position.
use crate::error::{Error, Result};
use crate::routines::Kind;
use crate::vmm::memory::GuestRam;
use rand_core::{Rng, SeedableRng};
use serde::Serialize;

/// Guard zone on each side: one page plus a cache line.
pub const GUARD: u64 = 4096 + 64;

/// Room in the source stream beyond the largest copy, for source offsets
/// (a page, as copy_page's source offset, plus a cache line).
pub const SOURCE_SLACK: usize = 4096 + 64;

/// Seeded byte patterns for one run.
#[derive(Debug, Clone)]
pub struct Patterns {
    pub target: [u8; 8],
    pub guard: [u8; 8],
    pub fill: u8,
    seed: u64,
    source_len: usize,
    /// The seeded source stream for copies, made on first use (tens of MB:
    /// off the path to the first hypercall, and never for a run without
    /// copies).
    source: std::sync::OnceLock<Vec<u8>>,
}

impl Patterns {
    /// The patterns of `seed`, with a source stream long enough for a copy
    /// of `max_copy` bytes at any source offset the suite uses.
    pub fn new(seed: u64, max_copy: usize) -> Patterns {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x7061_7474);
        let mut byte = |avoid: &[u8]| loop {
            let b = (rng.next_u32() & 0xff) as u8;
            if b != 0 && !avoid.contains(&b) {
                return b;
            }
        };
        let fill = byte(&[]);
        let mut target = [0u8; 8];
        let mut guard = [0u8; 8];
        for i in 0..8 {
            // Never the fill byte nor its complement, so an inverted fill
            // byte always reads as "wrong value", never as "not written".
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
        }
    }

    /// The source stream: a copy's source holds
    /// `source()[Placement::src_index..][..len]`.
    pub fn source(&self) -> &[u8] {
        self.source.get_or_init(|| {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(self.seed ^ 0x7372_6373);
            let mut source = vec![0u8; self.source_len];
            rng.fill_bytes(&mut source);
            source
        })
    }
}

/// Fill `buf`, which starts at guest address `addr`, with the 8-byte pattern
/// `pat` laid out by absolute address (byte `a` gets `pat[a % 8]`).
pub fn fill_pattern(buf: &mut [u8], addr: u64, pat: [u8; 8]) {
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

/// [`scan`], and each block, once compared, is overwritten with `refill`
/// (a `BLOCK` template) while it is still in the cache.
fn scan_refill<'a>(
    buf: &mut [u8],
    refill: &[u8],
    mut expected: impl FnMut(usize, usize) -> &'a [u8],
    mut each: impl FnMut(usize, u8),
) -> (Option<usize>, u64) {
    let mut tally = (None, 0u64);
    for (blk, c) in buf.chunks_mut(BLOCK).enumerate() {
        let i = blk * BLOCK;
        scan_block(c, expected(i, c.len()), i, &mut tally, &mut each);
        let n = c.len();
        c.copy_from_slice(&refill[..n]);
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

/// Where one check lives in guest RAM.
#[derive(Debug, Clone, Copy)]
pub struct Placement {
    pub dst: u64,
    pub len: u64,
    /// Source address for copies.
    pub src: Option<u64>,
    /// Where in the seeded source stream the source starts.
    pub src_index: usize,
}

impl Placement {
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
                Error::Internal(format!(
                    "the source pattern ({} bytes) is shorter than a copy of {len} bytes at index {}",
                    pats.source().len(),
                    self.src_index
                ))
            })
    }
}

/// A range of guest RAM whose content the harness knows, left there by the
/// last check: the next check at the same place need not write its
/// pre-image again where this one serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known {
    /// The target pattern (a [`Refill::Target`] check's leftovers).
    Pattern { lo: u64, hi: u64 },
    /// A passed copy's result: byte `a` holds `source()[a - shift]`.
    Copy { lo: u64, hi: u64, shift: u64 },
}

impl Known {
    pub fn range(&self) -> (u64, u64) {
        match *self {
            Known::Pattern { lo, hi } | Known::Copy { lo, hi, .. } => (lo, hi),
        }
    }

    /// Whether this content may stand as the pre-image of a `kind` check
    /// on `p`: bytes the routine fails to write must differ from what it
    /// should write. The pattern always serves (it never equals a fill or
    /// zero byte, and equals a random source byte 1 time in 256). A copy's
    /// result serves only another copy at a different shift: its bytes then
    /// equal the expected ones 1 time in 256 too. Not a fill (a fill byte
    /// would be the same 1 in 256, where the pattern never is), nor a copy
    /// at the same shift (equal everywhere).
    pub fn serves(&self, kind: Kind, p: &Placement) -> bool {
        match *self {
            Known::Pattern { .. } => true,
            Known::Copy { shift, .. } => kind == Kind::Copy && shift != p.shift(),
        }
    }
}

/// When a copy's source is compared with what it must hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceCheck {
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
pub fn prepare_guards(ram: &GuestRam, p: &Placement, pats: &Patterns) -> Result<()> {
    fill_guest(ram, p.dst - GUARD, GUARD, pats.guard)?;
    fill_guest(ram, p.dst + p.len, GUARD, pats.guard)
}

/// Write the source of a copy (if `p` has one).
pub fn prepare_source(ram: &GuestRam, p: &Placement, pats: &Patterns) -> Result<()> {
    match p.src {
        Some(src) => ram.write_bytes(src, p.source(pats)?),
        None => Ok(()),
    }
}

/// Write the patterns around and into the target.
pub fn prepare_target(ram: &GuestRam, p: &Placement, pats: &Patterns) -> Result<()> {
    prepare_target_except(ram, p, pats, None)
}

/// [`prepare_target`], skipping the part of the target inside `prepared`,
/// a range known to hold a pre-image already (see [`Known::serves`]).
pub fn prepare_target_except(
    ram: &GuestRam,
    p: &Placement,
    pats: &Patterns,
    prepared: Option<(u64, u64)>,
) -> Result<()> {
    prepare_guards(ram, p, pats)?;
    let (lo, hi) = (p.dst, p.dst + p.len);
    match prepared {
        Some((a, b)) if a < hi && lo < b => {
            if lo < a {
                fill_guest(ram, lo, a - lo, pats.target)?;
            }
            if b < hi {
                fill_guest(ram, b, hi - b, pats.target)?;
            }
            Ok(())
        }
        _ => fill_guest(ram, lo, p.len, pats.target),
    }
}

/// Write the patterns around and into the target, and the source.
pub fn prepare(ram: &GuestRam, p: &Placement, pats: &Patterns) -> Result<()> {
    prepare_target(ram, p, pats)?;
    prepare_source(ram, p, pats)
}

/// How much guest RAM a check verifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, clap::ValueEnum)]
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
        let mut areas = vec![(p.dst.saturating_sub(GUARD), p.len + 2 * GUARD)];
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

    /// Bytes that changed outside `[dst - GUARD, dst + len + GUARD)` (that
    /// range is judged by [`check`]), and the first, relative to `dst`.
    pub fn changed_outside(&self, ram: &GuestRam, p: &Placement) -> Result<(u64, Option<i64>)> {
        // SAFETY: as in `check_with`: called between commands by the suite,
        // which holds the `&mut Vm` owning every vCPU.
        let now = unsafe { ram.slice(self.base, self.bytes.len() as u64) }?;
        let skip_lo = p.dst.saturating_sub(GUARD).saturating_sub(self.base) as usize;
        let skip_hi = (p.dst + p.len + GUARD).saturating_sub(self.base) as usize;
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

/// Check the result of a `kind` operation on `p`, its source included.
pub fn check(ram: &GuestRam, p: &Placement, kind: Kind, pats: &Patterns) -> Result<Outcome> {
    check_with(ram, p, kind, pats, SourceCheck::Now, Refill::No, None)
}

/// Bytes of a copy's source (from `src`, holding `expected`) that changed.
pub fn source_changes(ram: &GuestRam, src: u64, expected: &[u8]) -> Result<u64> {
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
/// target pattern back over it as it goes (the next check at the same
/// place then finds it prepared: one pass over the target instead of two).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refill {
    No,
    Target,
}

/// [`check`], with the source compared now or left to the caller, the
/// target optionally refilled, and `kept`: the part of the target whose
/// pre-image was not the target pattern but a copy's result (what tells
/// "not written" from "wrong value" there).
pub fn check_with(
    ram: &GuestRam,
    p: &Placement,
    kind: Kind,
    pats: &Patterns,
    source: SourceCheck,
    refill: Refill,
    kept: Option<Known>,
) -> Result<Outcome> {
    let mut b = Breakdown::default();
    let mut first: Option<i64> = None;
    let mut note = |off: i64| {
        if first.is_none_or(|f| off < f) {
            first = Some(off);
        }
    };

    let view = |gpa: u64, len: u64| {
        // SAFETY: the checker runs between commands, called by the suite
        // (`suite::verify`) or bench's verification pass, which hold the
        // `&mut Vm` that owns every vCPU of this RAM; vCPUs run only inside
        // `Vcpu` methods, so none runs while these slices live.
        unsafe { ram.slice(gpa, len) }
    };
    let lo = p.dst - GUARD;
    let t_lo = template(lo, pats.guard);
    let (f, n) = scan(view(lo, GUARD)?, |_, n| &t_lo[..n], |_, _| {});
    if let Some(f) = f {
        note(f as i64 - GUARD as i64);
        b.underrun = n;
    }

    let (f, not_written, wrong) = check_target(ram, p, kind, pats, refill, kept)?;
    if let Some(f) = f {
        note(f as i64);
    }
    b.not_written = not_written;
    b.wrong_value = wrong;

    let hi = p.dst + p.len;
    let t_hi = template(hi, pats.guard);
    let (f, n) = scan(view(hi, GUARD)?, |_, n| &t_hi[..n], |_, _| {});
    if let Some(f) = f {
        note((p.len + f as u64) as i64);
        b.overrun = n;
    }

    if let (Some(src), SourceCheck::Now) = (p.src, source) {
        b.source_modified = source_changes(ram, src, p.source(pats)?)?;
    }
    Ok(Outcome {
        first_bad: first,
        bad_bytes: b.total(),
        breakdown: b,
    })
}

/// The target part of [`check_with`]: the first bad byte (relative to
/// `dst`) and the bad bytes that still hold the pre-fill pattern (not
/// written) and that hold anything else (wrong value).
fn check_target(
    ram: &GuestRam,
    p: &Placement,
    kind: Kind,
    pats: &Patterns,
    refill: Refill,
    kept: Option<Known>,
) -> Result<(Option<usize>, u64, u64)> {
    let pattern = |a: u64| pats.target[(a % 8) as usize];
    let pre = |i: usize| {
        let a = p.dst + i as u64;
        match kept {
            Some(Known::Copy { lo, hi, shift }) if (lo..hi).contains(&a) => {
                let at = usize::try_from(a.wrapping_sub(shift)).ok();
                at.and_then(|x| pats.source().get(x).copied())
                    .unwrap_or_else(|| pattern(a))
            }
            _ => pattern(a),
        }
    };
    let mut not_written = 0;
    let mut wrong = 0;
    let value = match kind {
        Kind::Fill => pats.fill,
        _ => 0,
    };
    let constant = vec![value; BLOCK];
    let src = match kind {
        Kind::Copy => p.source(pats)?,
        Kind::Zero | Kind::Fill => &[],
    };
    let expected = |i: usize, n: usize| match kind {
        Kind::Copy => &src[i..i + n],
        Kind::Zero | Kind::Fill => &constant[..n],
    };
    let each = |i, v| {
        if v == pre(i) {
            not_written += 1
        } else {
            wrong += 1
        }
    };
    let (f, _) = match refill {
        // SAFETY: as in `check_with`: between commands, with the `&mut Vm`
        // that owns every vCPU of this RAM held by the caller.
        Refill::No => scan(unsafe { ram.slice(p.dst, p.len) }?, expected, each),
        Refill::Target => {
            // SAFETY: as above; the only slice of the target alive, dropped
            // before the caller reads the guard after it.
            let target = unsafe { ram.slice_mut(p.dst, p.len) }?;
            scan_refill(target, &template(p.dst, pats.target), expected, each)
        }
    };
    Ok((f, not_written, wrong))
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
            &refill,
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
    fn a_copy_result_serves_only_a_copy_at_another_shift() {
        let p = Placement {
            dst: 0x10005,
            len: 4096,
            src: Some(0x900000),
            src_index: 1,
        };
        let pattern = Known::Pattern {
            lo: 0x10000,
            hi: 0x12000,
        };
        let copy = |shift| Known::Copy {
            lo: 0x10000,
            hi: 0x12000,
            shift,
        };
        for kind in [Kind::Zero, Kind::Fill, Kind::Copy] {
            assert!(pattern.serves(kind, &p), "{kind:?}");
        }
        assert_eq!(p.shift(), 0x10004);
        assert!(copy(0x10005).serves(Kind::Copy, &p));
        assert!(!copy(p.shift()).serves(Kind::Copy, &p), "same shift");
        assert!(!copy(0x10005).serves(Kind::Fill, &p));
        assert!(!copy(0x10005).serves(Kind::Zero, &p));
        assert_eq!(copy(7).range(), (0x10000, 0x12000));
    }

    #[test]
    fn prepare_skips_only_what_is_prepared() {
        let ram = GuestRam::new(0, 1 << 20, crate::vmm::memory::Backing::Anon, false).unwrap();
        let pats = Patterns::new(1, 0);
        let p = Placement {
            dst: 0x10000,
            len: 0x3000,
            src: None,
            src_index: 0,
        };
        // A stale byte inside the prepared range stays (it is trusted to
        // hold the pattern); everything outside it is written.
        fill_guest(&ram, 0x10400, 0xc00, pats.target).unwrap();
        ram.write_bytes(0x10800, &[0xee]).unwrap();
        prepare_target_except(&ram, &p, &pats, Some((0x10400, 0x11000))).unwrap();
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
        prepare_target_except(&ram, &p, &pats, Some((0x20000, 0x21000))).unwrap();
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
