//! The sealed protocol (`abi::CMD_SEALED`): one command for a guest whose
//! RAM the host must not read while it lives (a pKVM protected VM: the
//! host's read of a page the guest owns is killed by SIGSEGV). The host
//! writes the command before the first entry; from then on it learns only
//! what exits carry: the doorbell's hypercall numbers, five values stored to
//! `abi::DOORBELL_VALUE` (T0, T1 and the breach words `MB_RES_BREACH`,
//! `_GOT`, `_WANT`, so the call contract is checked here too) and the PSCI
//! SYSTEM_OFF system event.
use super::{Exit, Given, Vcpu};
use crate::error::{Error, Result};
use crate::{Command, FailureKind};
use hypclear_abi as abi;
use std::time::Duration;

/// What a sealed command reports: the guest counter before its first call
/// and after its last, and the first call that broke the contract (its
/// calls after it did not run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Sealed {
    pub t0: u64,
    pub t1: u64,
    pub breach: Option<crate::Breach>,
}

impl Sealed {
    pub fn ticks(&self) -> u64 {
        self.t1.saturating_sub(self.t0)
    }
}

/// KVM_SYSTEM_EVENT_SHUTDOWN: PSCI SYSTEM_OFF (include/uapi/linux/kvm.h).
const SYSTEM_EVENT_SHUTDOWN: u32 = 1;

/// The values a sealed command stores before HC_RESULT: T0, T1, the
/// breach word, the value found, the value wanted.
const VALUES: usize = 5;

/// One exit's meaning for the sealed protocol.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SealedStep {
    Continue,
    /// HC_FAIL: the details are in the mailbox.
    Fail,
    Done(Sealed),
}

/// The sealed protocol's state: the command's call count (to bound the
/// breach's call index), the values so far and whether HC_RESULT came
/// (pure, so every exit order is testable).
#[derive(Debug)]
pub(crate) struct Track {
    count: u64,
    values: Vec<u64>,
    result: bool,
}

/// A breach of the sealed protocol: its failure kind and what happened
/// (a protected VM's registers are hidden, so no ring-site check and no
/// [`crate::Rule`] of the mailbox protocol applies).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Violation {
    kind: FailureKind,
    pub(crate) detail: String,
}

fn violation(kind: FailureKind, detail: impl Into<String>) -> Violation {
    Violation {
        kind,
        detail: detail.into(),
    }
}

impl Track {
    pub(crate) fn new(count: u64) -> Track {
        Track {
            count,
            values: Vec::with_capacity(VALUES),
            result: false,
        }
    }

    pub(crate) fn step(&mut self, exit: &Exit) -> std::result::Result<SealedStep, Violation> {
        use FailureKind::{Protocol, UnexpectedExit, UnknownHypercall};
        match exit {
            Exit::Interrupted => Ok(SealedStep::Continue),
            Exit::Store {
                addr, len, value, ..
            } if *len == 8 && *addr == abi::DOORBELL_VALUE => {
                if self.result || self.values.len() >= VALUES {
                    return Err(violation(
                        Protocol,
                        format!(
                            "value {} ({value:#x}) on the doorbell's value word, or one after \
                             HC_RESULT (a sealed command reports {VALUES})",
                            self.values.len() + 1
                        ),
                    ));
                }
                self.values.push(*value);
                Ok(SealedStep::Continue)
            }
            Exit::Store {
                addr, len, value, ..
            } if *len == 8 && *addr == abi::DOORBELL_GPA => self.hypercall(*value),
            Exit::SystemEvent { kind } if *kind == SYSTEM_EVENT_SHUTDOWN => self.powered_off(),
            Exit::SystemEvent { kind } => Err(violation(
                UnexpectedExit,
                format!(
                    "system event {kind} (PSCI) instead of SYSTEM_OFF (KVM_SYSTEM_EVENT_SHUTDOWN)"
                ),
            )),
            Exit::Store {
                addr, len, value, ..
            } => Err(violation(
                UnexpectedExit,
                format!("{len}-byte store of {value:#x} to unbacked guest address {addr:#x}"),
            )),
            Exit::Load { addr } => Err(violation(
                UnexpectedExit,
                format!("load from unbacked guest address {addr:#x}"),
            )),
            Exit::Shutdown => Err(violation(FailureKind::Shutdown, "shutdown (triple fault)")),
            Exit::InternalError => Err(violation(
                FailureKind::InternalError,
                "KVM internal error (e.g. an instruction KVM could not emulate)",
            )),
            Exit::Other(what) => Err(violation(
                UnknownHypercall,
                format!("exit the sealed protocol does not use: {what}"),
            )),
        }
    }

    /// PSCI SYSTEM_OFF: the end, if the result came and holds up.
    fn powered_off(&self) -> std::result::Result<SealedStep, Violation> {
        let &[t0, t1, word, got, want] = self.values.as_slice() else {
            return Err(violation(
                FailureKind::Protocol,
                "the guest powered off (PSCI SYSTEM_OFF) before reporting its result",
            ));
        };
        if !self.result {
            return Err(violation(
                FailureKind::Protocol,
                "the guest powered off (PSCI SYSTEM_OFF) before HC_RESULT",
            ));
        }
        if t0 > t1 {
            return Err(violation(
                FailureKind::Protocol,
                format!("result timestamps go backwards (T0 {t0:#x} > T1 {t1:#x})"),
            ));
        }
        let breach = crate::contract::decode(word, got, want, self.count)
            .map_err(|e| violation(FailureKind::Protocol, e.to_string()))?;
        Ok(SealedStep::Done(Sealed { t0, t1, breach }))
    }

    fn hypercall(&mut self, value: u64) -> std::result::Result<SealedStep, Violation> {
        match value {
            // HC_LOG's text is in the mailbox, which may not be read.
            abi::HC_READY | abi::HC_LOG if !self.result => Ok(SealedStep::Continue),
            abi::HC_FAIL => Ok(SealedStep::Fail),
            abi::HC_RESULT if !self.result && self.values.len() == VALUES => {
                self.result = true;
                Ok(SealedStep::Continue)
            }
            abi::HC_RESULT => Err(violation(
                FailureKind::Protocol,
                format!(
                    "HC_RESULT after {} values (the sealed command reports exactly T0, T1 and \
                     the three breach words first)",
                    self.values.len()
                ),
            )),
            abi::HC_DONE if self.result => Err(violation(
                FailureKind::Protocol,
                "PSCI SYSTEM_OFF returned to the guest (it rang HC_DONE after its result): \
                 KVM did not power it off",
            )),
            other => Err(violation(
                FailureKind::UnknownHypercall,
                format!("hypercall {other:#x} out of the sealed protocol"),
            )),
        }
    }
}

impl Vcpu {
    /// Run `cmd` as the vCPU's first and only command (`abi::CMD_SEALED`),
    /// touching no guest RAM once the guest runs; ends when the guest
    /// powers off. A VM runs at most one: after SYSTEM_OFF the vCPU needs a
    /// fresh KVM_ARM_VCPU_INIT, so make a new VM for the next.
    pub fn sealed_call(&mut self, cmd: &Command, timeout: Duration) -> Result<Sealed> {
        if self.started {
            return Err(Error::Internal(
                "a sealed command must be a vCPU's first run: create a new VM for it".into(),
            ));
        }
        self.started = true;
        let id = self.next_id;
        self.next_id += 1;
        self.given = Given::Call { id, cmd: *cmd };
        // Before the first entry the pages are still the host's.
        self.write_command(abi::CMD_SEALED, cmd, id)?;
        self.watched(timeout, |v| v.sealed_loop(cmd.args.count))
    }

    fn sealed_loop(&mut self, count: u64) -> Result<Sealed> {
        let mut track = Track::new(count);
        loop {
            crate::interrupt::check()?;
            let exit = match self.next_exit() {
                Err(Error::Kvm { source, .. })
                    if source.errno() == libc::EFAULT
                        && self.vm_type == crate::VmType::Protected =>
                {
                    return Err(self.failure(
                        FailureKind::InternalError,
                        format!(
                            "KVM_RUN failed: {source}: the hypervisor took the protected guest's \
                             pages back while it ran (a fork copies them: hypclear marks guest \
                             RAM MADV_DONTFORK, so look for another process sharing or pinning \
                             this memory)"
                        ),
                    ));
                }
                other => other?,
            };
            if let Some(e) = self.watchdog.as_mut().and_then(|(_, w)| w.expired()) {
                return Err(self.failure(
                    FailureKind::Timeout,
                    format!(
                        "the sealed command did not power off within {e} (raise --timeout if \
                         the work is just slow)"
                    ),
                ));
            }
            match track.step(&exit) {
                Ok(SealedStep::Continue) => {}
                Ok(SealedStep::Done(s)) => return Ok(s),
                Ok(SealedStep::Fail) if self.vm_type == crate::VmType::Normal => {
                    return Err(self.fail_report()?);
                }
                Ok(SealedStep::Fail) => {
                    return Err(self.failure(
                        FailureKind::Exception,
                        "the protected guest rang HC_FAIL (an exception or a rejected command); \
                         its details are in its mailbox, which the host may not read: rerun \
                         as an ordinary VM for them"
                            .into(),
                    ));
                }
                Err(v) => return Err(self.failure(v.kind, v.detail)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(addr: u64, value: u64) -> Exit {
        Exit::Store {
            addr,
            len: 8,
            value,
            pc: None,
        }
    }

    fn run(exits: &[Exit]) -> std::result::Result<SealedStep, Violation> {
        let mut t = Track::new(4);
        let mut last = Ok(SealedStep::Continue);
        for e in exits {
            last = t.step(e);
            if !matches!(last, Ok(SealedStep::Continue)) {
                break;
            }
        }
        last
    }

    /// The five value stores of a result: T0, T1 and the breach words.
    fn values(v: [u64; 5]) -> Vec<Exit> {
        v.iter().map(|&x| store(abi::DOORBELL_VALUE, x)).collect()
    }

    fn result(v: [u64; 5]) -> Vec<Exit> {
        let mut e = vec![store(abi::DOORBELL_GPA, abi::HC_READY)];
        e.extend(values(v));
        e.extend([
            store(abi::DOORBELL_GPA, abi::HC_RESULT),
            Exit::Interrupted,
            Exit::SystemEvent { kind: 1 },
        ]);
        e
    }

    #[test]
    fn ready_values_result_and_power_off_complete_it() {
        let off = Exit::SystemEvent { kind: 1 };
        let done = |t0, t1| {
            Ok(SealedStep::Done(Sealed {
                t0,
                t1,
                breach: None,
            }))
        };
        assert_eq!(run(&result([10, 25, 0, 0, 0])), done(10, 25));
        // Power-off before the result, a missing value, a sixth value,
        // backwards time, another event, SYSTEM_OFF returning.
        let early = [store(abi::DOORBELL_GPA, abi::HC_READY), off.clone()];
        assert_eq!(run(&early).unwrap_err().kind, FailureKind::Protocol);
        let mut two = values([1, 2, 0, 0, 0]);
        two.truncate(2);
        two.push(store(abi::DOORBELL_GPA, abi::HC_RESULT));
        assert_eq!(run(&two).unwrap_err().kind, FailureKind::Protocol);
        let mut six = values([1, 2, 0, 0, 0]);
        six.push(store(abi::DOORBELL_VALUE, 3));
        assert_eq!(run(&six).unwrap_err().kind, FailureKind::Protocol);
        assert!(
            run(&result([9, 3, 0, 0, 0]))
                .unwrap_err()
                .detail
                .contains("backwards")
        );
        let reset = [Exit::SystemEvent { kind: 2 }];
        assert_eq!(run(&reset).unwrap_err().kind, FailureKind::UnexpectedExit);
        let mut returned = values([1, 2, 0, 0, 0]);
        returned.push(store(abi::DOORBELL_GPA, abi::HC_RESULT));
        returned.push(store(abi::DOORBELL_GPA, abi::HC_DONE));
        assert!(
            run(&returned)
                .unwrap_err()
                .detail
                .contains("SYSTEM_OFF returned")
        );
        assert_eq!(
            run(&[store(abi::DOORBELL_GPA, abi::HC_FAIL)]),
            Ok(SealedStep::Fail)
        );
        let narrow = [Exit::Store {
            addr: abi::DOORBELL_VALUE,
            len: 4,
            value: 1,
            pc: None,
        }];
        assert_eq!(run(&narrow).unwrap_err().kind, FailureKind::UnexpectedExit);
    }

    #[test]
    fn a_sealed_breach_is_decoded_and_a_hostile_one_refused() {
        // x18 (index 0) changed in call 2 of 4.
        let word = abi::BREACH_CALLEE_SAVED | 2 << 32;
        let Ok(SealedStep::Done(s)) = run(&result([1, 2, word, 7, 9])) else {
            panic!("no result");
        };
        let b = s.breach.expect("a breach");
        assert_eq!((b.call, b.got, b.want), (2, 7, 9));
        assert!(matches!(b.kind, crate::BreachKind::CalleeSaved { .. }));
        // A call index past the count (4) is the guest's lie.
        let past = abi::BREACH_RETURN | 4 << 32;
        assert_eq!(
            run(&result([1, 2, past, 7, 9])).unwrap_err().kind,
            FailureKind::Protocol
        );
    }
}
