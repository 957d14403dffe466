//! The verification suite: which checks to run, and running them on a VM.
use crate::arch;
use crate::blob::LinkConfig;
use crate::blob::abi::PAGE_SIZE;
use crate::check::checker::{self, Breakdown, GUARD, Patterns, Placement};
use crate::error::{Error, Result};
use crate::routines::{self, Call, Kind, Routine, VariantDef};
use crate::vmm::{GuestFailure, Vm};
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

/// Arena bytes a check needs: guards, target, and a separate source.
pub fn footprint(spec: &CheckSpec) -> u64 {
    let dst_window = GUARD.next_multiple_of(PAGE_SIZE) + 64 + spec.total() + GUARD;
    let src = if spec.routine.kind() == Kind::Copy {
        PAGE_SIZE + spec.total() + 64 + PAGE_SIZE
    } else {
        0
    };
    dst_window.next_multiple_of(PAGE_SIZE) + src + PAGE_SIZE
}

/// Where a check goes in the arena (the same place for every check, so
/// the memory stays warm).
pub fn placement(spec: &CheckSpec) -> Placement {
    let dst = arch::ARENA_BASE + PAGE_SIZE + GUARD.next_multiple_of(PAGE_SIZE) + spec.dst_offset;
    let src = spec
        .src_offset
        .map(|o| (dst + spec.total() + GUARD).next_multiple_of(PAGE_SIZE) + PAGE_SIZE + o);
    Placement {
        dst,
        len: spec.total(),
        src,
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

/// Run one check: prepare, call, verify.
pub fn run_check(
    vm: &mut Vm,
    spec: &CheckSpec,
    pats: &Patterns,
    timeout: Duration,
    table: Option<(u64, u64)>,
    mut whole: Option<&mut checker::Snapshot>,
) -> Result<(CheckRecord, Duration, u64)> {
    let p = placement(spec);
    checker::prepare(&vm.ram, &p, pats)?;
    if let Some(snap) = whole.as_deref_mut() {
        snap.refresh(&vm.ram, &p)?;
    }
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
    if let Some((t, i)) = table {
        cmd.table = t;
        cmd.index = i;
    }
    let r = vm.vcpu(0)?.call(&cmd, timeout)?;
    let t = Instant::now();
    let mut out = checker::check(&vm.ram, &p, spec.routine.kind(), pats)?;
    let mut bytes = p.len + 2 * GUARD + if p.src.is_some() { p.len } else { 0 };
    if let Some(snap) = whole {
        let (n, first) = snap.changed_outside(&vm.ram, &p)?;
        // What the routine wrote in its own area is judged above; take it
        // in so the next check compares against it.
        snap.refresh(&vm.ram, &p)?;
        out.breakdown.outside = n;
        out.bad_bytes = out.breakdown.total();
        if out.first_bad.is_none() {
            out.first_bad = first;
        }
        bytes = vm.ram.end() - arch::BLOB_WINDOW;
    }
    let dt = t.elapsed();
    let mut rec = record(
        vm.blob.config,
        spec,
        if out.passed() {
            Verdict::Pass
        } else {
            Verdict::Fail
        },
        None,
    );
    rec.first_bad_offset = out.first_bad;
    rec.bad_bytes = out.bad_bytes;
    rec.breakdown = out.breakdown;
    rec.ticks = r.ticks();
    if !out.passed() {
        rec.reason = Some(format!(
            "{}: {} bad bytes, first at offset {}",
            out.breakdown.label(),
            out.bad_bytes,
            out.first_bad.unwrap_or(0)
        ));
    }
    Ok((rec, dt, bytes))
}

/// Run `specs` in order on `vm`; a guest failure ends the run.
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
    for spec in specs {
        match run_check(vm, spec, pats, timeout, None, snap.as_mut()) {
            Ok((rec, dt, bytes)) => {
                out.records.push(rec);
                out.check_time += dt;
                out.checked_bytes += bytes;
            }
            Err(Error::Guest(f)) => {
                out.records.push(record(
                    vm.blob.config,
                    spec,
                    Verdict::Fail,
                    Some(f.detail.clone()),
                ));
                out.failure = Some(*f);
                break;
            }
            Err(Error::Interrupted) => {
                out.interrupted = true;
                break;
            }
            Err(e) => return Err(e),
        }
        progress.inc(1);
    }
    Ok(out)
}
