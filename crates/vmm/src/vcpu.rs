//! One vCPU: its mailbox, the hypercall loop over KVM_RUN exits
//! ([`Exit`]), and the command protocol (start, call, exit).
use super::kvmstats::{self, KvmStats};
use super::memory::GuestRam;
use super::protocol::{Mailbox, Protocol, RingSites, Step, Violation, Waiting};
use super::{CallResult, Command, FailureKind, GuestFailure, Rule, Symbolizer};
use crate::arch;
use crate::error::{Error, Result};
use crate::watchdog::Watchdog;
use hypclear_abi as abi;
use kvm_ioctls::{VcpuExit, VcpuFd};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::Duration;

pub(crate) mod sealed;
pub use sealed::Sealed;

/// One KVM_RUN exit as the hypercall loop sees it.
#[derive(Debug, Clone)]
pub enum Exit {
    /// A store to a guest-physical address with no memslot (the doorbell
    /// when `addr` is `abi::DOORBELL_GPA`).
    /// `len` is the store width in bytes (a hypercall is exactly 8); `pc`
    /// the guest's PC at a doorbell exit (`arch::pc`; none where KVM hides
    /// the registers, a protected VM's, and for other addresses).
    Store {
        addr: u64,
        len: usize,
        value: u64,
        pc: Option<u64>,
    },
    /// A load from a guest-physical address with no memslot.
    Load { addr: u64 },
    /// KVM_RUN returned for a signal (the watchdog, or EINTR/EAGAIN).
    Interrupted,
    /// Triple fault / shutdown.
    Shutdown,
    /// KVM could not handle an exit.
    InternalError,
    /// The guest asked for a system event (PSCI SYSTEM_OFF: `kind` is
    /// KVM_SYSTEM_EVENT_SHUTDOWN).
    SystemEvent { kind: u32 },
    /// Any other exit, described.
    Other(String),
}

/// One vCPU and its mailbox.
pub struct Vcpu {
    pub fd: VcpuFd,
    pub id: u64,
    pub mailbox: u64,
    next_id: u64,
    ram: Arc<GuestRam>,
    sym: Arc<Symbolizer>,
    /// Where the harness rings the doorbell (see `protocol::RingSites`).
    rings: RingSites,
    watchdog: Option<(ThreadId, Watchdog)>,
    /// Opened on first use (three syscalls and a parse that the commands
    /// without stats, and the first hypercall, need not wait for).
    stats: std::sync::OnceLock<Option<KvmStats>>,
    started: bool,
    /// The last hypercall and what the host had asked for: all a report
    /// can name when KVM has reset the registers (see `failure`).
    last_hypercall: Option<Step>,
    given: Given,
    /// A protected VM's vCPU: its mailbox must not be read (HC_FAIL comes
    /// without details).
    pub(crate) vm_type: crate::VmType,
}

/// What the host last asked this vCPU to do.
#[derive(Debug, Clone, Copy)]
enum Given {
    /// Run from reset to HC_READY.
    Start,
    Call {
        id: u64,
        cmd: Command,
    },
    Batch {
        id: u64,
        n: u64,
    },
    Exit,
}

impl std::fmt::Display for Given {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Given::Start => write!(f, "the boot (waiting for HC_READY)"),
            Given::Call { id, cmd } => write!(
                f,
                "command {id} (table {}, index {}, a0 {:#x}, a1 {:#x}, a2 {:#x}, count {})",
                cmd.table, cmd.index, cmd.args.a0, cmd.args.a1, cmd.args.a2, cmd.args.count
            ),
            Given::Batch { id, n } => write!(f, "batch {id} of {n} commands"),
            Given::Exit => write!(f, "CMD_EXIT (waiting for HC_DONE)"),
        }
    }
}

/// The report of a shutdown whose registers KVM has reset: no location
/// (the power-on state is not the guest's), the last hypercall and the
/// command (`routine`: its table row's name, when the blob has one) instead.
fn lost_registers(
    detail: &str,
    last: Option<&Step>,
    given: &Given,
    routine: Option<String>,
) -> String {
    let last = match last {
        None => "none".to_string(),
        Some(Step::Log(text)) => format!("HC_LOG \"{text}\""),
        Some(Step::Ready) => "HC_READY".into(),
        Some(Step::Result(_)) => "HC_RESULT".into(),
        Some(Step::Done) => "HC_DONE".into(),
        Some(Step::Fail) => "HC_FAIL".into(),
        Some(Step::Continue) => "none".into(),
    };
    format!(
        "{detail}; registers lost: the vCPU was re-initialised by KVM on shutdown \
         (KVM {}); last hypercall {last}; during {given}{}",
        arch::kvm_flavour(),
        routine.map_or(String::new(), |r| format!(", routine {r}"))
    )
}

impl Vcpu {
    pub(super) fn new(
        fd: VcpuFd,
        id: u64,
        mailbox: u64,
        ram: Arc<GuestRam>,
        sym: Arc<Symbolizer>,
        rings: RingSites,
    ) -> Vcpu {
        Vcpu {
            fd,
            id,
            mailbox,
            next_id: 1,
            ram,
            sym,
            rings,
            watchdog: None,
            stats: std::sync::OnceLock::new(),
            started: false,
            last_hypercall: None,
            given: Given::Start,
            vm_type: crate::VmType::Normal,
        }
    }

    fn set_mb(&self, off: u64, v: u64) -> Result<()> {
        self.ram.write_u64(self.mailbox + off, v)
    }

    fn failure(&self, kind: FailureKind, detail: String) -> Error {
        self.failed(kind, None, detail)
    }

    /// A broken protocol rule, reported with the vCPU's registers.
    fn violated(&self, v: Violation) -> Error {
        self.failed(v.kind(), Some(v.rule), v.detail)
    }

    fn failed(&self, kind: FailureKind, rule: Option<Rule>, detail: String) -> Error {
        if kind == FailureKind::Shutdown && arch::reinitialised(&self.fd) {
            return Error::Guest(Box::new(GuestFailure {
                kind,
                rule,
                vcpu: self.id,
                detail: lost_registers(
                    &detail,
                    self.last_hypercall.as_ref(),
                    &self.given,
                    match self.given {
                        Given::Call { cmd, .. } => self.sym.row_name(cmd.table, cmd.index),
                        _ => None,
                    },
                ),
                pc: None,
                pc_symbol: None,
                registers: None,
                vector: None,
                fault_address: None,
            }));
        }
        let regs = arch::registers(&self.fd);
        Error::Guest(Box::new(GuestFailure {
            kind,
            rule,
            vcpu: self.id,
            detail,
            pc: regs.as_ref().map(|r| r.0),
            pc_symbol: regs.as_ref().map(|r| self.sym.name(r.0)),
            registers: regs.map(|r| r.1),
            vector: None,
            fault_address: None,
        }))
    }

    /// Write command `cmd` with opcode `op` and sequence number `id` into
    /// the mailbox (the id last: it marks the command complete).
    fn write_command(&self, op: u64, cmd: &Command, id: u64) -> Result<()> {
        self.set_mb(abi::MB_CMD_OP, op)?;
        self.set_mb(abi::MB_CMD_TABLE, cmd.table)?;
        self.set_mb(abi::MB_CMD_INDEX, cmd.index)?;
        self.set_mb(abi::MB_CMD_A0, cmd.args.a0)?;
        self.set_mb(abi::MB_CMD_A0_STEP, cmd.args.a0_step)?;
        self.set_mb(abi::MB_CMD_A1, cmd.args.a1)?;
        self.set_mb(abi::MB_CMD_A1_STEP, cmd.args.a1_step)?;
        self.set_mb(abi::MB_CMD_A2, cmd.args.a2)?;
        self.set_mb(abi::MB_CMD_COUNT, cmd.args.count)?;
        self.set_mb(abi::MB_CMD_FLAGS, cmd.returns.flags())?;
        self.set_mb(abi::MB_CMD_ID, id)
    }

    /// Current KVM stats of this vCPU (empty where unsupported).
    pub fn stats(&self) -> BTreeMap<String, u64> {
        self.stats
            .get_or_init(|| KvmStats::open(&self.fd))
            .as_ref()
            .map(KvmStats::read)
            .unwrap_or_default()
    }

    /// One KVM_RUN (the watchdog is armed by the caller, per wait).
    fn next_exit(&mut self) -> Result<Exit> {
        let exit = match self.fd.run() {
            Ok(VcpuExit::MmioWrite(addr, data)) => {
                let mut v = [0u8; 8];
                let n = data.len().min(8);
                v[..n].copy_from_slice(&data[..n]);
                let (addr, len, value) = (addr, data.len(), u64::from_le_bytes(v));
                let pc = if addr == abi::DOORBELL_GPA && self.vm_type != crate::VmType::Protected {
                    Some(arch::pc(&self.fd)?)
                } else {
                    None
                };
                return Ok(Exit::Store {
                    addr,
                    len,
                    value,
                    pc,
                });
            }
            Ok(VcpuExit::MmioRead(addr, data)) => {
                data.fill(0);
                Ok(Exit::Load { addr })
            }
            Ok(VcpuExit::Intr) => Ok(Exit::Interrupted),
            Ok(VcpuExit::Shutdown) => Ok(Exit::Shutdown),
            Ok(VcpuExit::InternalError) => Ok(Exit::InternalError),
            Ok(VcpuExit::SystemEvent(kind, _)) => Ok(Exit::SystemEvent { kind }),
            Ok(VcpuExit::FailEntry(reason, cpu)) => Ok(Exit::Other(format!(
                "FAILENTRY: hardware entry failure reason {reason:#x} on CPU {cpu}"
            ))),
            Ok(other) => Ok(Exit::Other(format!("{other:?}"))),
            Err(e) if e.errno() == libc::EINTR || e.errno() == libc::EAGAIN => {
                Ok(Exit::Interrupted)
            }
            Err(e) => Err(e),
        };
        exit.map_err(Error::kvm("KVM_RUN"))
    }

    /// A host copy of the mailbox page (the guest may be writing it).
    fn snapshot(&self) -> Result<Mailbox> {
        let mut m = Mailbox::zeroed();
        self.ram.read_into(self.mailbox, &mut m.0[..])?;
        Ok(m)
    }

    /// Run until the guest rings the hypercall `waiting` names (or
    /// HC_FAIL). The watchdog measures progress: it is armed once for the
    /// whole wait, so logs or spurious exits do not extend it, and logs are
    /// bounded per wait (see `protocol`).
    fn run(&mut self, waiting: Waiting, timeout: Duration) -> Result<Step> {
        self.watched(timeout, |v| v.run_armed(waiting))
    }

    /// Run `f` with this thread's watchdog armed for `timeout`.
    fn watched<T>(
        &mut self,
        timeout: Duration,
        f: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<T> {
        let me = std::thread::current().id();
        if self.watchdog.as_ref().is_none_or(|(t, _)| *t != me) {
            // Delete the old thread's timer before making this thread's.
            self.watchdog = None;
            self.watchdog = Some((me, Watchdog::for_current_thread()));
        }
        if let Some((_, w)) = &mut self.watchdog {
            w.arm(timeout);
        }
        let r = f(self);
        if let Some((_, w)) = &mut self.watchdog {
            w.disarm();
        }
        r
    }

    fn run_armed(&mut self, waiting: Waiting) -> Result<Step> {
        let mut proto = Protocol::new(waiting, self.rings.clone());
        loop {
            super::interrupt::check()?;
            let exit = self.next_exit()?;
            let expired = self.watchdog.as_mut().and_then(|(_, w)| w.expired());
            let step = proto.step(&exit, expired, &|| {
                self.snapshot().unwrap_or_else(|_| Mailbox::zeroed())
            });
            match step {
                Ok(Step::Continue) => continue,
                Ok(Step::Log(text)) => {
                    self.last_hypercall = Some(Step::Log(text.clone()));
                    // A closed or full stderr must not stop (or kill) the
                    // run: the failure is kept for the exit status.
                    crate::errln!("guest vCPU {} log: {text}", self.id);
                    continue;
                }
                Ok(step) => {
                    self.last_hypercall = Some(step.clone());
                    return Ok(step);
                }
                Err(v) => return Err(self.violated(v)),
            }
        }
    }

    /// Turn a HC_FAIL into an error (from a host copy of the mailbox).
    fn fail_report(&self) -> Result<Error> {
        let m = self.snapshot()?;
        let code = m.u64(abi::MB_FAIL_CODE);
        let mut d = [0u64; 6];
        for (i, x) in d.iter_mut().enumerate() {
            *x = m.u64(abi::MB_FAIL_D0 + 8 * i as u64);
        }
        Ok(match code {
            abi::FAIL_EXCEPTION => {
                let sym = self.sym.clone();
                let (pc, class, detail) = arch::describe_exception(d, &|a| sym.name(a));
                let regs = arch::registers(&self.fd).map(|r| r.1);
                Error::Guest(Box::new(GuestFailure {
                    kind: FailureKind::Exception,
                    rule: None,
                    vcpu: self.id,
                    detail,
                    pc: Some(pc),
                    pc_symbol: Some(self.sym.name(pc)),
                    registers: regs,
                    vector: Some(class),
                    fault_address: arch::fault_address(d),
                }))
            }
            abi::FAIL_BAD_COMMAND => self.failure(
                FailureKind::BadCommand,
                format!(
                    "the guest rejected the command (table {}, index {})",
                    d[0], d[1]
                ),
            ),
            other => self.violated(Violation {
                rule: Rule::UnknownFailCode,
                detail: format!("HC_FAIL with unknown code {other:#x}"),
            }),
        })
    }

    /// The step a wait ended with; HC_FAIL becomes its error.
    fn expect(&self, step: Step) -> Result<Step> {
        match step {
            Step::Fail => Err(self.fail_report()?),
            other => Ok(other),
        }
    }

    /// Run from reset to the guest's HC_READY.
    pub fn start(&mut self, timeout: Duration) -> Result<()> {
        self.given = Given::Start;
        let step = self.run(Waiting::Ready, timeout)?;
        self.expect(step)?;
        self.started = true;
        Ok(())
    }

    /// Run one command and return its timestamps (no KVM stats: reading
    /// them costs two syscalls and a map per command; see
    /// [`Vcpu::call_with_stats`]).
    pub fn call(&mut self, cmd: &Command, timeout: Duration) -> Result<CallResult> {
        self.call_inner(cmd, timeout, false)
    }

    /// Run one command and return its timestamps with the vCPU's KVM stats
    /// deltas across it (what bench and the CPL probe judge runs by).
    pub fn call_with_stats(&mut self, cmd: &Command, timeout: Duration) -> Result<CallResult> {
        self.call_inner(cmd, timeout, true)
    }

    fn call_inner(&mut self, cmd: &Command, timeout: Duration, stats: bool) -> Result<CallResult> {
        if !self.started {
            self.start(timeout)?;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.given = Given::Call { id, cmd: *cmd };
        self.write_command(abi::CMD_CALL, cmd, id)?;
        let before = if stats { self.stats() } else { BTreeMap::new() };
        let step = self.run(Waiting::Result { id }, timeout)?;
        let after = if stats { self.stats() } else { BTreeMap::new() };
        match self.expect(step)? {
            Step::Result(t) => Ok(CallResult {
                t0: t.t0,
                t1: t.t1,
                ret: t.ret,
                breach: self.breach(t.breach, cmd.args.count)?,
                stats: kvmstats::delta(&before, &after),
            }),
            other => Err(Error::Internal(format!(
                "the protocol handed back {other:?} for a command"
            ))),
        }
    }

    /// Run up to `abi::BATCH_SLOTS` commands with one exit (`CMD_BATCH`);
    /// each is timed on its own. On a guest failure the error comes back as
    /// is; [`Vcpu::batch_progress`] then says how far the batch got.
    pub fn call_batch(&mut self, cmds: &[Command], timeout: Duration) -> Result<Vec<CallResult>> {
        let n = cmds.len() as u64;
        if n == 0 || n > abi::BATCH_SLOTS {
            return Err(Error::Internal(format!(
                "a batch of {n} commands (1..={} fit the mailbox)",
                abi::BATCH_SLOTS
            )));
        }
        if !self.started {
            self.start(timeout)?;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.given = Given::Batch { id, n };
        // The slots in one write: a full batch is hundreds of them.
        let mut slots = vec![0u8; (n * abi::SLOT_SIZE) as usize];
        for (slot, cmd) in slots.chunks_exact_mut(abi::SLOT_SIZE as usize).zip(cmds) {
            for (off, v) in [
                (abi::SLOT_TABLE, cmd.table),
                (abi::SLOT_INDEX, cmd.index),
                (abi::SLOT_A0, cmd.args.a0),
                (abi::SLOT_A0_STEP, cmd.args.a0_step),
                (abi::SLOT_A1, cmd.args.a1),
                (abi::SLOT_A1_STEP, cmd.args.a1_step),
                (abi::SLOT_A2, cmd.args.a2),
                (abi::SLOT_COUNT, cmd.args.count),
                (abi::SLOT_FLAGS, cmd.returns.flags()),
            ] {
                let o = off as usize;
                slot[o..o + 8].copy_from_slice(&v.to_le_bytes());
            }
        }
        self.ram.write_bytes(self.mailbox + abi::MB_SLOTS, &slots)?;
        self.set_mb(abi::MB_BATCH_N, n)?;
        self.set_mb(abi::MB_CMD_OP, abi::CMD_BATCH)?;
        self.set_mb(abi::MB_CMD_ID, id)?;
        let step = self.run(Waiting::Result { id }, timeout)?;
        match self.expect(step)? {
            Step::Result(_) => {
                let slots = self.slots(n)?;
                cmds.iter()
                    .enumerate()
                    .map(|(i, c)| self.slot_result(&slots, i as u64, c.args.count))
                    .collect()
            }
            other => Err(Error::Internal(format!(
                "the protocol handed back {other:?} for a batch"
            ))),
        }
    }

    /// A host copy of the first `n` batch slots (the guest may be writing
    /// them).
    fn slots(&self, n: u64) -> Result<Vec<u8>> {
        let mut b = vec![0u8; (n.min(abi::BATCH_SLOTS) * abi::SLOT_SIZE) as usize];
        self.ram.read_into(self.mailbox + abi::MB_SLOTS, &mut b)?;
        Ok(b)
    }

    /// One slot's results (from [`Vcpu::slots`]), validated like a single
    /// command's.
    fn slot_result(&self, slots: &[u8], i: u64, count: u64) -> Result<CallResult> {
        let word = |off: u64| {
            let o = (i * abi::SLOT_SIZE + off) as usize;
            slots
                .get(o..o + 8)
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map_or(0, u64::from_le_bytes)
        };
        let (t0, t1) = (word(abi::SLOT_T0), word(abi::SLOT_T1));
        if t0 > t1 {
            return Err(self.violated(Violation {
                rule: Rule::TimestampsBackwards,
                detail: format!(
                    "batch slot {i}: result timestamps go backwards (T0 {t0:#x} > T1 {t1:#x})"
                ),
            }));
        }
        let breach = [
            word(abi::SLOT_BREACH),
            word(abi::SLOT_BREACH_GOT),
            word(abi::SLOT_BREACH_WANT),
        ];
        Ok(CallResult {
            t0,
            t1,
            ret: word(abi::SLOT_RET),
            breach: self.breach(breach, count)?,
            stats: BTreeMap::new(),
        })
    }

    /// A command's breach words decoded; words the guest cannot have
    /// written are a protocol failure.
    fn breach(&self, [word, got, want]: [u64; 3], count: u64) -> Result<Option<crate::Breach>> {
        crate::contract::decode(word, got, want, count)
            .map_err(|e| self.failure(FailureKind::Protocol, e.to_string()))
    }

    /// After a batch of `n` failed: the slot that was running (the guest's
    /// word, bounded by `n`; the last slot when the guest's word is out of
    /// range) and the results of the slots before it.
    pub fn batch_progress(&self, cmds: &[Command]) -> (usize, Vec<CallResult>) {
        let n = cmds.len();
        let (Ok(m), Ok(slots)) = (self.snapshot(), self.slots(n as u64)) else {
            return (0, Vec::new());
        };
        let cur = usize::try_from(m.u64(abi::MB_BATCH_CUR))
            .unwrap_or(usize::MAX)
            .min(n.saturating_sub(1));
        let done = cmds[..cur]
            .iter()
            .enumerate()
            .map_while(|(i, c)| self.slot_result(&slots, i as u64, c.args.count).ok())
            .collect::<Vec<_>>();
        (done.len(), done)
    }

    /// Ask the guest to stop; it answers with HC_DONE.
    pub fn exit(&mut self, timeout: Duration) -> Result<()> {
        if !self.started {
            return Ok(());
        }
        self.given = Given::Exit;
        self.set_mb(abi::MB_CMD_OP, abi::CMD_EXIT)?;
        let step = self.run(Waiting::Done, timeout)?;
        self.expect(step)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_register_report_names_the_last_hypercall_and_the_command() {
        let cmd = Command {
            table: 2,
            index: 5,
            args: crate::Args {
                a0: 0x1000,
                count: 1,
                ..Default::default()
            },
            returns: crate::Returns::Nothing,
        };
        let s = lost_registers(
            "shutdown (triple fault)",
            Some(&Step::Ready),
            &Given::Call { id: 1, cmd },
            Some("hostile_scribble".into()),
        );
        assert!(s.starts_with("shutdown (triple fault); registers lost: the vCPU was re-initialised by KVM on shutdown"), "{s}");
        assert!(
            s.contains("last hypercall HC_READY; during command 1 (table 2, index 5, a0 0x1000"),
            "{s}"
        );
        assert!(s.ends_with("count 1), routine hostile_scribble"), "{s}");
        let s = lost_registers("x", None, &Given::Start, None);
        assert!(s.contains("last hypercall none; during the boot"), "{s}");
        assert!(!s.contains("routine"), "{s}");
        let s = lost_registers(
            "x",
            Some(&Step::Log("hi".into())),
            &Given::Batch { id: 3, n: 4 },
            None,
        );
        assert!(
            s.contains("last hypercall HC_LOG \"hi\"; during batch 3 of 4 commands"),
            "{s}"
        );
    }
}
