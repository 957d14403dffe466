//! Typed errors of the hypclear library. Each message says what happened and,
//! where there is one, what to do about it.
use crate::backing::Backing;
use crate::units::format_size;
use serde::Serialize;
use std::fmt;
use std::path::PathBuf;
use thiserror::Error;

pub use hypclear_process::exit::{Category, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, Failure};

#[derive(Debug, Error)]
pub enum Error {
    // ---- environment / usage: exit 2, before any check runs ----
    #[error(
        "cannot open the KVM device {}: {}; load the KVM module (modprobe kvm_intel, kvm_amd or kvm_pvm) \
         and make sure this user can read and write /dev/kvm (e.g. add it to the kvm group)",
        path.display(), why
    )]
    KvmUnavailable { path: PathBuf, why: String },
    #[error("{0}")]
    Usage(String),
    #[error("KVM does not support {what}: {detail}")]
    Unsupported { what: &'static str, detail: String },
    #[error("cannot allocate {size} bytes of guest RAM with {backing} backing: {detail}")]
    Memory {
        size: u64,
        backing: Backing,
        detail: String,
    },

    #[error(
        "not enough host memory: {what} needs {need} bytes ({}), but only {available} bytes \
         are available ({detail}); use a smaller size or --mem, or free memory first",
        format_size(*need)
    )]
    HostMemory {
        what: String,
        need: u64,
        available: u64,
        detail: String,
    },

    #[error(
        "the address-space limit RLIMIT_AS (ulimit -v) is {limit} bytes ({limit_kb} kB) with \
         {mapped} bytes mapped already, and this run maps {need} bytes more ({}: guest \
         RAM, buffers, threads); raise it (ulimit -v {suggest_kb}, or unlimited) or use a \
         smaller --mem or -s",
        format_size(*need)
    )]
    AddressSpace {
        need: u64,
        limit: u64,
        limit_kb: u64,
        mapped: u64,
        suggest_kb: u64,
    },

    // ---- the VMM itself ----
    #[error("KVM ioctl {op} failed: {source}")]
    Kvm {
        op: &'static str,
        #[source]
        source: kvm_ioctls::Error,
    },
    #[error("guest memory access at {gpa:#x} (+{len:#x}) failed: {detail}")]
    GuestMemory { gpa: u64, len: u64, detail: String },
    #[error("the guest blob is unusable: {0}")]
    Blob(String),
    #[error("loading the guest blob failed: {0}")]
    Load(String),

    // ---- the guest misbehaved ----
    #[error("{0}")]
    Guest(Box<GuestFailure>),

    /// The architecture code failed (its own error type, with its category).
    #[error(transparent)]
    Arch(#[from] crate::arch::Error),

    // ---- a fault of hypclear itself (exit 2, as such faults always had) ----
    #[error("internal error: {0}; please report it with the command line")]
    Internal(String),

    #[error(
        "cannot write {} (fix the path or its permissions; checked before the run)",
        path.display()
    )]
    Output {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "interrupted ({}) before any result was taken; nothing was written",
        crate::interrupt::name()
    )]
    Interrupted,

    #[error("I/O error on {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl From<crate::interrupt::Interrupted> for Error {
    fn from(_: crate::interrupt::Interrupted) -> Self {
        Self::Interrupted
    }
}

impl From<crate::interrupt::InstallError> for Error {
    fn from(e: crate::interrupt::InstallError) -> Self {
        Self::Internal(e.to_string())
    }
}

/// A result file: [`Error::Output`] when found before the run, else
/// [`Error::Io`].
impl From<hypclear_process::files::FileError> for Error {
    fn from(e: hypclear_process::files::FileError) -> Self {
        use hypclear_process::files::FileError;
        match e {
            FileError::Unwritable { path, source } => Self::Output { path, source },
            FileError::Io { path, source } => Self::Io { path, source },
            // The rest are usage errors: the path given cannot serve.
            e @ (FileError::BadTarget { .. }
            | FileError::Unreadable { .. }
            | FileError::TooLarge { .. }
            | FileError::Malformed { .. }) => Self::Usage(e.to_string()),
        }
    }
}

/// The host architecture's error (`arch::HostError`, from the contract's
/// re-export list) into the generic one.
impl From<crate::arch::HostError> for Error {
    fn from(e: crate::arch::HostError) -> Self {
        if e.kvm_errno().is_some_and(crate::interrupt::cut_short) {
            return Self::Interrupted;
        }
        Self::Arch(e.into())
    }
}

impl Failure for Error {
    fn category(&self) -> Category {
        match self {
            Error::Interrupted => Category::Interrupted,
            Error::Usage(_) => Category::Usage,
            Error::KvmUnavailable { .. }
            | Error::Unsupported { .. }
            | Error::Memory { .. }
            | Error::Output { .. }
            | Error::HostMemory { .. }
            | Error::AddressSpace { .. } => Category::Environment,
            Error::Internal(_) => Category::Internal,
            Error::Guest(_) => Category::Guest,
            Error::Arch(e) => e.category(),
            Error::Kvm { .. }
            | Error::GuestMemory { .. }
            | Error::Blob(_)
            | Error::Load(_)
            | Error::Io { .. } => Category::Run,
        }
    }
}

impl Error {
    /// A failed KVM ioctl: [`Error::Interrupted`] when the SIGINT cut it
    /// short (see [`crate::interrupt::cut_short`]).
    pub fn kvm(op: &'static str) -> impl FnOnce(kvm_ioctls::Error) -> Error {
        move |source| {
            if crate::interrupt::cut_short(source.errno()) {
                Error::Interrupted
            } else {
                Error::Kvm { op, source }
            }
        }
    }
}

impl From<crate::arch::RamError> for Error {
    fn from(e: crate::arch::RamError) -> Error {
        Error::GuestMemory {
            gpa: e.gpa,
            len: e.len,
            detail: e.detail,
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// The lower errors that become the VMM's on their way up, for
/// [`lift_into_vmm!`](crate::lift_into_vmm).
pub mod lifted {
    pub use hypclear_arch::HostError;
    pub use hypclear_process::files::FileError;
    pub use hypclear_process::interrupt::{InstallError, Interrupted};
}

/// `From` impls that turn the lower errors (an architecture's, a stop
/// request, a file's; or those listed) into an error enum's `Vmm` variant,
/// as the VMM's own error does: one way up for them in every crate above.
#[macro_export]
macro_rules! lift_into_vmm {
    ($t:ty) => {
        $crate::lift_into_vmm!(
            $t: $crate::error::lifted::HostError,
            $crate::error::lifted::Interrupted,
            $crate::error::lifted::FileError
        );
    };
    ($t:ty: $($from:ty),+) => {$(
        impl From<$from> for $t {
            fn from(e: $from) -> Self {
                Self::Vmm(e.into())
            }
        }
    )+};
}

/// What went wrong in the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// A CPU exception reported by the blob's vectors.
    Exception,
    /// No hypercall within the watchdog timeout.
    Timeout,
    /// Triple fault / shutdown.
    Shutdown,
    /// KVM could not handle an exit (emulation failure and the like).
    InternalError,
    /// A doorbell value that is not a hypercall number.
    UnknownHypercall,
    /// An exit that is not a hypercall (port I/O, MMIO elsewhere, HLT, ...).
    UnexpectedExit,
    /// The guest rejected a command.
    BadCommand,
    /// The guest answered out of protocol (wrong id, early DONE, ...).
    Protocol,
}

/// The protocol rule a guest broke, when the host caught it at an exit:
/// what a verdict is decided on (the detail is for people, and may be
/// reworded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// The watchdog fired before the awaited hypercall.
    NoProgress,
    /// The guest shut down (triple fault).
    Shutdown,
    /// KVM could not handle an exit.
    KvmInternal,
    /// A doorbell store of other than 8 bytes.
    DoorbellWidth,
    /// A doorbell store from outside the harness's listed ring sites.
    RingSite,
    /// A doorbell value that is no hypercall number.
    UnknownHypercall,
    /// A store to or load from an address with no memory.
    Unbacked,
    /// A PSCI system event in the middle of the protocol.
    SystemEvent,
    /// An exit the protocol does not use.
    OtherExit,
    /// A result for another command than the one asked for.
    WrongResultId,
    /// A result whose T0 is after its T1.
    TimestampsBackwards,
    /// A hypercall the host was not waiting for.
    OutOfOrder,
    /// More logs or log bytes than one wait allows.
    LogFlood,
    /// HC_FAIL with a code the ABI does not define.
    UnknownFailCode,
}

impl Rule {
    /// The failure kind a breach of this rule is reported as.
    pub fn kind(self) -> FailureKind {
        match self {
            Rule::NoProgress => FailureKind::Timeout,
            Rule::Shutdown => FailureKind::Shutdown,
            Rule::KvmInternal => FailureKind::InternalError,
            Rule::UnknownHypercall => FailureKind::UnknownHypercall,
            Rule::Unbacked | Rule::SystemEvent | Rule::OtherExit => FailureKind::UnexpectedExit,
            Rule::DoorbellWidth
            | Rule::RingSite
            | Rule::WrongResultId
            | Rule::TimestampsBackwards
            | Rule::OutOfOrder
            | Rule::LogFlood
            | Rule::UnknownFailCode => FailureKind::Protocol,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct GuestFailure {
    pub kind: FailureKind,
    /// The rule broken, for failures the host caught at an exit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<Rule>,
    pub vcpu: u64,
    pub detail: String,
    /// Program counter when the failure was seen (or the faulting PC).
    pub pc: Option<u64>,
    pub pc_symbol: Option<String>,
    pub registers: Option<String>,
    /// Exception class: the vector on x86_64, ESR_EL1.EC on aarch64.
    pub vector: Option<u64>,
    /// The address a page fault / data abort was taken for (CR2, FAR_ELx).
    pub fault_address: Option<u64>,
}

impl GuestFailure {
    /// A protocol violation the host found in what the guest reported
    /// (not at an exit, so with no registers to show).
    pub fn protocol(detail: String) -> GuestFailure {
        GuestFailure {
            kind: FailureKind::Protocol,
            rule: None,
            vcpu: 0,
            detail,
            pc: None,
            pc_symbol: None,
            registers: None,
            vector: None,
            fault_address: None,
        }
    }
}

impl fmt::Display for GuestFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "guest vCPU {} failed ({:?}): {}",
            self.vcpu, self.kind, self.detail
        )?;
        if let (Some(pc), Some(sym)) = (self.pc, &self.pc_symbol) {
            write!(f, "\n  at {pc:#x} ({sym})")?;
        }
        if let Some(r) = &self.registers {
            for line in r.lines() {
                write!(f, "\n  {line}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Arch errors keep the exit status of the crate errors they replaced.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn arch_errors_keep_their_exit_codes() {
        use crate::arch::x86_64::{Error as X, paging::PagingError};
        let internal: Error = X::PageTables(PagingError::Unaligned(3)).into();
        assert_eq!(internal.exit_code(), EXIT_USAGE);
        assert_eq!(
            internal.exit_code(),
            Error::Internal(String::new()).exit_code()
        );
        let load: Error = X::BeyondSize { end: 2, size: 1 }.into();
        assert_eq!(load.exit_code(), EXIT_FAILED);
        assert_eq!(
            load.to_string(),
            Error::Load("blob ends at 0x2, beyond its declared size 0x1".into()).to_string()
        );
    }

    #[test]
    fn categories_give_the_documented_exit_codes() {
        assert_eq!(Error::Usage(String::new()).exit_code(), EXIT_USAGE);
        assert_eq!(
            Error::Io {
                path: "x".into(),
                source: std::io::Error::other("x")
            }
            .exit_code(),
            EXIT_FAILED
        );
        assert_eq!(Error::Blob(String::new()).exit_code(), EXIT_FAILED);
        assert_eq!(Error::Interrupted.exit_code(), EXIT_INTERRUPTED);
    }
}
