//! One vCPU: its mailbox, the hypercall loop over KVM_RUN exits
//! ([`Exit`]), and the command protocol (start, call, exit).
use super::kvmstats::{self, KvmStats};
use super::memory::GuestRam;
use super::watchdog::Watchdog;
use super::{CallResult, Command, FailureKind, GuestFailure, Symbolizer};
use crate::arch;
use crate::blob::abi;
use crate::error::{Error, Result};
use kvm_ioctls::{VcpuExit, VcpuFd};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::Duration;

/// A hypercall the guest made.
#[derive(Debug)]
enum Hypercall {
    Ready,
    Result,
    Done,
    Fail,
}

/// One KVM_RUN exit as the hypercall loop sees it.
#[derive(Debug)]
pub enum Exit {
    /// A store to a guest-physical address with no memslot (the doorbell
    /// when `addr` is `abi::DOORBELL_GPA`).
    Store { addr: u64, value: u64 },
    /// A load from a guest-physical address with no memslot.
    Load { addr: u64 },
    /// KVM_RUN returned for a signal (the watchdog, or EINTR/EAGAIN).
    Interrupted,
    /// Triple fault / shutdown.
    Shutdown,
    /// KVM could not handle an exit.
    InternalError,
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
    watchdog: Option<(ThreadId, Watchdog)>,
    stats: Option<KvmStats>,
    started: bool,
}

impl Vcpu {
    pub(super) fn new(
        fd: VcpuFd,
        id: u64,
        mailbox: u64,
        ram: Arc<GuestRam>,
        sym: Arc<Symbolizer>,
    ) -> Vcpu {
        let stats = KvmStats::open(&fd);
        Vcpu {
            fd,
            id,
            mailbox,
            next_id: 1,
            ram,
            sym,
            watchdog: None,
            stats,
            started: false,
        }
    }

    fn mb(&self, off: u64) -> Result<u64> {
        self.ram.read_u64(self.mailbox + off)
    }

    fn set_mb(&self, off: u64, v: u64) -> Result<()> {
        self.ram.write_u64(self.mailbox + off, v)
    }

    fn failure(&self, kind: FailureKind, detail: String) -> Error {
        let regs = arch::registers(&self.fd);
        Error::Guest(Box::new(GuestFailure {
            kind,
            vcpu: self.id,
            detail,
            pc: regs.as_ref().map(|r| r.0),
            pc_symbol: regs.as_ref().map(|r| self.sym.name(r.0)),
            registers: regs.map(|r| r.1),
            vector: None,
        }))
    }

    /// Current KVM stats of this vCPU (empty where unsupported).
    pub fn stats(&self) -> BTreeMap<String, u64> {
        self.stats.as_ref().map(KvmStats::read).unwrap_or_default()
    }

    /// Run until the next hypercall, handling LOG on the way.
    /// One KVM_RUN, with the watchdog armed around it.
    fn next_exit(&mut self, timeout: Duration) -> Result<Exit> {
        if let Some((_, w)) = &self.watchdog {
            w.arm(timeout);
        }
        let exit = match self.fd.run() {
            Ok(VcpuExit::MmioWrite(addr, data)) => {
                let mut v = [0u8; 8];
                let n = data.len().min(8);
                v[..n].copy_from_slice(&data[..n]);
                Ok(Exit::Store {
                    addr,
                    value: u64::from_le_bytes(v),
                })
            }
            Ok(VcpuExit::MmioRead(addr, data)) => {
                data.fill(0);
                Ok(Exit::Load { addr })
            }
            Ok(VcpuExit::Intr) => Ok(Exit::Interrupted),
            Ok(VcpuExit::Shutdown) => Ok(Exit::Shutdown),
            Ok(VcpuExit::InternalError) => Ok(Exit::InternalError),
            Ok(VcpuExit::FailEntry(reason, cpu)) => Ok(Exit::Other(format!(
                "FAILENTRY: hardware entry failure reason {reason:#x} on CPU {cpu}"
            ))),
            Ok(other) => Ok(Exit::Other(format!("unexpected exit {other:?}"))),
            Err(e) if e.errno() == libc::EINTR || e.errno() == libc::EAGAIN => {
                Ok(Exit::Interrupted)
            }
            Err(e) => Err(e),
        };
        if let Some((_, w)) = &self.watchdog {
            w.disarm();
        }
        exit.map_err(Error::kvm("KVM_RUN"))
    }

    /// Run until the guest rings a hypercall the caller must handle
    /// (logs are printed here); every other exit is a guest failure.
    fn run(&mut self, timeout: Duration) -> Result<Hypercall> {
        let me = std::thread::current().id();
        if self.watchdog.as_ref().is_none_or(|(t, _)| *t != me) {
            self.watchdog = Some((me, Watchdog::for_current_thread()));
        }
        loop {
            let exit = self.next_exit(timeout)?;
            let fired = self.watchdog.as_ref().is_some_and(|(_, w)| w.fired());
            let (kind, detail) = match exit {
                Exit::Interrupted if fired => (
                    FailureKind::Timeout,
                    format!(
                        "no hypercall for {:.1} s: the guest stopped making progress \
                         (raise --timeout if the work is just slow)",
                        timeout.as_secs_f64()
                    ),
                ),
                Exit::Interrupted => continue,
                Exit::Shutdown => (
                    FailureKind::Shutdown,
                    "shutdown (triple fault): the guest took an exception it could not \
                     handle"
                        .into(),
                ),
                Exit::InternalError => (
                    FailureKind::InternalError,
                    "KVM internal error (e.g. an instruction KVM could not emulate)".into(),
                ),
                Exit::Store { addr, value } if addr == abi::DOORBELL_GPA => {
                    match self.hypercall(value)? {
                        Some(h) => return Ok(h),
                        None => continue,
                    }
                }
                Exit::Store { addr, value } => (
                    FailureKind::UnexpectedExit,
                    format!("store of {value:#x} to unbacked guest address {addr:#x}"),
                ),
                Exit::Load { addr } => (
                    FailureKind::UnexpectedExit,
                    format!("load from unbacked guest address {addr:#x}"),
                ),
                Exit::Other(what) => (FailureKind::UnexpectedExit, what),
            };
            return Err(self.failure(kind, detail));
        }
    }

    /// A doorbell value: the hypercall to hand back, or None when it was
    /// handled here (HC_LOG).
    fn hypercall(&mut self, value: u64) -> Result<Option<Hypercall>> {
        Ok(Some(match value {
            abi::HC_READY => Hypercall::Ready,
            abi::HC_RESULT => Hypercall::Result,
            abi::HC_DONE => Hypercall::Done,
            abi::HC_FAIL => Hypercall::Fail,
            abi::HC_LOG => {
                let len = self.mb(abi::MB_LOG_LEN)?.min(abi::LOG_BUF_SIZE);
                let text = self.ram.slice(self.mailbox + abi::MB_LOG_BUF, len)?;
                eprintln!(
                    "guest vCPU {}: {}",
                    self.id,
                    String::from_utf8_lossy(text).trim_end()
                );
                return Ok(None);
            }
            other => {
                return Err(self.failure(
                    FailureKind::UnknownHypercall,
                    format!("unknown hypercall number {other:#x} at the doorbell"),
                ));
            }
        }))
    }

    /// Turn a HC_FAIL into an error.
    fn fail_report(&self) -> Result<Error> {
        let code = self.mb(abi::MB_FAIL_CODE)?;
        let mut d = [0u64; 6];
        for (i, x) in d.iter_mut().enumerate() {
            *x = self.mb(abi::MB_FAIL_D0 + 8 * i as u64)?;
        }
        Ok(match code {
            abi::FAIL_EXCEPTION => {
                let sym = self.sym.clone();
                let (pc, class, detail) = arch::describe_exception(d, &|a| sym.name(a));
                let regs = arch::registers(&self.fd).map(|r| r.1);
                Error::Guest(Box::new(GuestFailure {
                    kind: FailureKind::Exception,
                    vcpu: self.id,
                    detail,
                    pc: Some(pc),
                    pc_symbol: Some(self.sym.name(pc)),
                    registers: regs,
                    vector: Some(class),
                }))
            }
            abi::FAIL_BAD_COMMAND => self.failure(
                FailureKind::BadCommand,
                format!(
                    "the guest rejected the command (table {}, index {})",
                    d[0], d[1]
                ),
            ),
            other => self.failure(
                FailureKind::Protocol,
                format!("HC_FAIL with unknown code {other:#x}"),
            ),
        })
    }

    /// Run from reset to the guest's HC_READY.
    pub fn start(&mut self, timeout: Duration) -> Result<()> {
        match self.run(timeout)? {
            Hypercall::Ready => {
                self.started = true;
                Ok(())
            }
            Hypercall::Fail => Err(self.fail_report()?),
            other => Err(self.failure(
                FailureKind::Protocol,
                format!("expected HC_READY first, got {other:?}"),
            )),
        }
    }

    /// Run one command and return its timestamps.
    pub fn call(&mut self, cmd: &Command, timeout: Duration) -> Result<CallResult> {
        if !self.started {
            self.start(timeout)?;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.set_mb(abi::MB_CMD_OP, abi::CMD_CALL)?;
        self.set_mb(abi::MB_CMD_TABLE, cmd.table)?;
        self.set_mb(abi::MB_CMD_INDEX, cmd.index)?;
        self.set_mb(abi::MB_CMD_A0, cmd.a0)?;
        self.set_mb(abi::MB_CMD_A0_STEP, cmd.a0_step)?;
        self.set_mb(abi::MB_CMD_A1, cmd.a1)?;
        self.set_mb(abi::MB_CMD_A1_STEP, cmd.a1_step)?;
        self.set_mb(abi::MB_CMD_A2, cmd.a2)?;
        self.set_mb(abi::MB_CMD_COUNT, cmd.count)?;
        self.set_mb(abi::MB_CMD_ID, id)?;
        let before = self.stats();
        let hc = self.run(timeout)?;
        let after = self.stats();
        match hc {
            Hypercall::Result => {
                let got = self.mb(abi::MB_RES_ID)?;
                if got != id {
                    return Err(self.failure(
                        FailureKind::Protocol,
                        format!("result for command {got}, expected {id}"),
                    ));
                }
                Ok(CallResult {
                    t0: self.mb(abi::MB_RES_T0)?,
                    t1: self.mb(abi::MB_RES_T1)?,
                    ret: self.mb(abi::MB_RES_RET)?,
                    stats: kvmstats::delta(&before, &after),
                })
            }
            Hypercall::Fail => Err(self.fail_report()?),
            other => Err(self.failure(
                FailureKind::Protocol,
                format!("expected HC_RESULT, got {other:?}"),
            )),
        }
    }

    /// Ask the guest to stop; it answers with HC_DONE.
    pub fn exit(&mut self, timeout: Duration) -> Result<()> {
        if !self.started {
            return Ok(());
        }
        self.set_mb(abi::MB_CMD_OP, abi::CMD_EXIT)?;
        match self.run(timeout)? {
            Hypercall::Done => Ok(()),
            Hypercall::Fail => Err(self.fail_report()?),
            other => Err(self.failure(
                FailureKind::Protocol,
                format!("expected HC_DONE, got {other:?}"),
            )),
        }
    }
}
