//! `hypclear selftest`: prove the checker and the VMM can fail.
//!
//! The blob carries deliberately broken routines outside the alias table
//! (`guest/<arch>/selftest/`). Each is run like a memset and must be caught
//! as the right kind of failure; a fresh VM is used for each, since a fault
//! or a hang ends a VM.
use crate::arch;
use crate::blob::LinkConfig;
use crate::checker::{self, Patterns};
use crate::error::{Error, Result, VmmError};
use crate::kernel::Side;
use crate::routines::{self, Routine};
use crate::suite::{self, CheckSpec, Verdict};
use crate::vmm::{BreachKind, FailureKind, GuestFailure, Vm, VmOptions};
use hypclear_abi as abi;
use serde::Serialize;
use std::time::Duration;

/// What a broken routine must be detected as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    /// The last target byte left unwritten.
    Short,
    /// One byte written past the end, into the guard.
    Overrun,
    /// One target byte with a wrong value.
    WrongValue,
    /// An undefined-instruction exception.
    Exception,
    /// No progress: the watchdog fires.
    Timeout,
    /// A copy that changes one byte of its source, between correct copies
    /// sharing that source: only it is blamed.
    SourceModified,
    /// A copy one byte short, run where a correct copy left its result:
    /// at the same shift, where that result would hide it (the suite
    /// writes the complement of the source there instead), and at another.
    /// The unwritten last byte is caught both times.
    CopyShort,
    /// A correct memset that changes a callee-saved register.
    CalleeSaved,
    /// A correct memset that returns with the stack pointer moved.
    StackMoved,
    /// A correct memset that returns with a flag set the ABI wants clear
    /// (x86_64: DF); not a case where the ABI has no such flag.
    FlagSet,
    /// A correct memset that returns something other than dst.
    WrongReturn,
    /// The one-byte overrun again, its target ending on the unmapped page
    /// (an edge check): the store faults there, as in the hyp.
    EdgeOverrun,
    /// A correct memset that also writes one byte 8 MiB past its end (the
    /// hostile guest's routine), seen by the dirty-page log and located.
    StrayWrite,
    /// A memset that keeps only the low 32 bits of its pointer: where the
    /// arena lives above 4 GiB (x86_64's direct map), its first store
    /// faults at the truncated address.
    TruncatedPointer,
    /// A memset that writes into its own text: the blob's text is mapped
    /// read-only (W^X, as the hyp maps its own), so the store faults there.
    TextWritten,
    /// A memset that calls into its target after writing a `ret` there:
    /// data is mapped execute-never, so the fetch faults at dst.
    DataExecuted,
    /// A memset one byte short only at sizes above 1024 that are 37 mod
    /// 64, run over the default geometry's memset placements up to
    /// 64 KiB plus 63 with the seeded byte: exactly those checks fail,
    /// each by its last byte, 1 KiB, 4 KiB and 64 KiB plus 37 among them
    /// (no hiding place in size: a geometry of residues 0, 1 and 63
    /// passed it).
    TailResidue,
}

/// The injected faults: (selftest table name, expectation).
pub const CASES: &[(&str, Expect)] = &[
    ("short", Expect::Short),
    ("overrun", Expect::Overrun),
    ("wrong_value", Expect::WrongValue),
    ("fault", Expect::Exception),
    ("hang", Expect::Timeout),
    ("source", Expect::SourceModified),
    ("copy_short", Expect::CopyShort),
    ("clobber", Expect::CalleeSaved),
    ("stack", Expect::StackMoved),
    ("direction", Expect::FlagSet),
    ("bad_return", Expect::WrongReturn),
    ("hostile_stray_write", Expect::StrayWrite),
    ("overrun", Expect::EdgeOverrun),
    ("tail_37", Expect::TailResidue),
    ("truncate", Expect::TruncatedPointer),
    ("patch_text", Expect::TextWritten),
    ("exec_data", Expect::DataExecuted),
];

/// Whether this architecture has case `e` (arm64 has no flag a routine
/// must return clear).
fn applies(e: Expect) -> bool {
    match e {
        Expect::FlagSet => !arch::RETURN_FLAGS.is_empty(),
        Expect::EdgeOverrun => arch::edge_hole(arch::MIN_RAM).is_some(),
        Expect::TruncatedPointer => arch::guest_va(arch::ARENA_BASE) > u64::from(u32::MAX),
        Expect::TextWritten | Expect::DataExecuted => arch::WRITE_XOR_EXECUTE,
        _ => true,
    }
}

/// Size and destination misalignment the broken routines run at.
pub(crate) const LEN: u64 = 4096 + 13;
pub(crate) const DST_OFFSET: u64 = 5;

#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    pub name: String,
    pub expected: Expect,
    pub detected: bool,
    /// What was actually observed.
    pub observed: String,
}

/// Run every case; each gets a fresh VM built from `opts`.
pub fn run(opts: &VmOptions, side: &Side, timeout: Duration) -> Cases<CaseResult> {
    Cases::collect(
        CASES
            .iter()
            .filter(|(_, e)| applies(*e))
            .map(|(name, expected)| run_case(opts, side, name, *expected, timeout)),
    )
}

/// Cases run one after the other: those that finished, and what stopped
/// the rest (a stop request, a VMM error), if anything did; the finished
/// ones are still reported (marked partial).
#[derive(Debug)]
pub struct Cases<T> {
    pub results: Vec<T>,
    pub stopped: Option<Error>,
}

impl<T> Cases<T> {
    /// Run `cases` (a lazy iterator) until the first error.
    pub(crate) fn collect(cases: impl Iterator<Item = Result<T>>) -> Self {
        let mut results = Vec::new();
        for r in cases {
            match r {
                Ok(t) => results.push(t),
                Err(e) => {
                    return Cases {
                        results,
                        stopped: Some(e),
                    };
                }
            }
        }
        Cases {
            results,
            stopped: None,
        }
    }
}

/// A VM for selftest case `name`: the VM, a `routine` variant that needs
/// no CPU feature (correct calls must run on any CPU: MOPS, say, is absent
/// under pKVM) and the case's row in the selftest table.
fn boot(
    opts: &VmOptions,
    side: &Side,
    routine: Routine,
    name: &str,
) -> Result<(Vm, &'static routines::VariantDef, u64)> {
    let variant = routines::variants(routine, side)
        .into_iter()
        .find(|v| v.requires.is_none())
        .ok_or(Error::NoPlainVariant { routine })?;
    let vm = Vm::new(crate::vmm::open_kvm()?, opts)?;
    let index = vm.blob.selftest_index(name)?;
    Ok((vm, variant, index))
}

/// `specs` run in order as the suite runs them (every record kept), with
/// no progress bar: how the cases that need more than one check run them.
fn run_quietly(
    vm: &mut Vm,
    specs: &[CheckSpec],
    pats: &Patterns,
    timeout: Duration,
) -> Result<suite::SuiteRun> {
    let opts = suite::RunOptions {
        timeout,
        scope: checker::Scope::Target,
        keep: suite::Keep::All,
    };
    let bar = indicatif::ProgressBar::hidden();
    let mut watch = suite::Watch {
        bar: &bar,
        checkpoint: None,
    };
    suite::run(vm, specs, pats, &opts, &mut watch)
}

/// Memcpy checks of `LEN` bytes at `DST_OFFSET`, one per `(broken, source
/// offset)` step: the case's broken routine (selftest table row `index`)
/// where `broken`, else the correct `memcpy`; run in order as the suite
/// runs them (one shared source area, a copy's result kept as the next
/// copy's pre-image). The run, and each record's verdict text.
fn run_copies(
    vm: &mut Vm,
    memcpy: &'static routines::VariantDef,
    index: u64,
    steps: &[(bool, u64)],
    pats: &Patterns,
    timeout: Duration,
) -> Result<(suite::SuiteRun, Vec<String>)> {
    let specs: Vec<CheckSpec> = steps
        .iter()
        .map(|&(broken, src)| CheckSpec {
            routine: Routine::Memcpy,
            variant: memcpy,
            len: LEN,
            count: 1,
            dst_offset: DST_OFFSET,
            src_offset: Some(src),
            fill: suite::Fill::Zero,
            overlap: None,
            table: broken.then_some((abi::TABLE_SELFTEST, index)),
            edge: None,
        })
        .collect();
    let run = run_quietly(vm, &specs, pats, timeout)?;
    let verdicts = run
        .records
        .iter()
        .map(|r| r.reason.clone().unwrap_or_else(|| "ok".into()))
        .collect();
    Ok((run, verdicts))
}

/// A broken copy between two correct ones, all three reading one shared
/// source area as the suite runs them (the source compared after the
/// three, then each re-run alone because it changed): only the broken one
/// may be blamed, for exactly the one source byte it changed.
fn run_source_case(
    opts: &VmOptions,
    side: &Side,
    name: &str,
    timeout: Duration,
) -> Result<CaseResult> {
    let (mut vm, memcpy, index) = boot(opts, side, Routine::Memcpy, name)?;
    let pats = Patterns::new(opts.seed, LEN as usize);
    let steps = [(false, 0), (true, 0), (false, 0)];
    let (run, verdicts) = run_copies(&mut vm, memcpy, index, &steps, &pats, timeout)?;
    let only_source =
        |r: &suite::CheckRecord| r.breakdown.source_modified == 1 && r.breakdown.total() == 1;
    let detected = run.failure.is_none()
        && run.records.len() == 3
        && run.records[0].verdict == Verdict::Pass
        && only_source(&run.records[1])
        && run.records[2].verdict == Verdict::Pass;
    Ok(CaseResult {
        name: name.to_string(),
        expected: Expect::SourceModified,
        detected,
        observed: format!("copies before / broken / after: {}", verdicts.join(" / ")),
    })
}

/// A memcpy one byte short, each time after a correct copy at the same
/// place, as the suite runs them: first at the same source offset (the
/// correct copy's result equals what the broken one must write, so it may
/// not stand as the pre-image), then at another source offset whose last
/// byte differs from the correct copy's (that result is the pre-image).
/// Both must fail with exactly the last byte not written, and the correct
/// copies pass.
fn run_copy_short_case(
    opts: &VmOptions,
    side: &Side,
    name: &str,
    timeout: Duration,
) -> Result<CaseResult> {
    let (mut vm, memcpy, index) = boot(opts, side, Routine::Memcpy, name)?;
    let pats = Patterns::new(opts.seed, LEN as usize);
    let last = LEN as usize - 1;
    // A source offset whose last byte differs from offset 0's: where they
    // are equal, an unwritten byte holds the right value and no check can
    // see it (1 seed in 256 for one offset).
    let other = (1..64)
        .find(|o| pats.source().get(o + last) != pats.source().get(last))
        .ok_or_else(|| {
            Error::internal("no source offset whose last byte differs from offset 0's")
        })?;
    let steps = [(false, 0), (true, 0), (false, 0), (true, other as u64)];
    let (run, verdicts) = run_copies(&mut vm, memcpy, index, &steps, &pats, timeout)?;
    let short = |r: &suite::CheckRecord| {
        r.breakdown.not_written == 1
            && r.breakdown.total() == 1
            && r.first_bad_offset == Some(last as i64)
    };
    let r = &run.records;
    let detected = run.failure.is_none()
        && r.len() == 4
        && r[0].verdict == Verdict::Pass
        && short(&r[1])
        && r[2].verdict == Verdict::Pass
        && short(&r[3]);
    Ok(CaseResult {
        name: name.to_string(),
        expected: Expect::CopyShort,
        detected,
        observed: format!(
            "copy / short (same offset) / copy / short (offset {other}): {}",
            verdicts.join(" / ")
        ),
    })
}

/// The largest size [`run_tail_case`] runs (the suite's 64 KiB residues).
const TAIL_MAX: u64 = (64 << 10) + 63;

/// Whether `selftest_tail_37` must leave the last byte of `len` unwritten.
fn tail_short(len: u64) -> bool {
    len > 1024 && len % 64 == 37
}

/// The suite's memset checks (seeded fill) up to [`TAIL_MAX`], each
/// calling selftest entry `index` in place of variant `memset`.
fn tail_specs(seed: u64, memset: &'static routines::VariantDef, index: u64) -> Vec<CheckSpec> {
    let filter = suite::Filter {
        routines: vec![Routine::Memset],
        seed,
        ..suite::Filter::default()
    };
    suite::memset_placements(&filter, TAIL_MAX)
        .into_iter()
        .map(|(len, dst_offset)| CheckSpec {
            routine: Routine::Memset,
            variant: memset,
            len,
            count: 1,
            dst_offset,
            src_offset: None,
            fill: suite::Fill::Seeded,
            overlap: None,
            table: Some((abi::TABLE_SELFTEST, index)),
            edge: None,
        })
        .collect()
}

/// Whether a tail-residue check came out as it must: one byte short at
/// the end at a size [`tail_short`] names, passed at every other size.
fn tail_judged(r: &suite::CheckRecord) -> bool {
    match tail_short(r.size) {
        true => {
            r.breakdown.not_written == 1
                && r.breakdown.total() == 1
                && r.first_bad_offset == Some(r.size as i64 - 1)
        }
        false => r.verdict == Verdict::Pass,
    }
}

/// The tail-residue routine over the default geometry's memset
/// placements up to [`TAIL_MAX`] (the seeded fill, each placement once),
/// as the suite runs them: exactly the checks at a size it shortens fail,
/// one byte short at the end, and 1 KiB, 4 KiB and 64 KiB + 37 are among
/// them.
fn run_tail_case(
    opts: &VmOptions,
    side: &Side,
    name: &str,
    timeout: Duration,
) -> Result<CaseResult> {
    let (mut vm, memset, index) = boot(opts, side, Routine::Memset, name)?;
    let pats = Patterns::new(opts.seed, 0);
    let specs = tail_specs(opts.seed, memset, index);
    let run = run_quietly(&mut vm, &specs, &pats, timeout)?;
    let mut failed: Vec<u64> = run
        .records
        .iter()
        .filter(|r| r.verdict == Verdict::Fail)
        .map(|r| r.size)
        .collect();
    failed.sort_unstable();
    failed.dedup();
    let detected = run.failure.is_none()
        && run.records.len() == specs.len()
        && run.records.iter().all(tail_judged)
        && [1 << 10, 4 << 10, 64 << 10]
            .iter()
            .all(|b| failed.contains(&(b + 37)));
    let names: Vec<String> = failed.iter().map(u64::to_string).collect();
    Ok(CaseResult {
        name: name.to_string(),
        expected: Expect::TailResidue,
        detected,
        observed: format!(
            "{} memset checks up to {TAIL_MAX} B: {} failed, at sizes {}; the rest passed",
            run.records.len(),
            run.records
                .iter()
                .filter(|r| r.verdict == Verdict::Fail)
                .count(),
            names.join(", ")
        ),
    })
}

/// Run one broken routine in a fresh VM and judge what was observed.
pub fn run_case(
    opts: &VmOptions,
    side: &Side,
    name: &str,
    expected: Expect,
    timeout: Duration,
) -> Result<CaseResult> {
    match expected {
        Expect::SourceModified => run_source_case(opts, side, name, timeout),
        Expect::CopyShort => run_copy_short_case(opts, side, name, timeout),
        Expect::TailResidue => run_tail_case(opts, side, name, timeout),
        _ => run_memset_case(opts, side, name, expected, timeout),
    }
}

/// One check of a broken memset at [`LEN`] and [`DST_OFFSET`], judged by
/// what `expected` says it must be caught as.
fn run_memset_case(
    opts: &VmOptions,
    side: &Side,
    name: &str,
    expected: Expect,
    timeout: Duration,
) -> Result<CaseResult> {
    let (mut vm, memset, index) = boot(opts, side, Routine::Memset, name)?;
    let pats = Patterns::new(opts.seed, 0);
    let spec = CheckSpec {
        routine: Routine::Memset,
        variant: memset,
        len: LEN,
        count: 1,
        dst_offset: DST_OFFSET,
        src_offset: None,
        fill: suite::Fill::Seeded,
        overlap: None,
        table: Some((abi::TABLE_SELFTEST, index)),
        edge: (expected == Expect::EdgeOverrun).then_some(suite::Edge::TargetEnd),
    };
    // A hang is expected here: do not wait the full --timeout for it.
    let t = if expected == Expect::Timeout {
        timeout.min(Duration::from_secs(2))
    } else {
        timeout
    };
    let (detected, observed) = match suite::run_check(&mut vm, &spec, &pats, t, None) {
        Ok((rec, _, _)) => {
            let observed = match &rec.reason {
                Some(r) => format!("verification failed: {r}"),
                None => "verification passed (nothing detected)".into(),
            };
            (caught_in_record(expected, &rec), observed)
        }
        Err(Error::Vmm(VmmError::Guest(f))) => (
            caught_as_failure(expected, &f, &vm, &spec),
            format!("{:?}: {}", f.kind, f.detail),
        ),
        Err(e) => return Err(e),
    };
    Ok(CaseResult {
        name: name.to_string(),
        expected,
        detected,
        observed,
    })
}

/// Whether a memset case that ran to its end was caught as `expected`
/// says: a contract case by its breach alone, a memory case by exactly
/// its one bad byte and no breach.
fn caught_in_record(expected: Expect, rec: &suite::CheckRecord) -> bool {
    let b = rec.breakdown;
    let first = rec.first_bad_offset;
    let breach = rec.contract.map(|c| c.kind);
    // A contract case breaks the contract alone; a memory case
    // breaks no contract.
    let only = |want: fn(BreachKind) -> bool| b.total() == 0 && breach.is_some_and(want);
    let memory = |ok: bool| ok && breach.is_none();
    match expected {
        Expect::CalleeSaved => only(|k| matches!(k, BreachKind::CalleeSaved { .. })),
        Expect::StackMoved => only(|k| k == BreachKind::Stack),
        Expect::FlagSet => only(|k| matches!(k, BreachKind::Flags { .. })),
        Expect::WrongReturn => only(|k| k == BreachKind::Return),
        Expect::EdgeOverrun => {
            breach == Some(BreachKind::Fault)
                && rec.edge == Some(crate::record::Edge::TargetEnd)
                && rec.fault_distance == Some(0)
        }
        Expect::StrayWrite => memory(
            b.outside == 1
                && b.total() == 1
                && first == Some(LEN as i64 + (8 << 20))
                && rec.stray_bytes == Some(1),
        ),
        Expect::Short => {
            memory(b.not_written == 1 && b.total() == 1 && first == Some(LEN as i64 - 1))
        }
        Expect::Overrun => memory(b.overrun == 1 && b.total() == 1 && first == Some(LEN as i64)),
        Expect::WrongValue => {
            memory(b.wrong_value == 1 && b.total() == 1 && first == Some(LEN as i64 / 2))
        }
        Expect::Exception
        | Expect::TruncatedPointer
        | Expect::TextWritten
        | Expect::DataExecuted
        | Expect::Timeout
        | Expect::SourceModified
        | Expect::CopyShort
        | Expect::TailResidue => false,
    }
}

/// Whether a memset case that ended the guest (`f`) was caught as
/// `expected` says: the exception it must take, where, or the watchdog.
fn caught_as_failure(expected: Expect, f: &GuestFailure, vm: &Vm, spec: &CheckSpec) -> bool {
    match expected {
        Expect::Exception => {
            f.kind == FailureKind::Exception
                && f.vector == Some(arch::UNDEFINED_INSTRUCTION_CLASS)
                && f.pc_symbol
                    .as_deref()
                    .is_some_and(|s| s.starts_with("selftest_fault"))
        }
        Expect::TruncatedPointer => {
            let truncated = arch::guest_va(suite::dst_address(spec)) & 0xffff_ffff;
            f.kind == FailureKind::Exception && f.fault_address == Some(truncated)
        }
        Expect::TextWritten => {
            let text = vm.loaded.va..vm.loaded.va + vm.loaded.sections.text_end;
            f.kind == FailureKind::Exception
                && f.fault_address.is_some_and(|a| text.contains(&a))
                && f.pc_symbol
                    .as_deref()
                    .is_some_and(|s| s.starts_with("selftest_patch_text"))
        }
        Expect::DataExecuted => {
            // arm64 fetches from the first 4-byte aligned address.
            let dst = arch::guest_va(suite::dst_address(spec));
            f.kind == FailureKind::Exception
                && f.fault_address.is_some_and(|a| (dst..dst + 4).contains(&a))
        }
        Expect::Timeout => f.kind == FailureKind::Timeout,
        _ => false,
    }
}

/// Options for a selftest VM of `side`: small, vanilla unless `side` is
/// a memset configuration; and the side its blob then comes from.
pub fn vm_options(base: &VmOptions, side: &Side) -> Result<(VmOptions, Side)> {
    let mut o = base.clone();
    o.mem = o.mem.clamp(arch::MIN_RAM, (64 << 20).max(arch::MIN_RAM));
    if side.config() == LinkConfig::Memset {
        return Ok((o, side.clone()));
    }
    o.blob = crate::blob::Blob::get(LinkConfig::Vanilla)?;
    Ok((o, LinkConfig::Vanilla.into()))
}
