//! The verification suite: which checks to run, and running them on a VM.
use crate::arch;
use crate::blob::LinkConfig;
use crate::blob::abi::{self, PAGE_SIZE};
use crate::check::checker::{
    self, Breakdown, GUARD, Known, Patterns, Placement, Refill, SourceCheck,
};
use crate::error::{Error, Result};
use crate::routines::{self, Call, Kind, Routine, VariantDef};
use crate::vmm::{Command, GuestFailure, Vm};
use serde::Serialize;
use std::time::{Duration, Instant};

/// Byte sizes every memset/memcpy variant is checked at.
pub const SIZES: &[u64] = &[
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
pub const LARGE_DST_OFFSETS: &[u64] = &[0, 1, 31, 63];
/// Source misalignments for memcpy.
pub const SRC_OFFSETS: &[u64] = &[0, 1, 8, 33, 63];
/// clear_pages page counts.
pub const CLEAR_PAGES_N: &[u64] = &[1, 2, 3, 512];

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
    /// Call this (table, index) entry instead of the variant's alias (the
    /// selftest's deliberately broken routines).
    pub table: Option<(u64, u64)>,
}

impl CheckSpec {
    pub fn total(&self) -> u64 {
        self.len * self.count
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
    Skipped,
}

/// One check in the report and the JSON.
#[derive(Debug, Clone, Serialize)]
pub struct CheckRecord {
    pub config: LinkConfig,
    pub routine: Routine,
    pub variant: String,
    pub size: u64,
    pub count: u64,
    pub dst_offset: u64,
    pub src_offset: Option<u64>,
    pub verdict: Verdict,
    pub first_bad_offset: Option<i64>,
    pub bad_bytes: u64,
    pub breakdown: Breakdown,
    /// Guest counter ticks for the call(s).
    pub ticks: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Which routines/variants to check.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub routines: Vec<Routine>,
    pub variants: Vec<String>,
    /// Sizes to check instead of the built-in lists (total bytes per check).
    pub sizes: Vec<u64>,
}

impl Filter {
    fn wants(&self, r: Routine, v: &routines::VariantDef) -> bool {
        (self.routines.is_empty() || self.routines.contains(&r))
            && (self.variants.is_empty() || self.variants.iter().any(|x| routines::is_named(v, x)))
    }
}

/// Arena bytes a check needs: guards, target (in every batch slot), and a
/// separate source.
pub fn footprint(spec: &CheckSpec) -> u64 {
    let dst_window = GUARD.next_multiple_of(PAGE_SIZE) + 64 + reach(spec) + spec.total() + GUARD;
    let src = if spec.routine.kind() == Kind::Copy {
        PAGE_SIZE + spec.total() + 64 + PAGE_SIZE
    } else {
        0
    };
    dst_window.next_multiple_of(PAGE_SIZE) + src + PAGE_SIZE
}

/// Checks this small run in batches: up to `abi::BATCH_SLOTS` with one
/// exit, slot `k` at `k * SLOT_STRIDE` above the usual place.
const BATCH_MAX: u64 = 16 << 10;
/// Distance between batch slots: a target of up to `BATCH_MAX` with its
/// guards, so slots never share a byte.
const SLOT_STRIDE: u64 = 32 << 10;
const _: () = assert!(GUARD.next_multiple_of(PAGE_SIZE) + 64 + BATCH_MAX + GUARD <= SLOT_STRIDE);

fn batchable(spec: &CheckSpec) -> bool {
    spec.total() <= BATCH_MAX && spec.table.is_none()
}

/// How far above its usual place a check may go (its last batch slot).
fn reach(spec: &CheckSpec) -> u64 {
    if batchable(spec) {
        (abi::BATCH_SLOTS - 1) * SLOT_STRIDE
    } else {
        0
    }
}

/// End of a check's destination window (target plus the guard after it),
/// in its highest batch slot.
fn dst_window_end(spec: &CheckSpec) -> u64 {
    dst_address(spec) + reach(spec) + spec.total() + GUARD
}

fn dst_address(spec: &CheckSpec) -> u64 {
    arch::ARENA_BASE + PAGE_SIZE + GUARD.next_multiple_of(PAGE_SIZE) + spec.dst_offset
}

/// Where the copies of a plan take their source from: one area above the
/// destination window of every copy in the plan, holding the seeded source
/// stream by address (byte `src_base + i` holds `Patterns::source[i]`). A
/// copy with source offset `o` reads from `src_base + o`, so the area is
/// written once per VM rather than once per check, and one comparison of
/// the area vouches for every copy that read it since.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Layout {
    pub src_base: u64,
    /// Bytes of the area the plan's copies read.
    pub src_len: u64,
}

impl Layout {
    pub fn of(specs: &[CheckSpec]) -> Layout {
        let copies = || specs.iter().filter(|s| s.routine.kind() == Kind::Copy);
        Layout {
            src_base: copies()
                .map(|s| dst_window_end(s).next_multiple_of(PAGE_SIZE) + PAGE_SIZE)
                .max()
                .unwrap_or(0),
            src_len: copies()
                .map(|s| s.src_offset.unwrap_or(0) + s.total())
                .max()
                .unwrap_or(0),
        }
    }

    /// Whether `p`'s destination window (with its guards) overlaps the
    /// source area: such a check overwrites the area.
    fn overlaps(&self, p: &Placement) -> bool {
        let (lo, hi) = (p.dst.saturating_sub(GUARD), p.dst + p.len + GUARD);
        self.src_len > 0 && lo < self.src_base + self.src_len && self.src_base < hi
    }
}

/// Where a check goes in the arena (the same place for every check, so
/// the memory stays warm); copies read from `layout`'s source area.
pub fn placement(spec: &CheckSpec, layout: &Layout) -> Placement {
    placement_in(spec, layout, 0)
}

/// [`placement`] in batch slot `slot`.
fn placement_in(spec: &CheckSpec, layout: &Layout, slot: u64) -> Placement {
    let src_index = spec.src_offset.unwrap_or(0);
    Placement {
        dst: dst_address(spec) + slot * SLOT_STRIDE,
        len: spec.total(),
        src: spec.src_offset.map(|o| layout.src_base + o),
        src_index: usize::try_from(src_index).unwrap_or(usize::MAX),
    }
}

// Over 80 lines: the check matrix written out as one list (routine x
// variant x size x offset) so it reads as the specification of the suite.
/// Plan the suite for `side`. Variants the CPU cannot run and sizes that
/// do not fit the arena come back as skipped records with the reason.
pub fn plan(
    side: &crate::blob::Side,
    caps: &arch::CpuCaps,
    filter: &Filter,
    arena: u64,
) -> (Vec<CheckSpec>, Vec<CheckRecord>) {
    let mut specs = Vec::new();
    let mut skipped = Vec::new();
    for routine in Routine::ALL {
        let config = side.config();
        for v in routines::variants(routine, side) {
            if !filter.wants(routine, v) {
                continue;
            }
            let mut mine = Vec::new();
            let mut add = |len, count, dst_offset, src_offset| {
                mine.push(CheckSpec {
                    routine,
                    variant: v,
                    len,
                    count,
                    dst_offset,
                    src_offset,
                    table: None,
                })
            };
            if !filter.sizes.is_empty() {
                for &size in &filter.sizes {
                    match routine {
                        Routine::ClearPage | Routine::CopyPage => {
                            let src = (routine == Routine::CopyPage).then_some(0);
                            add(PAGE_SIZE, size / PAGE_SIZE, 0, src);
                        }
                        Routine::ClearPages => add(size, 1, 0, None),
                        Routine::Memset | Routine::Memcpy => {
                            let offs: Vec<u64> = if size <= (2 << 20) + 1 {
                                (0..64).collect()
                            } else {
                                LARGE_DST_OFFSETS.to_vec()
                            };
                            for off in offs {
                                let src = (routine == Routine::Memcpy).then_some(off % 7);
                                add(size, 1, off, src);
                            }
                        }
                    }
                }
            } else {
                match routine {
                    Routine::ClearPage => {
                        for count in [1, 3] {
                            for off in [0, PAGE_SIZE, 2 * PAGE_SIZE] {
                                add(PAGE_SIZE, count, off, None);
                            }
                        }
                    }
                    Routine::ClearPages => {
                        for n in CLEAR_PAGES_N {
                            for off in [0, PAGE_SIZE] {
                                add(n * PAGE_SIZE, 1, off, None);
                            }
                        }
                    }
                    Routine::CopyPage => {
                        for count in [1, 3] {
                            for src in [0, PAGE_SIZE] {
                                add(PAGE_SIZE, count, 0, Some(src));
                            }
                        }
                    }
                    Routine::Memset | Routine::Memcpy => {
                        let srcs: &[u64] = if routine == Routine::Memcpy {
                            SRC_OFFSETS
                        } else {
                            &[0]
                        };
                        let sized = SIZES
                            .iter()
                            .map(|s| (*s, (0..64).collect::<Vec<u64>>()))
                            .chain(LARGE_SIZES.iter().map(|s| (*s, LARGE_DST_OFFSETS.to_vec())));
                        for (len, offs) in sized {
                            for off in offs {
                                for src in srcs {
                                    add(len, 1, off, (routine == Routine::Memcpy).then_some(*src));
                                }
                            }
                        }
                    }
                }
            }
            for spec in mine {
                let reason = if let Some(f) = v.requires.filter(|f| !caps.has(f)) {
                    Some(format!("the CPU does not have {f}"))
                } else if footprint(&spec) > arena {
                    Some(format!(
                        "needs {} of arena; raise --mem",
                        crate::units::format_size(footprint(&spec))
                    ))
                } else {
                    None
                };
                match reason {
                    None => specs.push(spec),
                    Some(r) => skipped.push(record(config, &spec, Verdict::Skipped, Some(r))),
                }
            }
        }
    }
    (specs, skipped)
}

/// Every check `plan` makes for `side`, as SKIP with `reason` (a kernel
/// alternatives path the guest CPU cannot execute: never booted).
pub(crate) fn skip_all(
    side: &crate::blob::Side,
    caps: &arch::CpuCaps,
    filter: &Filter,
    reason: &str,
) -> Vec<CheckRecord> {
    let (specs, skipped) = plan(side, caps, filter, u64::MAX);
    let why = || Some(reason.to_string());
    let planned = specs
        .iter()
        .map(|s| record(side.config(), s, Verdict::Skipped, why()));
    let skipped = skipped
        .into_iter()
        .map(|r| CheckRecord { reason: why(), ..r });
    planned.chain(skipped).collect()
}

fn record(
    config: LinkConfig,
    s: &CheckSpec,
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
        verdict,
        first_bad_offset: None,
        bad_bytes: 0,
        breakdown: Breakdown::default(),
        ticks: 0,
        reason,
    }
}

/// The outcome of running a plan on one VM.
#[derive(Debug, Default)]
pub struct SuiteRun {
    pub records: Vec<CheckRecord>,
    /// A guest failure that ended the run early.
    pub failure: Option<GuestFailure>,
    /// Bytes the checker compared and the time it took.
    pub checked_bytes: u64,
    pub check_time: Duration,
    /// SIGINT stopped the run early.
    pub interrupted: bool,
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
    fn guest_failed(&mut self, config: LinkConfig, spec: &CheckSpec, f: GuestFailure) {
        self.records
            .push(record(config, spec, Verdict::Fail, Some(f.detail.clone())));
        self.failure = Some(f);
    }
}

/// Run one check on its own: prepare (the source included), call, verify.
pub fn run_check(
    vm: &mut Vm,
    spec: &CheckSpec,
    pats: &Patterns,
    timeout: Duration,
    whole: Option<&mut checker::Snapshot>,
) -> Result<(CheckRecord, Duration, u64)> {
    let layout = Layout::of(std::slice::from_ref(spec));
    check_one(vm, spec, &layout, pats, timeout, Around::alone(), whole)
}

/// What the last check left in its target, if the harness knows it: the
/// target pattern (a [`Refill::Target`] check) or a passed copy's result.
type Prepared = Option<Known>;

/// How [`check_one`] treats what lies around the check.
struct Around<'a> {
    /// `Now`: write the source before and compare it after. `Deferred`:
    /// the source is the shared area, written and compared by [`run`].
    source: SourceCheck,
    /// What the arena already holds, kept up to date: the check skips
    /// writing its pre-image where that serves ([`Known::serves`]), and
    /// leaves a known content behind (it refills its target with the
    /// pattern as it verifies it, or, for a single copy, keeps the result
    /// as the next copy's pre-image). `None`: no tracking (a lone check,
    /// `--check whole`).
    prepared: Option<&'a mut Prepared>,
}

impl Around<'_> {
    fn alone() -> Around<'static> {
        Around {
            source: SourceCheck::Now,
            prepared: None,
        }
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
    let p = placement(spec, layout);
    let kind = spec.routine.kind();
    let known = around
        .prepared
        .as_deref()
        .copied()
        .flatten()
        .filter(|k| k.serves(kind, &p));
    checker::prepare_target_except(&vm.ram, &p, pats, known.map(|k| k.range()))?;
    if around.source == SourceCheck::Now {
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
    let r = vm.vcpu(0)?.call(&cmd, timeout)?;
    // A single copy's result is the next copy's pre-image (when it
    // passes): its target is compared, not rewritten.
    let chain = kind == Kind::Copy && spec.count == 1;
    let refill = match (&around.prepared, &whole) {
        (Some(_), None) if !chain => Refill::Target,
        _ => Refill::No,
    };
    let kept = known.filter(|k| matches!(k, Known::Copy { .. }));
    let done = verify(
        vm,
        spec,
        &p,
        pats,
        (around.source, refill, kept),
        whole,
        r.ticks(),
    )?;
    if let Some(k) = around.prepared {
        let (lo, hi) = (p.dst, p.dst + p.len);
        *k = match refill {
            Refill::Target => Some(Known::Pattern { lo, hi }),
            Refill::No if chain && done.0.verdict == Verdict::Pass => Some(Known::Copy {
                lo,
                hi,
                shift: p.shift(),
            }),
            Refill::No => None,
        };
    }
    Ok(done)
}

/// The command that runs `spec` on `p`.
fn command(vm: &Vm, spec: &CheckSpec, p: &Placement, pats: &Patterns) -> Result<Command> {
    let call = Call {
        routine: spec.routine,
        dst: p.dst,
        src: p.src.unwrap_or(0),
        fill: pats.fill,
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
    (source, refill, kept): (SourceCheck, Refill, Option<Known>),
    whole: Option<&mut checker::Snapshot>,
    ticks: u64,
) -> Result<(CheckRecord, Duration, u64)> {
    let t = Instant::now();
    let kind = spec.routine.kind();
    let mut out = checker::check_with(&vm.ram, p, kind, pats, source, refill, kept)?;
    let mut bytes = p.len
        + 2 * GUARD
        + match (p.src, source) {
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
    let mut rec = record(vm.blob.config, spec, Verdict::Pass, None);
    rec.ticks = ticks;
    judge(&mut rec, &out);
    Ok((rec, dt, bytes))
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
            Error::Internal(format!(
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
            let p = placement(&spec, &area.layout);
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
            continue;
        }
        let layout = area.layout;
        let around = Around {
            source: SourceCheck::Now,
            prepared: Some(&mut area.prepared),
        };
        match check_one(vm, &spec, &layout, pats, timeout, around, None) {
            Ok((again, dt, bytes)) => {
                out.records[index] = again;
                out.check_time += dt;
                out.checked_bytes += bytes;
            }
            Err(Error::Guest(f)) => {
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

/// Run a batch of small checks (slot `k` at [`placement_in`] `k`) with
/// one exit; each is prepared, timed and verified on its own. A guest
/// failure is recorded against the slot that was running, after the slots
/// before it are verified.
fn run_batch(
    vm: &mut Vm,
    chunk: &[CheckSpec],
    area: &mut Arena,
    pats: &Patterns,
    timeout: Duration,
    out: &mut SuiteRun,
) -> Result<()> {
    let layout = area.layout;
    // Slot guards and targets cover the usual place.
    area.prepared = None;
    let places: Vec<Placement> = (0..)
        .zip(chunk)
        .map(|(k, s)| placement_in(s, &layout, k))
        .collect();
    if chunk.iter().any(|s| s.routine.kind() == Kind::Copy) {
        area.ensure(vm, pats)?;
    }
    let mut cmds = Vec::with_capacity(chunk.len());
    for (s, p) in chunk.iter().zip(&places) {
        checker::prepare_target(&vm.ram, p, pats)?;
        cmds.push(command(vm, s, p, pats)?);
    }
    let (results, failed) = match vm.vcpu(0)?.call_batch(&cmds, timeout) {
        Ok(r) => (r, None),
        Err(Error::Guest(f)) => {
            let (cur, done) = vm.vcpu(0)?.batch_progress(chunk.len());
            (done, Some((cur, f)))
        }
        Err(e) => return Err(e),
    };
    for ((spec, p), r) in chunk.iter().zip(&places).zip(&results) {
        let copy = spec.routine.kind() == Kind::Copy;
        let source = if copy {
            SourceCheck::Deferred
        } else {
            SourceCheck::Now
        };
        let index = out.add(verify(
            vm,
            spec,
            p,
            pats,
            (source, Refill::No, None),
            None,
            r.ticks(),
        )?);
        if copy {
            area.defer(index, spec, p);
        }
    }
    if let Some((cur, f)) = failed {
        match chunk.get(cur) {
            Some(spec) => out.guest_failed(vm.blob.config, spec, *f),
            None => out.failure = Some(*f),
        }
        settle_source(vm, area, pats, timeout, false, out)?;
    }
    Ok(())
}

/// How many of `specs` (from the first) run as one batch: consecutive
/// small checks, none of which overwrites the shared source area; 0 or 1
/// means "run the first alone".
fn batch_len(specs: &[CheckSpec], layout: &Layout) -> usize {
    (0..abi::BATCH_SLOTS)
        .zip(specs)
        .take_while(|(k, s)| {
            batchable(s)
                && (s.routine.kind() == Kind::Copy
                    || !layout.overlaps(&placement_in(s, layout, *k)))
        })
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
    timeout: Duration,
    scope: checker::Scope,
    progress: &indicatif::ProgressBar,
) -> Result<SuiteRun> {
    let mut out = SuiteRun::default();
    let mut snap = match scope {
        checker::Scope::Whole => Some(checker::Snapshot::take(&vm.ram)?),
        checker::Scope::Target => None,
    };
    let layout = Layout::of(specs);
    let mut area = Arena::new(layout);
    let mut i = 0;
    while let Some(spec) = specs.get(i) {
        let n = match scope {
            checker::Scope::Target => batch_len(&specs[i..], &layout),
            checker::Scope::Whole => 0,
        };
        let r = if n > 1 {
            let r = run_batch(vm, &specs[i..i + n], &mut area, pats, timeout, &mut out);
            i += n;
            progress.inc(n as u64);
            r
        } else {
            i += 1;
            progress.inc(1);
            run_single(vm, spec, &mut area, pats, timeout, snap.as_mut(), &mut out)
        };
        match r {
            Ok(()) => {}
            Err(Error::Interrupted) => {
                out.interrupted = true;
                settle_source(vm, &mut area, pats, timeout, false, &mut out)?;
                break;
            }
            Err(e) => return Err(e),
        }
        if out.failure.is_some() {
            break;
        }
        if area.pending.len() >= DEFER {
            settle_source(vm, &mut area, pats, timeout, true, &mut out)?;
            if out.failure.is_some() {
                break;
            }
        }
    }
    if out.failure.is_none() && !out.interrupted {
        settle_source(vm, &mut area, pats, timeout, true, &mut out)?;
    }
    Ok(out)
}

/// One check on its own (a large one, or any with `--check whole`).
fn run_single(
    vm: &mut Vm,
    spec: &CheckSpec,
    area: &mut Arena,
    pats: &Patterns,
    timeout: Duration,
    snap: Option<&mut checker::Snapshot>,
    out: &mut SuiteRun,
) -> Result<()> {
    let layout = area.layout;
    let p = placement(spec, &layout);
    let shared = snap.is_none() && spec.routine.kind() == Kind::Copy;
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
    };
    match check_one(vm, spec, &layout, pats, timeout, around, snap) {
        Ok(done) => {
            let index = out.add(done);
            if shared {
                area.defer(index, spec, &p);
            }
            Ok(())
        }
        Err(Error::Guest(f)) => {
            out.guest_failed(vm.blob.config, spec, *f);
            settle_source(vm, area, pats, timeout, false, out)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blob::{LinkConfig, Side};

    fn spec(routine: Routine, len: u64, dst_offset: u64, src_offset: Option<u64>) -> CheckSpec {
        let side: Side = LinkConfig::Vanilla.into();
        CheckSpec {
            routine,
            variant: routines::variants(routine, &side)[0],
            len,
            count: 1,
            dst_offset,
            src_offset,
            table: None,
        }
    }

    fn window(p: &Placement) -> (u64, u64) {
        (p.dst - GUARD, p.dst + p.len + GUARD)
    }

    #[test]
    fn the_source_area_lies_above_every_copy_in_every_slot() {
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
        for s in &specs {
            let slots = if batchable(s) { abi::BATCH_SLOTS } else { 1 };
            for k in 0..slots {
                let p = placement_in(s, &layout, k);
                assert!(
                    window(&p).1 + PAGE_SIZE <= layout.src_base,
                    "{s:?} slot {k}"
                );
                assert!(!layout.overlaps(&p));
                let src = p.src.unwrap();
                assert!(src >= layout.src_base);
                assert!(src + p.len <= layout.src_base + layout.src_len);
                assert_eq!(src - layout.src_base, p.src_index as u64);
            }
            // The whole layout fits the footprint the plan checks the
            // arena against.
            let biggest = specs.iter().map(footprint).max().unwrap();
            assert!(layout.src_base + layout.src_len <= arch::ARENA_BASE + biggest);
        }
    }

    #[test]
    fn batch_slots_never_share_a_byte() {
        let layout = Layout::default();
        let s = spec(Routine::Memset, BATCH_MAX, 63, None);
        let w: Vec<_> = (0..abi::BATCH_SLOTS)
            .map(|k| window(&placement_in(&s, &layout, k)))
            .collect();
        for pair in w.windows(2) {
            assert!(pair[0].1 <= pair[1].0, "{pair:?}");
        }
    }

    #[test]
    fn batches_take_consecutive_small_checks_only() {
        let small = spec(Routine::Memset, 64, 0, None);
        let big = spec(Routine::Memset, BATCH_MAX + 1, 0, None);
        let layout = Layout::default();
        assert_eq!(batch_len(&[small; 40], &layout), abi::BATCH_SLOTS as usize);
        assert_eq!(batch_len(&[small, small, big, small], &layout), 2);
        assert_eq!(batch_len(&[big, small], &layout), 0);
        let mut selftest = small;
        selftest.table = Some((abi::TABLE_SELFTEST, 0));
        assert_eq!(batch_len(&[small, selftest], &layout), 1);
        // A small memset whose slot would land on the copies' source area
        // is not batched (it runs alone, after the area is settled).
        let copy = spec(Routine::Memcpy, 8, 0, Some(0));
        let layout = Layout::of(&[copy]);
        let wide = spec(Routine::Memset, BATCH_MAX, 0, None);
        assert!(batch_len(&[wide; 16], &layout) < 16);
        assert_eq!(batch_len(&[copy; 16], &layout), 16);
    }
}
