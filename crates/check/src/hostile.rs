//! `hypclear selftest --hostile`: guests that misbehave on purpose, one way
//! each (`guest/<arch>/hostile/`, reached through the selftest table like
//! the broken routines). Each runs in a fresh VM and must end the way
//! [`Expect`] says: the host catching the protocol [`Rule`] it breaks, a
//! stray write caught by `--check whole`, or a clean completion whose log
//! output was bounded and sanitized (the test in `tests/hostile.rs` checks
//! the output). Verdicts are decided on types ([`Seen`]), never on the
//! wording of a message.
use crate::arch;
use crate::checker::{Patterns, Snapshot};
use crate::error::{Error, Result, VmmError};
use crate::kernel::Side;
use crate::routines::{self, Routine};
use crate::selftest::{Cases, DST_OFFSET, LEN};
use crate::suite::{self, CheckRecord, CheckSpec, Verdict};
use crate::vmm::{Command, FailureKind, GuestFailure, Rule, Vm, VmOptions};
use hypclear_abi as abi;
use serde::Serialize;
use std::time::{Duration, Instant};

/// How a hostile case must end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    /// The host catches the guest breaking this protocol rule.
    Breaks(Rule),
    /// Any guest failure (harness corruption: what the CPU does with a
    /// zeroed page table or vector table is up to the CPU and KVM).
    AnyFailure,
    /// The command completes and memory checks out (the log cases: their
    /// output is judged by the caller).
    Completes,
    /// `--check whole` reports stray bytes far from the target.
    StrayWrite,
}

/// How the host calls the routine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Args {
    /// Like a memset of the selftest size, checked with `--check whole`.
    Memset,
    /// `scribble(area, far address, area bytes)` over corruptible area `i`.
    Scribble(usize),
    /// `log_race(peer's log buffer, rounds)` on two vCPUs at once.
    LogRace,
}

/// One case: (name, selftest-table routine, arguments, expectation).
struct Case(&'static str, &'static str, Args, Expect);

const CASES: &[Case] = &[
    Case(
        "log_flood",
        "hostile_log_flood",
        Args::Memset,
        Expect::Breaks(Rule::LogFlood),
    ),
    Case(
        "log_huge",
        "hostile_log_huge",
        Args::Memset,
        Expect::Completes,
    ),
    Case(
        "log_escape",
        "hostile_log_escape",
        Args::Memset,
        Expect::Completes,
    ),
    Case(
        "log_forge",
        "hostile_log_forge",
        Args::Memset,
        Expect::Completes,
    ),
    Case(
        "log_race",
        "hostile_log_race",
        Args::LogRace,
        Expect::Completes,
    ),
    Case(
        "unknown_hypercall",
        "hostile_unknown_hypercall",
        Args::Memset,
        Expect::Breaks(Rule::UnknownHypercall),
    ),
    Case(
        "done_early",
        "hostile_done_early",
        Args::Memset,
        Expect::Breaks(Rule::OutOfOrder),
    ),
    Case(
        "ready_again",
        "hostile_ready_again",
        Args::Memset,
        Expect::Breaks(Rule::OutOfOrder),
    ),
    Case(
        "forged_timestamps",
        "hostile_forged_timestamps",
        Args::Memset,
        Expect::Breaks(Rule::TimestampsBackwards),
    ),
    Case(
        "doorbell_1",
        "hostile_doorbell_1",
        Args::Memset,
        Expect::Breaks(Rule::DoorbellWidth),
    ),
    Case(
        "doorbell_2",
        "hostile_doorbell_2",
        Args::Memset,
        Expect::Breaks(Rule::DoorbellWidth),
    ),
    Case(
        "doorbell_4",
        "hostile_doorbell_4",
        Args::Memset,
        Expect::Breaks(Rule::DoorbellWidth),
    ),
    #[cfg(target_arch = "x86_64")]
    Case(
        "doorbell_16",
        "hostile_doorbell_16",
        Args::Memset,
        Expect::Breaks(Rule::RingSite),
    ),
    Case(
        "doorbell_site",
        "hostile_doorbell_site",
        Args::Memset,
        Expect::Breaks(Rule::RingSite),
    ),
    Case(
        "stray_write",
        "hostile_stray_write",
        Args::Memset,
        Expect::StrayWrite,
    ),
    Case(
        "page_tables",
        "hostile_scribble",
        Args::Scribble(0),
        Expect::AnyFailure,
    ),
    Case(
        "vectors",
        "hostile_scribble",
        Args::Scribble(1),
        Expect::AnyFailure,
    ),
    Case(
        "spin",
        "hang",
        Args::Memset,
        Expect::Breaks(Rule::NoProgress),
    ),
];

/// The longest the spin case waits for progress (less with a shorter
/// `--timeout`); the other cases get the full `--timeout`, which slow
/// (emulated, e.g. QEMU TCG) hosts raise.
pub(crate) const SPIN_TIMEOUT: Duration = Duration::from_secs(2);

/// Logs per vCPU of the `log_race` case: within the per-command log
/// budget (64 logs, 16 KiB), so the case must complete.
pub const RACE_ROUNDS: u64 = 32;

/// vCPUs of the `log_race` case.
const RACE_VCPUS: u64 = 2;

/// The names of every case, in order.
pub fn names() -> Vec<&'static str> {
    CASES.iter().map(|c| c.0).collect()
}

#[derive(Debug, Clone, Serialize)]
pub struct HostileResult {
    pub name: String,
    pub expected: Expect,
    /// The observed outcome matched the expectation.
    pub detected: bool,
    /// The failure kind seen, if the guest failed.
    pub kind: Option<FailureKind>,
    /// The protocol rule the host saw broken, if any.
    pub rule: Option<Rule>,
    pub observed: String,
    pub seconds: f64,
}

/// Run the cases whose name is in `only` (all when empty), each in a fresh
/// VM built from `opts` (the blob of `side`), with the watchdog at `timeout`.
pub fn run(
    opts: &VmOptions,
    side: &Side,
    only: &[String],
    timeout: Duration,
) -> Result<Cases<HostileResult>> {
    if let Some(bad) = only.iter().find(|n| !names().contains(&n.as_str())) {
        return Err(Error::UnknownCase {
            name: bad.clone(),
            known: names(),
        });
    }
    Ok(Cases::collect(
        CASES
            .iter()
            .filter(|c| only.is_empty() || only.iter().any(|n| n == c.0))
            .map(|c| run_case(opts, side, c, timeout)),
    ))
}

fn run_case(
    opts: &VmOptions,
    side: &Side,
    case: &Case,
    timeout: Duration,
) -> Result<HostileResult> {
    let Case(name, routine, args, expected) = *case;
    // A hang is expected of the spin case: do not wait the full --timeout.
    let timeout = if expected == Expect::Breaks(Rule::NoProgress) {
        timeout.min(SPIN_TIMEOUT)
    } else {
        timeout
    };
    let t = Instant::now();
    let mut opts = opts.clone();
    if args == Args::LogRace {
        opts.vcpus = RACE_VCPUS;
    }
    let mut vm = Vm::new(crate::vmm::open_kvm()?, &opts)?;
    let index = vm.blob.selftest_index(routine)?;
    let res = match args {
        Args::Memset => memset_case(&mut vm, side, index, opts.seed, timeout).map(Some),
        Args::Scribble(i) => scribble(&mut vm, index, i, timeout).map(|()| None),
        Args::LogRace => log_race(&mut vm, index, timeout).map(|()| None),
    };
    let seen = match res {
        Ok(record) => Seen::Completed(record.map(Box::new)),
        Err(Error::Vmm(VmmError::Guest(f))) => Seen::Failed(f),
        Err(e) => return Err(e),
    };
    Ok(HostileResult {
        name: name.to_string(),
        expected,
        detected: seen.handled(expected),
        kind: seen.failure().map(|f| f.kind),
        rule: seen.failure().and_then(|f| f.rule),
        observed: seen.to_string(),
        seconds: t.elapsed().as_secs_f64(),
    })
}

/// How a case ended, typed: the verdict is decided on this, the text
/// ([`std::fmt::Display`]) is for people.
#[derive(Debug)]
enum Seen {
    /// The command ran to its end: the memory check's record, or none for
    /// the cases that check no memory (log_race, the scribbles).
    Completed(Option<Box<CheckRecord>>),
    /// The guest failed.
    Failed(Box<GuestFailure>),
}

impl Seen {
    fn failure(&self) -> Option<&GuestFailure> {
        match self {
            Seen::Failed(f) => Some(f),
            Seen::Completed(_) => None,
        }
    }

    /// Whether the case ended the way `expected` says.
    fn handled(&self, expected: Expect) -> bool {
        match (expected, self) {
            (Expect::Breaks(rule), Seen::Failed(f)) => f.rule == Some(rule),
            (Expect::AnyFailure, Seen::Failed(_)) => true,
            (Expect::Completes, Seen::Completed(None)) => true,
            (Expect::Completes, Seen::Completed(Some(r))) => {
                r.verdict == Verdict::Pass && r.breakdown.total() == 0
            }
            (Expect::StrayWrite, Seen::Completed(Some(r))) => {
                r.verdict == Verdict::Fail && r.breakdown.outside > 0
            }
            _ => false,
        }
    }
}

impl std::fmt::Display for Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Seen::Completed(None) => f.write_str(COMPLETED_ON_ALL),
            Seen::Completed(Some(r)) => match &r.reason {
                Some(why) => write!(f, "verification failed: {why}"),
                None => f.write_str("verification passed"),
            },
            Seen::Failed(g) => write!(f, "{:?}: {}", g.kind, g.detail),
        }
    }
}

/// `scribble(area, far address, area bytes)` over corruptible area `i`.
fn scribble(vm: &mut Vm, index: u64, i: usize, timeout: Duration) -> Result<()> {
    let (_, area, len) = arch::corruptible_areas(&vm.loaded, &vm.mem_state, vm.privilege)[i];
    let far = arch::guest_va(vm.ram.end() - abi::PAGE_SIZE);
    let cmd = Command {
        table: abi::TABLE_SELFTEST,
        index,
        args: crate::vmm::Args {
            a0: area,
            a1: far,
            a2: len,
            count: 1,
            ..Default::default()
        },
        returns: crate::vmm::Returns::Nothing,
    };
    vm.vcpu(0)?.call(&cmd, timeout)?;
    Ok(())
}

/// What a case that checks no memory reports when it ran to its end.
const COMPLETED_ON_ALL: &str = "completed on every vCPU";

/// Run `log_race` on every vCPU at once, each scribbling over the next
/// one's log buffer while logging its own; every command must complete
/// (the printed lines are judged by the caller).
fn log_race(vm: &mut Vm, index: u64, timeout: Duration) -> Result<()> {
    let n = vm.vcpus.len() as u64;
    let barrier = std::sync::Barrier::new(vm.vcpus.len());
    let results: Vec<Result<()>> = std::thread::scope(|s| {
        let handles: Vec<_> = vm
            .vcpus
            .iter_mut()
            .enumerate()
            .map(|(i, v)| {
                let peer = (i as u64 + 1) % n;
                let cmd = Command {
                    table: abi::TABLE_SELFTEST,
                    index,
                    args: crate::vmm::Args {
                        a0: arch::guest_va(arch::mailbox_gpa(peer) + abi::MB_LOG_BUF),
                        a1: RACE_ROUNDS,
                        count: 1,
                        ..Default::default()
                    },
                    returns: crate::vmm::Returns::Nothing,
                };
                let b = &barrier;
                s.spawn(move || {
                    // Wait at the barrier even when the start failed, or
                    // the other vCPUs' threads would wait forever.
                    let started = v.start(timeout);
                    b.wait();
                    started?;
                    v.call(&cmd, timeout)?;
                    Ok(v.exit(timeout)?)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::internal("vCPU thread panicked")))
            })
            .collect()
    });
    results.into_iter().collect::<Result<Vec<()>>>()?;
    Ok(())
}

/// Run the routine as a memset of the selftest size, checked with
/// `--check whole`: the check's record.
fn memset_case(
    vm: &mut Vm,
    side: &Side,
    index: u64,
    seed: u64,
    timeout: Duration,
) -> Result<CheckRecord> {
    let variant = routines::variants(Routine::Memset, side)
        .into_iter()
        .next()
        .ok_or(Error::NoVariant {
            routine: Routine::Memset,
        })?;
    let spec = CheckSpec {
        routine: Routine::Memset,
        variant,
        len: LEN,
        count: 1,
        dst_offset: DST_OFFSET,
        src_offset: None,
        fill: suite::Fill::Seeded,
        overlap: None,
        table: Some((abi::TABLE_SELFTEST, index)),
        edge: None,
    };
    let pats = Patterns::new(seed, 0);
    let mut snap = Snapshot::take(&vm.ram)?;
    let (rec, _, _) = suite::run_check(vm, &spec, &pats, timeout, Some(&mut snap))?;
    vm.vcpu(0)?.exit(timeout)?;
    Ok(rec)
}
