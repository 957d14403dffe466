//! Typed errors of the hypclear library. Each message says what happened and,
//! where there is one, what to do about it.
use thiserror::Error;

/// Exit status for usage and environment errors (clap uses 2 as well).
pub const EXIT_USAGE: i32 = 2;
/// Exit status when any check failed or the guest misbehaved.
pub const EXIT_FAILED: i32 = 1;

#[derive(Debug, Error)]
pub enum Error {
    // ---- environment / usage: exit 2, before any VM is created ----
    #[error(
        "cannot open the KVM device {0}; load the KVM module (modprobe kvm_intel, kvm_amd or kvm_pvm) \
         and make sure this user can read and write /dev/kvm (e.g. add it to the kvm group)"
    )]
    KvmUnavailable(String),
    #[error("{0}")]
    Usage(String),
    #[error("KVM does not support {what}: {detail}")]
    Unsupported { what: String, detail: String },
    #[error("cannot allocate {size} bytes of guest RAM with {backing} backing: {detail}")]
    Memory {
        size: u64,
        backing: String,
        detail: String,
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
    Guest(Box<crate::vmm::GuestFailure>),

    // ---- a routine produced wrong memory (exit 1) ----
    #[error("verification failed: {0}")]
    Verification(String),

    // ---- a fault of hypclear itself (exit 2, as such faults always had) ----
    #[error("internal error: {0}; please report it with the command line")]
    Internal(String),

    #[error("I/O error on {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// Process exit status for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::KvmUnavailable(_)
            | Error::Usage(_)
            | Error::Unsupported { .. }
            | Error::Memory { .. }
            | Error::Internal(_) => EXIT_USAGE,
            _ => EXIT_FAILED,
        }
    }

    pub fn kvm(op: &'static str) -> impl FnOnce(kvm_ioctls::Error) -> Error {
        move |source| Error::Kvm { op, source }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
