//! `hypclear selftest --hostile`: guests that misbehave on purpose, one way
//! each (`guest/<arch>/hostile/`, reached through the selftest table like
//! the broken routines). Each runs in a fresh VM and must end the way
//! [`Expect`] says: a typed guest failure of the right kind, a stray write
//! caught by `--check whole`, or a clean completion whose log output was
//! bounded and sanitized (the test in `tests/hostile.rs` checks the output).
use crate::arch;
use crate::blob::abi;
use crate::check::checker::{Patterns, Snapshot};
use crate::check::selftest::{DST_OFFSET, LEN};
use crate::check::suite::{self, CheckSpec};
use crate::error::{Error, Result};
use crate::routines::{self, Routine};
use crate::vmm::{Command, FailureKind, Vm, VmOptions};
use serde::Serialize;
use std::time::{Duration, Instant};

/// How a hostile case must end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    /// A guest failure of this kind whose detail contains the text.
    Failure(FailureKind, &'static str),
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
}

/// One case: (name, selftest-table routine, arguments, expectation).
struct Case(&'static str, &'static str, Args, Expect);

const CASES: &[Case] = &[
    Case(
        "log_flood",
        "hostile_log_flood",
        Args::Memset,
        Expect::Failure(FailureKind::Protocol, "log flood"),
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
        "unknown_hypercall",
        "hostile_unknown_hypercall",
        Args::Memset,
        Expect::Failure(FailureKind::UnknownHypercall, "unknown hypercall"),
    ),
    Case(
        "done_early",
        "hostile_done_early",
        Args::Memset,
        Expect::Failure(FailureKind::Protocol, "expected HC_RESULT, got HC_DONE"),
    ),
    Case(
        "ready_again",
        "hostile_ready_again",
        Args::Memset,
        Expect::Failure(FailureKind::Protocol, "expected HC_RESULT, got HC_READY"),
    ),
    Case(
        "forged_timestamps",
        "hostile_forged_timestamps",
        Args::Memset,
        Expect::Failure(FailureKind::Protocol, "timestamps go backwards"),
    ),
    Case(
        "doorbell_1",
        "hostile_doorbell_1",
        Args::Memset,
        Expect::Failure(FailureKind::Protocol, "1-byte store"),
    ),
    Case(
        "doorbell_2",
        "hostile_doorbell_2",
        Args::Memset,
        Expect::Failure(FailureKind::Protocol, "2-byte store"),
    ),
    Case(
        "doorbell_4",
        "hostile_doorbell_4",
        Args::Memset,
        Expect::Failure(FailureKind::Protocol, "4-byte store"),
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
        Expect::Failure(FailureKind::Timeout, "no progress"),
    ),
];

/// Watchdog timeout of the hostile VMs (the spin case waits this long).
pub const TIMEOUT: Duration = Duration::from_secs(2);

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
    pub observed: String,
    pub seconds: f64,
}

/// Run the cases whose name is in `only` (all when empty), each in a fresh
/// VM built from `opts`.
pub fn run(opts: &VmOptions, only: &[String]) -> Result<Vec<HostileResult>> {
    if let Some(bad) = only.iter().find(|n| !names().contains(&n.as_str())) {
        return Err(Error::Usage(format!(
            "no hostile case `{bad}`; the cases are {}",
            names().join(", ")
        )));
    }
    CASES
        .iter()
        .filter(|c| only.is_empty() || only.iter().any(|n| n == c.0))
        .map(|c| run_case(opts, c))
        .collect()
}

fn run_case(opts: &VmOptions, case: &Case) -> Result<HostileResult> {
    let Case(name, routine, args, expected) = *case;
    let t = Instant::now();
    let mut vm = Vm::new(crate::vmm::open_kvm()?, opts)?;
    let index = vm
        .blob
        .selftest_index(routine)
        .ok_or_else(|| Error::Blob(format!("the blob has no selftest routine `{routine}`")))?;
    let res = match args {
        Args::Memset => memset_case(&mut vm, index, opts.seed),
        Args::Scribble(i) => {
            let (_, area, len) = arch::corruptible_areas(&vm.loaded)[i];
            let far = vm.ram.end() - abi::PAGE_SIZE;
            let cmd = Command {
                table: abi::TABLE_SELFTEST,
                index,
                a0: area,
                a1: far,
                a2: len,
                count: 1,
                ..Command::default()
            };
            vm.vcpu(0)?
                .call(&cmd, TIMEOUT)
                .map(|_| "the command completed".to_string())
        }
    };
    let seconds = t.elapsed().as_secs_f64();
    let (detected, kind, observed) = match res {
        Ok(observed) => {
            let ok = match expected {
                Expect::Completes => observed == "verification passed",
                Expect::StrayWrite => observed.contains("stray write"),
                _ => false,
            };
            (ok, None, observed)
        }
        Err(Error::Guest(f)) => {
            let ok = match expected {
                Expect::Failure(k, text) => f.kind == k && f.detail.contains(text),
                Expect::AnyFailure => true,
                _ => false,
            };
            (ok, Some(f.kind), format!("{:?}: {}", f.kind, f.detail))
        }
        Err(e) => return Err(e),
    };
    Ok(HostileResult {
        name: name.to_string(),
        expected,
        detected,
        kind,
        observed,
        seconds,
    })
}

/// Run the routine as a memset of the selftest size, checked with
/// `--check whole`; "verification passed" or the checker's reason.
fn memset_case(vm: &mut Vm, index: u64, seed: u64) -> Result<String> {
    let variant = routines::variants(Routine::Memset, &vm.side)
        .into_iter()
        .next()
        .ok_or_else(|| Error::Blob("no memset variant".into()))?;
    let spec = CheckSpec {
        routine: Routine::Memset,
        variant,
        len: LEN,
        count: 1,
        dst_offset: DST_OFFSET,
        src_offset: None,
    };
    let pats = Patterns::new(seed, 0);
    let mut snap = Snapshot::take(&vm.ram)?;
    let (rec, _, _) = suite::run_check(
        vm,
        &spec,
        &pats,
        TIMEOUT,
        Some((abi::TABLE_SELFTEST, index)),
        Some(&mut snap),
    )?;
    vm.vcpu(0)?.exit(TIMEOUT)?;
    Ok(match rec.reason {
        Some(r) => format!("verification failed: {r}"),
        None => "verification passed".into(),
    })
}
