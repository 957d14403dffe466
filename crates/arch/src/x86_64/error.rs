//! Errors of the x86_64 code: page tables, vCPU setup, the blob loader.
//! Messages are the crate's (`crate::error::Error`) for the same failure.
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
    /// `prepare_memory` was given no blob to enter.
    #[error("internal error: no blob to map and enter; please report it with the command line")]
    NoBlob,
    #[error("KVM ioctl {op} failed: {source}")]
    Kvm {
        op: &'static str,
        #[source]
        source: kvm_ioctls::Error,
    },
    #[error("loading the guest blob failed: linux-loader ELF loader: {0}")]
    ElfLoader(linux_loader::loader::Error),
    #[error(
        "loading the guest blob failed: blob ends at {end:#x}, beyond its declared size {size:#x}"
    )]
    BeyondSize { end: u64, size: u64 },
    #[error("KVM does not support {what}: {detail}")]
    Unsupported { what: &'static str, detail: String },
    #[error(transparent)]
    Ram(#[from] RamError),
    /// A guest at the hypervisor level (`Privilege::Hyp`) was asked for.
    #[error("x86_64 has no hypervisor level for the guest (EL2 is an aarch64 option)")]
    NoHypLevel,
}

impl Error {
    pub fn category(&self) -> Category {
        match self {
            Error::PageTables(_) | Error::NoBlob => Category::Internal,
            Error::NoHypLevel => Category::Usage,
            Error::Unsupported { .. } => Category::Environment,
            Error::Kvm { .. } | Error::ElfLoader(_) | Error::BeyondSize { .. } | Error::Ram(_) => {
                Category::Run
            }
        }
    }

    pub fn kvm(op: &'static str) -> impl FnOnce(kvm_ioctls::Error) -> Error {
        move |source| Error::Kvm { op, source }
    }

    /// The errno of a failed KVM ioctl (for the generic error, which tells
    /// an ioctl cut short by SIGINT from a failure).
    pub fn kvm_errno(&self) -> Option<i32> {
        match self {
            Error::Kvm { source, .. } => Some(source.errno()),
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
        let e = Error::PageTables(PagingError::Unaligned(3));
        assert_eq!(e.category(), Category::Internal);
        assert!(
            e.to_string()
                .starts_with("internal error: building the guest page tables: ")
        );
        let e = Error::BeyondSize { end: 0x10, size: 8 };
        assert_eq!(e.category(), Category::Run);
        assert_eq!(
            e.to_string(),
            "loading the guest blob failed: blob ends at 0x10, beyond its declared size 0x8"
        );
        let e = Error::kvm("KVM_SET_REGS")(kvm_ioctls::Error::new(22));
        assert_eq!(e.category(), Category::Run);
        assert_eq!(
            e.to_string(),
            format!(
                "KVM ioctl KVM_SET_REGS failed: {}",
                kvm_ioctls::Error::new(22)
            )
        );
    }
}
