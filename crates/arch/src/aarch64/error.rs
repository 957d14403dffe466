//! Errors of the aarch64 code: page tables, vCPU setup, the blob loader,
//! the MOPS probe. Messages are the crate's (`crate::error::Error`) for the
//! same failure.
use super::layout::{BLOB_WINDOW, BLOB_WINDOW_END, RAM_BASE};
use super::paging::PagingError;
use crate::RamError;
use crate::exit::Category;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The identity map does not fit its area: a layout bug.
    #[error(
        "internal error: building the guest page tables: {0}; please report it with the command line"
    )]
    PageTables(PagingError),
    #[error("KVM ioctl {op} failed: {source}")]
    Kvm {
        op: &'static str,
        #[source]
        source: kvm_ioctls::Error,
    },
    #[error("KVM does not support {what}: {detail}")]
    Unsupported { what: &'static str, detail: String },
    /// KVM_CREATE_VM refused a VM type (a protected VM where pKVM is off).
    #[error(
        "KVM_CREATE_VM with type {word:#x} (KVM_VM_TYPE_ARM_PROTECTED) failed: {source}; \
         protected VMs need Linux 7.1 or later booted with kvm-arm.mode=protected"
    )]
    VmType {
        word: u64,
        #[source]
        source: kvm_ioctls::Error,
    },
    #[error(
        "loading the guest blob failed: guest RAM starts at {0:#x}, the aarch64 layout expects {RAM_BASE:#x}"
    )]
    RamBase(u64),
    #[error(
        "loading the guest blob failed: blob loaded at {0:#x}, outside the window {BLOB_WINDOW:#x}..{BLOB_WINDOW_END:#x}"
    )]
    OutsideWindow(u64),
    #[error(
        "the guest blob is unusable: hyp_vectors at {0:#x} is not 2 KiB aligned (VBAR_EL1 needs it)"
    )]
    VectorsUnaligned(u64),
    #[error("loading the guest blob failed: no flat image for the PE loader")]
    NoFlatImage,
    #[error("loading the guest blob failed: linux-loader PE (arm64 Image) loader: {0}")]
    PeLoader(linux_loader::loader::Error),
    #[error(
        "loading the guest blob failed: the Image header asked for a text offset: loaded at {loaded:#x}, expected {expected:#x}"
    )]
    TextOffset { loaded: u64, expected: u64 },
    /// A step of the MOPS probe VM (`host::probe_mops`) failed.
    #[error("{op}: {source}")]
    ProbeIoctl {
        op: &'static str,
        source: kvm_ioctls::Error,
    },
    #[error("mmap failed")]
    ProbeMmap,
    #[error("unexpected exit {0}")]
    ProbeExit(String),
    #[error("the probe guest did not finish")]
    ProbeTimeout,
    #[error(transparent)]
    Ram(#[from] RamError),
}

impl Error {
    pub fn category(&self) -> Category {
        match self {
            Error::PageTables(_) => Category::Internal,
            Error::Unsupported { .. } | Error::VmType { .. } => Category::Environment,
            Error::Kvm { .. }
            | Error::RamBase(_)
            | Error::OutsideWindow(_)
            | Error::VectorsUnaligned(_)
            | Error::NoFlatImage
            | Error::PeLoader(_)
            | Error::TextOffset { .. }
            | Error::ProbeIoctl { .. }
            | Error::ProbeMmap
            | Error::ProbeExit(_)
            | Error::ProbeTimeout
            | Error::Ram(_) => Category::Run,
        }
    }

    pub fn kvm(op: &'static str) -> impl FnOnce(kvm_ioctls::Error) -> Error {
        move |source| Error::Kvm { op, source }
    }

    pub fn probe(op: &'static str) -> impl FnOnce(kvm_ioctls::Error) -> Error {
        move |source| Error::ProbeIoctl { op, source }
    }

    /// The errno of a failed KVM ioctl (for the generic error, which tells
    /// an ioctl cut short by SIGINT from a failure).
    pub fn kvm_errno(&self) -> Option<i32> {
        match self {
            Error::Kvm { source, .. }
            | Error::ProbeIoctl { source, .. }
            | Error::VmType { source, .. } => Some(source.errno()),
            _ => None,
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_and_messages_match_the_vmm_errors() {
        let e = Error::PageTables(PagingError::Overlap(0x4000_1000));
        assert_eq!(e.category(), Category::Internal);
        assert!(
            e.to_string()
                .starts_with("internal error: building the guest page tables: ")
        );
        let e = Error::Unsupported {
            what: "the generic timer",
            detail: "CNTFRQ_EL0 reads 0 Hz".into(),
        };
        assert_eq!(e.category(), Category::Environment);
        assert_eq!(
            e.to_string(),
            "KVM does not support the generic timer: CNTFRQ_EL0 reads 0 Hz"
        );
        let e = Error::VectorsUnaligned(0x4020_0100);
        assert_eq!(e.category(), Category::Run);
        assert_eq!(
            e.to_string(),
            "the guest blob is unusable: hyp_vectors at 0x40200100 is not 2 KiB aligned (VBAR_EL1 needs it)"
        );
        assert_eq!(
            Error::OutsideWindow(0x10).to_string(),
            format!(
                "loading the guest blob failed: blob loaded at 0x10, outside the window \
                 {BLOB_WINDOW:#x}..{BLOB_WINDOW_END:#x}"
            )
        );
    }
}
