//! The hypercall protocol as a pure state machine: (state, [`Exit`],
//! mailbox snapshot) -> [`Step`] or a typed [`Violation`]. No KVM here, so
//! it is unit- and property-tested; `vcpu.rs` only feeds it exits.
//!
//! Everything the guest supplies is untrusted input: the doorbell must be a
//! single 8-byte store of a known number from one of the harness's ring
//! sites (`guest/<arch>/ring.h`), hypercalls must come in protocol
//! order, result ids and timestamps are validated, and logs are bounded per
//! command (count and bytes; more is a "log flood").
use super::Exit;
use crate::error::{FailureKind, Rule};
use crate::watchdog::Expired;
use hypclear_abi as abi;

/// Most `HC_LOG`s one command (or the boot, or the exit) may ring.
pub(crate) const MAX_LOGS_PER_COMMAND: u32 = 64;
/// Most log bytes (after the NUL cut) one command may print.
pub(crate) const MAX_LOG_BYTES_PER_COMMAND: u64 = 16 * 1024;

/// A host copy of one vCPU's mailbox page, taken at a doorbell exit. The
/// guest may keep writing its RAM (another vCPU); decisions are made on
/// this copy only.
#[derive(Clone)]
pub struct Mailbox(pub Box<[u8; abi::PAGE_SIZE as usize]>);

impl Mailbox {
    pub fn zeroed() -> Mailbox {
        Mailbox(Box::new([0u8; abi::PAGE_SIZE as usize]))
    }

    /// The 64-bit field at byte offset `off` (0 past the page).
    pub fn u64(&self, off: u64) -> u64 {
        let o = off as usize;
        self.0
            .get(o..o.saturating_add(8))
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)
            .unwrap_or(0)
    }

    /// The log message: at most `LOG_BUF_SIZE` bytes, cut at the first NUL
    /// and at the guest's `MB_LOG_LEN` (whichever is shortest).
    pub fn log_bytes(&self) -> &[u8] {
        let len = self.u64(abi::MB_LOG_LEN).min(abi::LOG_BUF_SIZE) as usize;
        let start = abi::MB_LOG_BUF as usize;
        let b = &self.0[start..start + len];
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        &b[..end]
    }
}

/// What the host is waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// HC_READY after reset.
    Ready,
    /// HC_RESULT for command `id`.
    Result { id: u64 },
    /// HC_DONE after CMD_EXIT.
    Done,
}

/// One command's result, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timestamps {
    pub t0: u64,
    pub t1: u64,
    pub ret: u64,
    /// `MB_RES_BREACH`, `_GOT`, `_WANT` as the guest wrote them
    /// (decoded by `contract::decode`, which knows the command).
    pub breach: [u64; 3],
}

/// What the loop does after one exit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Not a hypercall to hand back (a kick without timeout): run again.
    Continue,
    /// Print this (sanitized, bounded) log line, then run again.
    Log(String),
    /// The awaited HC_READY.
    Ready,
    /// The awaited HC_RESULT, validated.
    Result(Timestamps),
    /// The awaited HC_DONE.
    Done,
    /// HC_FAIL: the caller decodes the fail fields from the same snapshot.
    Fail,
}

/// A protocol violation: the rule broken and what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub rule: Rule,
    pub detail: String,
}

impl Violation {
    pub fn kind(&self) -> FailureKind {
        self.rule.kind()
    }
}

fn violation(rule: Rule, detail: impl Into<String>) -> Violation {
    Violation {
        rule,
        detail: detail.into(),
    }
}

/// Where the harness rings the doorbell: the guest-virtual PCs (at the
/// exit, as `arch::pc` reads them) of its `RING` stores, sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RingSites(std::sync::Arc<[u64]>);

impl RingSites {
    /// The sites of a blob whose ring offsets are `offsets`, loaded at `va`.
    pub fn new(va: u64, offsets: &[u64]) -> RingSites {
        let mut v: Vec<u64> = offsets.iter().map(|o| va.wrapping_add(*o)).collect();
        v.sort_unstable();
        v.dedup();
        RingSites(v.into())
    }

    fn contains(&self, pc: u64) -> bool {
        self.0.binary_search(&pc).is_ok()
    }
}

/// The protocol state of one vCPU for one wait (boot, command or exit).
#[derive(Debug, Clone)]
pub struct Protocol {
    pub waiting: Waiting,
    sites: RingSites,
    logs: u32,
    log_bytes: u64,
}

impl Protocol {
    pub fn new(waiting: Waiting, sites: RingSites) -> Protocol {
        Protocol {
            waiting,
            sites,
            logs: 0,
            log_bytes: 0,
        }
    }

    /// One exit. `expired`: what the watchdog found this wait ran out of.
    /// `mb` is read only for doorbell exits.
    pub fn step(
        &mut self,
        exit: &Exit,
        expired: Option<Expired>,
        mb: &dyn Fn() -> Mailbox,
    ) -> Result<Step, Violation> {
        if let Some(e) = expired {
            return Err(violation(
                Rule::NoProgress,
                format!(
                    "no progress for {e} (waiting for {}): the guest did not \
                     complete the command (raise --timeout if the work is just slow)",
                    self.expected()
                ),
            ));
        }
        match exit {
            Exit::Interrupted => Ok(Step::Continue),
            Exit::Shutdown => Err(violation(
                Rule::Shutdown,
                "shutdown (triple fault): the guest took an exception it could not handle",
            )),
            Exit::InternalError => Err(violation(
                Rule::KvmInternal,
                "KVM internal error (e.g. an instruction KVM could not emulate)",
            )),
            Exit::Store {
                addr,
                len,
                value,
                pc,
            } if *addr == abi::DOORBELL_GPA => {
                self.check_ring(*len, *value, *pc)?;
                self.hypercall(*value, &mb())
            }
            Exit::Store {
                addr, len, value, ..
            } => Err(violation(
                Rule::Unbacked,
                format!("{len}-byte store of {value:#x} to unbacked guest address {addr:#x}"),
            )),
            Exit::Load { addr } => Err(violation(
                Rule::Unbacked,
                format!("load from unbacked guest address {addr:#x}"),
            )),
            Exit::SystemEvent { kind } => Err(violation(
                Rule::SystemEvent,
                format!(
                    "the guest asked for system event {kind} (PSCI) in the middle of the protocol"
                ),
            )),
            Exit::Other(what) => Err(violation(
                Rule::OtherExit,
                format!("exit the protocol does not use: {what}"),
            )),
        }
    }

    /// A doorbell store is a hypercall only as one 8-byte store from one
    /// of the harness's ring sites (when the exit tells the PC).
    fn check_ring(&self, len: usize, value: u64, pc: Option<u64>) -> Result<(), Violation> {
        if len != 8 {
            return Err(violation(
                Rule::DoorbellWidth,
                format!(
                    "{len}-byte store of {value:#x} to the doorbell: hypercalls are \
                     single 8-byte stores"
                ),
            ));
        }
        if let Some(pc) = pc
            && !self.sites.contains(pc)
        {
            return Err(violation(
                Rule::RingSite,
                format!(
                    "store of {value:#x} to the doorbell from {pc:#x}, not one of the \
                     harness's {} ring sites: a routine's own store, or one half of a \
                     wider store, is no hypercall",
                    self.sites.0.len()
                ),
            ));
        }
        Ok(())
    }

    fn expected(&self) -> &'static str {
        match self.waiting {
            Waiting::Ready => "HC_READY",
            Waiting::Result { .. } => "HC_RESULT",
            Waiting::Done => "HC_DONE",
        }
    }

    fn hypercall(&mut self, value: u64, mb: &Mailbox) -> Result<Step, Violation> {
        let name = match value {
            abi::HC_READY => "HC_READY",
            abi::HC_RESULT => "HC_RESULT",
            abi::HC_DONE => "HC_DONE",
            abi::HC_FAIL => return Ok(Step::Fail),
            abi::HC_LOG => return self.log(mb),
            other => {
                return Err(violation(
                    Rule::UnknownHypercall,
                    format!("unknown hypercall number {other:#x} at the doorbell"),
                ));
            }
        };
        match (self.waiting, value) {
            (Waiting::Ready, abi::HC_READY) => Ok(Step::Ready),
            (Waiting::Done, abi::HC_DONE) => Ok(Step::Done),
            (Waiting::Result { id }, abi::HC_RESULT) => {
                let got = mb.u64(abi::MB_RES_ID);
                if got != id {
                    return Err(violation(
                        Rule::WrongResultId,
                        format!("result for command {got}, expected {id}"),
                    ));
                }
                let t = Timestamps {
                    t0: mb.u64(abi::MB_RES_T0),
                    t1: mb.u64(abi::MB_RES_T1),
                    ret: mb.u64(abi::MB_RES_RET),
                    breach: [
                        mb.u64(abi::MB_RES_BREACH),
                        mb.u64(abi::MB_RES_BREACH_GOT),
                        mb.u64(abi::MB_RES_BREACH_WANT),
                    ],
                };
                if t.t0 > t.t1 {
                    return Err(violation(
                        Rule::TimestampsBackwards,
                        format!(
                            "result timestamps go backwards (T0 {:#x} > T1 {:#x})",
                            t.t0, t.t1
                        ),
                    ));
                }
                Ok(Step::Result(t))
            }
            _ => Err(violation(
                Rule::OutOfOrder,
                format!("expected {}, got {name}", self.expected()),
            )),
        }
    }

    fn log(&mut self, mb: &Mailbox) -> Result<Step, Violation> {
        let bytes = mb.log_bytes();
        self.logs = self.logs.saturating_add(1);
        self.log_bytes = self.log_bytes.saturating_add(bytes.len() as u64);
        if self.logs > MAX_LOGS_PER_COMMAND || self.log_bytes > MAX_LOG_BYTES_PER_COMMAND {
            return Err(violation(
                Rule::LogFlood,
                format!(
                    "log flood: more than {MAX_LOGS_PER_COMMAND} logs or \
                     {MAX_LOG_BYTES_PER_COMMAND} bytes of log while waiting for {}",
                    self.expected()
                ),
            ));
        }
        Ok(Step::Log(crate::text::sanitize(bytes)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cpu(secs: f64) -> Expired {
        Expired::Cpu {
            timeout: std::time::Duration::from_secs_f64(secs),
        }
    }

    fn mb_with(fields: &[(u64, u64)], log: &[u8]) -> Mailbox {
        let mut m = Mailbox::zeroed();
        for (off, v) in fields {
            m.0[*off as usize..*off as usize + 8].copy_from_slice(&v.to_le_bytes());
        }
        let n = log.len().min(abi::LOG_BUF_SIZE as usize);
        m.0[abi::MB_LOG_BUF as usize..abi::MB_LOG_BUF as usize + n].copy_from_slice(&log[..n]);
        m
    }

    /// The ring sites of the tests' harness.
    const SITE: u64 = 0xffff_8000_0000_1040;

    fn sites() -> RingSites {
        RingSites::new(0xffff_8000_0000_0000, &[0x1040, 0x2000])
    }

    fn bell_at(value: u64, pc: u64) -> Exit {
        Exit::Store {
            addr: abi::DOORBELL_GPA,
            len: 8,
            value,
            pc: Some(pc),
        }
    }

    fn bell(value: u64) -> Exit {
        bell_at(value, SITE)
    }

    #[test]
    fn protocol_order_ids_timestamps_and_doorbell_width_are_checked() {
        let m = Mailbox::zeroed;
        let mut p = Protocol::new(Waiting::Ready, sites());
        assert_eq!(p.step(&bell(abi::HC_READY), None, &m), Ok(Step::Ready));
        let mut p = Protocol::new(Waiting::Ready, sites());
        let e = p.step(&bell(abi::HC_DONE), None, &m).unwrap_err();
        assert_eq!(
            (e.rule, e.kind()),
            (Rule::OutOfOrder, FailureKind::Protocol)
        );
        let mut p = Protocol::new(Waiting::Result { id: 3 }, sites());
        let good = || {
            mb_with(
                &[
                    (abi::MB_RES_ID, 3),
                    (abi::MB_RES_T0, 5),
                    (abi::MB_RES_T1, 9),
                ],
                b"",
            )
        };
        assert!(matches!(
            p.step(&bell(abi::HC_RESULT), None, &good),
            Ok(Step::Result(Timestamps { t0: 5, t1: 9, .. }))
        ));
        let back = || {
            mb_with(
                &[
                    (abi::MB_RES_ID, 3),
                    (abi::MB_RES_T0, 9),
                    (abi::MB_RES_T1, 5),
                ],
                b"",
            )
        };
        let e = p.step(&bell(abi::HC_RESULT), None, &back).unwrap_err();
        assert_eq!(e.rule, Rule::TimestampsBackwards, "{e:?}");
        let narrow = Exit::Store {
            addr: abi::DOORBELL_GPA,
            len: 4,
            value: abi::HC_RESULT,
            pc: Some(SITE),
        };
        let e = p.step(&narrow, None, &good).unwrap_err();
        assert_eq!(e.rule, Rule::DoorbellWidth, "{e:?}");
        assert!(e.detail.contains("4-byte"), "{e:?}");
        let e = p.step(&bell(7), None, &good).unwrap_err();
        assert_eq!(e.kind(), FailureKind::UnknownHypercall);
        let e = p
            .step(&Exit::Interrupted, Some(cpu(1.0)), &good)
            .unwrap_err();
        assert_eq!(e.kind(), FailureKind::Timeout);
        assert!(
            e.detail
                .starts_with("no progress for 1.0 s of vCPU CPU time (waiting for HC_RESULT)"),
            "{e:?}"
        );
    }

    #[test]
    fn logs_are_bounded_per_wait() {
        let mut p = Protocol::new(Waiting::Done, sites());
        let m = || mb_with(&[(abi::MB_LOG_LEN, 10)], b"0123456789abc");
        for _ in 0..MAX_LOGS_PER_COMMAND {
            assert_eq!(
                p.step(&bell(abi::HC_LOG), None, &m),
                Ok(Step::Log("0123456789".into()))
            );
        }
        let e = p.step(&bell(abi::HC_LOG), None, &m).unwrap_err();
        assert_eq!(e.rule, Rule::LogFlood, "{e:?}");
        assert!(e.detail.starts_with("log flood"), "{e:?}");
    }

    /// A well-formed hypercall from anywhere but a listed ring site (a
    /// routine's own store, the first half of a 16-byte store) is refused
    /// before its number is looked at; a hidden PC (protected VM) is not
    /// checked.
    #[test]
    fn a_doorbell_store_counts_only_from_a_ring_site() {
        let m = Mailbox::zeroed;
        for pc in [SITE - 1, SITE + 8, 0, u64::MAX] {
            let mut p = Protocol::new(Waiting::Ready, sites());
            let e = p.step(&bell_at(abi::HC_READY, pc), None, &m).unwrap_err();
            assert_eq!((e.rule, e.kind()), (Rule::RingSite, FailureKind::Protocol));
            assert!(e.detail.contains(&format!("{pc:#x}")), "{e:?}");
        }
        let mut p = Protocol::new(Waiting::Ready, sites());
        let other = bell_at(abi::HC_READY, 0xffff_8000_0000_2000);
        assert_eq!(p.step(&other, None, &m), Ok(Step::Ready));
        let hidden = Exit::Store {
            addr: abi::DOORBELL_GPA,
            len: 8,
            value: abi::HC_READY,
            pc: None,
        };
        let mut p = Protocol::new(Waiting::Ready, sites());
        assert_eq!(p.step(&hidden, None, &m), Ok(Step::Ready));
    }

    fn arb_exit() -> impl Strategy<Value = Exit> {
        let hc = prop_oneof![
            Just(abi::HC_READY),
            Just(abi::HC_RESULT),
            Just(abi::HC_LOG),
            Just(abi::HC_FAIL),
            Just(abi::HC_DONE),
            any::<u64>(),
        ];
        prop_oneof![
            (
                hc,
                prop_oneof![Just(8usize), 0usize..16],
                prop_oneof![Just(Some(SITE)), Just(None), any::<Option<u64>>()]
            )
                .prop_map(|(value, len, pc)| Exit::Store {
                    addr: abi::DOORBELL_GPA,
                    len,
                    value,
                    pc
                }),
            (any::<u64>(), 0usize..16, any::<u64>()).prop_map(|(addr, len, value)| Exit::Store {
                addr,
                len,
                value,
                pc: None
            }),
            any::<u64>().prop_map(|addr| Exit::Load { addr }),
            Just(Exit::Interrupted),
            Just(Exit::Shutdown),
            Just(Exit::InternalError),
            any::<u32>().prop_map(|kind| Exit::SystemEvent { kind }),
            ".{0,20}".prop_map(Exit::Other),
        ]
    }

    fn arb_waiting() -> impl Strategy<Value = Waiting> {
        prop_oneof![
            Just(Waiting::Ready),
            Just(Waiting::Done),
            (0u64..4).prop_map(|id| Waiting::Result { id }),
        ]
    }

    proptest! {
        /// Random exit sequences and mailbox contents: never a panic; every
        /// step is a step or a typed violation; a log is one clean line of
        /// bounded size; results are only handed back in order and monotonic.
        #[test]
        fn random_exits_end_in_a_step_or_a_typed_violation(
            waiting in arb_waiting(),
            exits in proptest::collection::vec((arb_exit(), any::<bool>()), 0..200),
            fields in proptest::collection::vec((0u64..(abi::PAGE_SIZE / 8), any::<u64>()), 0..16),
            log in proptest::collection::vec(any::<u8>(), 0..3000),
        ) {
            let mut m = Mailbox::zeroed();
            for (slot, v) in &fields {
                let o = (*slot * 8) as usize;
                m.0[o..o + 8].copy_from_slice(&v.to_le_bytes());
            }
            let n = log.len().min(abi::LOG_BUF_SIZE as usize);
            m.0[abi::MB_LOG_BUF as usize..abi::MB_LOG_BUF as usize + n].copy_from_slice(&log[..n]);
            let snap = || m.clone();
            let mut p = Protocol::new(waiting, sites());
            for (exit, fired) in &exits {
                let step = p.step(exit, fired.then(|| cpu(1.0)), &snap);
                if let (Ok(s), Exit::Store { pc: Some(pc), .. }) = (&step, exit)
                    && *s != Step::Continue
                {
                    prop_assert!(sites().contains(*pc), "{s:?} from {pc:#x}");
                }
                match step {
                    Ok(Step::Log(s)) => {
                        prop_assert!(!s.chars().any(char::is_control));
                        prop_assert!(s.len() <= 4 * 4 * abi::LOG_BUF_SIZE as usize);
                    }
                    Ok(Step::Result(t)) => {
                        prop_assert!(t.t0 <= t.t1);
                        let want = Waiting::Result { id: m.u64(abi::MB_RES_ID) };
                        prop_assert_eq!(waiting, want);
                        break;
                    }
                    Ok(Step::Ready) => { prop_assert_eq!(waiting, Waiting::Ready); break; }
                    Ok(Step::Done) => { prop_assert_eq!(waiting, Waiting::Done); break; }
                    Ok(Step::Fail) => break,
                    Ok(Step::Continue) => {}
                    Err(v) => {
                        prop_assert!(!v.detail.is_empty());
                        break;
                    }
                }
            }
        }
    }
}
