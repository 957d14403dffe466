//! The fuzz harness of the guest protocol (`fuzz/`'s `protocol` target;
//! the replay test below runs its corpus without AFL). Bytes become what a
//! guest can do: exits (doorbell stores of any width, value and PC, other
//! stores, loads, system events) and writes to its own mailbox, fed to
//! [`Protocol::step`] wait by wait as `vcpu.rs` feeds it (boot, commands,
//! exit), or to the sealed protocol's tracker. Each step is checked against
//! a model of the rules, so a wrong acceptance fails, not only a panic.
use crate::contract::{self, BreachKind};
use crate::protocol::{
    MAX_LOG_BYTES_PER_COMMAND, MAX_LOGS_PER_COMMAND, Mailbox, Protocol, RingSites, Step, Violation,
    Waiting,
};
use crate::vcpu::sealed::{SealedStep, Track};
use crate::{Exit, FailureKind};
use hypclear_abi as abi;
use std::borrow::Cow;

/// Where the test blob is loaded and its ring sites (offsets).
const VA: u64 = 0xffff_8000_0000_0000;
const RINGS: [u64; 2] = [0x1040, 0x2000];
/// Exits per input at most (a session longer than this adds nothing).
const MAX_EXITS: usize = 4096;

/// One input: the first byte picks the mailbox protocol (even) or the
/// sealed one (odd). Panics when a step breaks an invariant.
pub fn protocol_session(data: &[u8]) {
    let mut b = Bytes(data);
    if b.byte() & 1 == 0 {
        Session::new(b).run();
    } else {
        sealed(b);
    }
}

/// Bytes read front to back; zeros once they run out.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn done(&self) -> bool {
        self.0.is_empty()
    }

    fn byte(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }

    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(std::array::from_fn(|_| self.byte()))
    }

    fn take(&mut self, n: usize) -> Vec<u8> {
        let (a, rest) = self.0.split_at(n.min(self.0.len()));
        self.0 = rest;
        a.to_vec()
    }

    /// A hypercall number: mostly a valid one, sometimes any word.
    fn hypercall(&mut self) -> u64 {
        match self.byte() % 8 {
            k @ 0..=4 => abi::HC_READY + u64::from(k),
            5 => abi::HC_READY.wrapping_sub(1),
            _ => self.u64(),
        }
    }

    /// The PC of a doorbell store: a ring site, hidden, or anywhere.
    fn pc(&mut self) -> Option<u64> {
        match self.byte() % 4 {
            k @ 0..=1 => Some(VA + RINGS[k as usize]),
            2 => None,
            _ => Some(self.u64()),
        }
    }

    /// The next exit, or `None` after a write to the mailbox.
    fn exit(&mut self, mb: &mut Mailbox, id: u64) -> Option<Exit> {
        let op = self.byte();
        let store = |addr, len, value, pc| Exit::Store {
            addr,
            len,
            value,
            pc,
        };
        let len = if op & 0x10 != 0 { self.byte() % 17 } else { 8 };
        Some(match op % 16 {
            0..=5 => store(abi::DOORBELL_GPA, len.into(), self.hypercall(), self.pc()),
            6 => store(abi::DOORBELL_VALUE, len.into(), self.u64(), None),
            7 => store(self.u64(), len.into(), self.u64(), None),
            8 => Exit::Load { addr: self.u64() },
            9 => Exit::Interrupted,
            10 => Exit::Shutdown,
            11 => Exit::InternalError,
            12 => Exit::SystemEvent {
                kind: u32::from(self.byte() % 4),
            },
            13 => Exit::Other("IoIn(0x3f8)".into()),
            14 => return self.write_log(mb),
            _ => return self.write_fields(mb, id),
        })
    }

    /// The guest writes a log line (its length word may lie).
    fn write_log(&mut self, mb: &mut Mailbox) -> Option<Exit> {
        let n = usize::from(self.byte()) * 9;
        let text = self.take(n.min(abi::LOG_BUF_SIZE as usize));
        let at = abi::MB_LOG_BUF as usize;
        mb.0[at..at + text.len()].copy_from_slice(&text);
        let len = match self.byte() {
            0xff => self.u64(),
            _ => text.len() as u64,
        };
        put(mb, abi::MB_LOG_LEN, len);
        None
    }

    /// The guest writes result or fail fields (mostly for command `id`),
    /// or any word of its mailbox.
    fn write_fields(&mut self, mb: &mut Mailbox, id: u64) -> Option<Exit> {
        match self.byte() % 4 {
            0 => {
                let t0 = self.u64() >> 8;
                put(mb, abi::MB_RES_ID, id);
                put(mb, abi::MB_RES_T0, t0);
                put(
                    mb,
                    abi::MB_RES_T1,
                    t0.saturating_add(u64::from(self.byte())),
                );
            }
            1 => {
                let call = u64::from(self.byte() % 8) << 32;
                let word = call | u64::from(self.byte() % 7) | u64::from(self.byte() % 16) << 8;
                put(mb, abi::MB_RES_BREACH, word);
                put(mb, abi::MB_RES_BREACH_GOT, self.u64());
                put(mb, abi::MB_RES_BREACH_WANT, self.u64());
            }
            2 => {
                put(mb, abi::MB_FAIL_CODE, u64::from(self.byte() % 4));
                for i in 0..6 {
                    put(mb, abi::MB_FAIL_D0 + 8 * i, self.u64());
                }
            }
            _ => {
                let off = u64::from(self.byte()) * 8;
                put(mb, off, self.u64());
            }
        }
        None
    }
}

fn put(mb: &mut Mailbox, off: u64, v: u64) {
    let o = off as usize;
    if let Some(w) = mb.0.get_mut(o..o + 8) {
        w.copy_from_slice(&v.to_le_bytes());
    }
}

/// Text that reaches a terminal or a log: nothing the sanitizer would
/// escape (no control character, no bidi override).
fn assert_clean(what: &str, s: &str) {
    assert!(
        matches!(crate::text::sanitize_str(s), Cow::Borrowed(_)),
        "{what} holds raw control or bidi characters: {s:?}"
    );
}

/// A mailbox-protocol session: the waits of one vCPU, in order.
struct Session<'a> {
    b: Bytes<'a>,
    mb: Mailbox,
    sites: RingSites,
    exits: usize,
}

/// How a wait ended.
enum End {
    /// The awaited hypercall came: the next wait follows.
    Next,
    /// HC_FAIL or a violation: the vCPU is done.
    Stop,
}

impl<'a> Session<'a> {
    fn new(b: Bytes<'a>) -> Session<'a> {
        Session {
            b,
            mb: Mailbox::zeroed(),
            sites: RingSites::new(VA, &RINGS),
            exits: 0,
        }
    }

    /// Boot, then commands (ids 1, 2, ...) or the exit, as the input says.
    fn run(mut self) {
        let mut waiting = Waiting::Ready;
        let mut next_id = 1;
        while !self.b.done() && self.exits < MAX_EXITS {
            if let End::Stop = self.wait(waiting) {
                return;
            }
            waiting = match (waiting, self.b.byte() % 4) {
                (Waiting::Done, _) => return,
                (_, 0) => Waiting::Done,
                _ => {
                    next_id += 1;
                    Waiting::Result { id: next_id - 1 }
                }
            };
        }
    }

    /// One wait: exits until the awaited step, HC_FAIL or a violation.
    fn wait(&mut self, waiting: Waiting) -> End {
        let mut p = Protocol::new(waiting, self.sites.clone());
        let id = match waiting {
            Waiting::Result { id } => id,
            _ => 0,
        };
        let mut logs = (0u32, 0u64);
        while !self.b.done() && self.exits < MAX_EXITS {
            let Some(exit) = self.b.exit(&mut self.mb, id) else {
                continue;
            };
            self.exits += 1;
            let expired = (self.b.byte() == 0xff).then_some(crate::watchdog::Expired::Cpu {
                timeout: std::time::Duration::from_millis(1500),
            });
            let snap = self.mb.clone();
            let mut twin = p.clone();
            let step = p.step(&exit, expired, &|| snap.clone());
            assert_eq!(step, twin.step(&exit, expired, &|| snap.clone()));
            if expired.is_some() {
                assert!(
                    step.as_ref()
                        .is_err_and(|v| v.kind() == FailureKind::Timeout)
                );
                return End::Stop;
            }
            self.check(waiting, &exit, &step, &mut logs);
            match step {
                Ok(Step::Continue | Step::Log(_)) => {}
                Ok(Step::Ready | Step::Done) => return End::Next,
                Ok(Step::Result(_)) => return self.result(),
                Ok(Step::Fail) => return self.fail(),
                Err(_) => return End::Stop,
            }
        }
        End::Stop
    }

    /// The step against the rules: what the exit was, what the host waits
    /// for, what the mailbox holds.
    fn check(
        &self,
        waiting: Waiting,
        exit: &Exit,
        step: &Result<Step, Violation>,
        logs: &mut (u32, u64),
    ) {
        let bell = match exit {
            Exit::Store {
                addr,
                len,
                value,
                pc,
            } if *addr == abi::DOORBELL_GPA => Some((*len, *value, *pc)),
            _ => None,
        };
        let from_site = |pc: Option<u64>| pc.is_none_or(|pc| RINGS.iter().any(|r| VA + r == pc));
        let hypercall = bell.filter(|(len, _, pc)| *len == 8 && from_site(*pc));
        let value = hypercall.map(|(_, v, _)| v);
        match step {
            Ok(Step::Continue) => assert!(matches!(exit, Exit::Interrupted), "{exit:?}"),
            Ok(Step::Log(s)) => {
                assert_eq!(value, Some(abi::HC_LOG));
                assert_clean("a guest log line", s);
                *logs = (logs.0 + 1, logs.1 + self.mb.log_bytes().len() as u64);
                assert!(logs.0 <= MAX_LOGS_PER_COMMAND && logs.1 <= MAX_LOG_BYTES_PER_COMMAND);
                assert!(self.mb.log_bytes().len() <= abi::LOG_BUF_SIZE as usize);
            }
            Ok(Step::Ready) => assert!(waiting == Waiting::Ready && value == Some(abi::HC_READY)),
            Ok(Step::Done) => assert!(waiting == Waiting::Done && value == Some(abi::HC_DONE)),
            Ok(Step::Fail) => assert_eq!(value, Some(abi::HC_FAIL)),
            Ok(Step::Result(t)) => {
                let m = |off| self.mb.u64(off);
                assert_eq!(value, Some(abi::HC_RESULT));
                assert_eq!(
                    waiting,
                    Waiting::Result {
                        id: m(abi::MB_RES_ID)
                    }
                );
                assert!(
                    t.t0 <= t.t1
                        && (t.t0, t.t1, t.ret)
                            == (m(abi::MB_RES_T0), m(abi::MB_RES_T1), m(abi::MB_RES_RET))
                );
            }
            Err(v) => {
                assert!(!v.detail.is_empty());
                assert_clean("a violation", &v.detail);
                if bell.is_some_and(|(len, _, pc)| len != 8 || !from_site(pc)) {
                    assert_eq!(v.kind(), FailureKind::Protocol, "{v:?}");
                }
            }
        }
    }

    /// A result: its breach words decoded for a command of the input's
    /// call count, as `Vcpu::breach` does.
    fn result(&mut self) -> End {
        let count = u64::from(self.b.byte() % 9);
        let m = |off| self.mb.u64(off);
        let words = [
            m(abi::MB_RES_BREACH),
            m(abi::MB_RES_BREACH_GOT),
            m(abi::MB_RES_BREACH_WANT),
        ];
        check_breach(words, count);
        End::Next
    }

    /// HC_FAIL: the exception report decoded as `Vcpu::fail_report` does.
    fn fail(&self) -> End {
        let d: [u64; 6] = std::array::from_fn(|i| self.mb.u64(abi::MB_FAIL_D0 + 8 * i as u64));
        let (_, _, text) = crate::arch::describe_exception(d, &|a| format!("blob+{a:#x}"));
        assert!(!text.is_empty());
        assert_clean("an exception report", &text);
        let _ = crate::arch::fault_address(d);
        End::Stop
    }
}

/// Breach words decode to a breach of a call the command made, which
/// encodes back to the same word and reads cleanly; or to a typed error.
fn check_breach([word, got, want]: [u64; 3], count: u64) {
    match contract::decode(word, got, want, count) {
        Ok(None) => assert_eq!(word, 0),
        Ok(Some(b)) => {
            assert!(b.call < count && b.got != b.want && (b.got, b.want) == (got, want));
            let (kind, reg) = match b.kind {
                BreachKind::CalleeSaved { register } => (
                    abi::BREACH_CALLEE_SAVED,
                    crate::arch::CALLEE_SAVED
                        .iter()
                        .position(|r| *r == register)
                        .map_or(u64::MAX, |i| i as u64),
                ),
                BreachKind::Stack => (abi::BREACH_STACK, 0),
                BreachKind::Flags { .. } => (abi::BREACH_FLAGS, 0),
                BreachKind::Return => (abi::BREACH_RETURN, 0),
                BreachKind::Fault => (abi::BREACH_FAULT, 0),
            };
            assert_eq!(kind | reg << 8 | b.call << 32, word, "{b:?}");
            assert_clean("a breach", &b.to_string());
        }
        Err(e) => {
            assert_ne!(word, 0);
            assert_clean("a breach error", &e.to_string());
        }
    }
}

/// A sealed command (a protected VM's): exits only, no mailbox. The model:
/// exactly five value stores, then HC_RESULT, then SYSTEM_OFF.
fn sealed(mut b: Bytes) {
    let count = u64::from(b.byte() % 9);
    let mut track = Track::new(count);
    let (mut values, mut result) = (0usize, false);
    let mut scratch = Mailbox::zeroed();
    for _ in 0..MAX_EXITS {
        if b.done() {
            return;
        }
        let Some(exit) = b.exit(&mut scratch, 0) else {
            continue;
        };
        let step = track.step(&exit);
        let value_store = matches!(
            exit,
            Exit::Store {
                addr: abi::DOORBELL_VALUE,
                len: 8,
                ..
            }
        );
        let bell = match exit {
            Exit::Store {
                addr: abi::DOORBELL_GPA,
                len: 8,
                value,
                ..
            } => Some(value),
            _ => None,
        };
        if value_store {
            assert_eq!(step.is_ok(), !result && values < 5, "{step:?}");
            values += 1;
        }
        if bell == Some(abi::HC_RESULT) {
            assert_eq!(step.is_ok(), !result && values == 5, "{step:?}");
            result = true;
        }
        match step {
            Ok(SealedStep::Continue) => {}
            Ok(SealedStep::Done(s)) => {
                assert!(result && values == 5 && s.t0 <= s.t1);
                assert!(matches!(exit, Exit::SystemEvent { kind: 1 }), "{exit:?}");
                return;
            }
            Ok(SealedStep::Fail) => return assert_eq!(bell, Some(abi::HC_FAIL)),
            Err(v) => return assert_clean("a sealed violation", &v.detail),
        }
    }
}

#[cfg(test)]
#[path = "../../../fuzz/inputs.rs"]
mod replay_inputs;

#[cfg(test)]
mod tests {
    use super::*;

    use super::replay_inputs::inputs;

    /// Every corpus and regression input of the `protocol` target holds
    /// its invariants (what AFL's runs found is kept here).
    #[test]
    fn protocol_fuzz_inputs_replay() {
        let files = inputs("protocol");
        assert!(files.len() >= 3, "fuzz/corpus/protocol is missing");
        for f in &files {
            let data = std::fs::read(f).unwrap();
            let r = std::panic::catch_unwind(|| protocol_session(&data));
            assert!(r.is_ok(), "{} breaks an invariant", f.display());
        }
    }
}
