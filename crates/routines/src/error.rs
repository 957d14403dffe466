//! The routines crate's errors: calls a routine cannot take, blobs without
//! the routine asked for, and the VMM's own errors beneath.
use crate::Routine;
use crate::blob::LinkConfig;
use hypclear_process::exit::Category;
pub use hypclear_process::exit::Failure;
use thiserror::Error;

pub use crate::vmm::error::Error as VmmError;

#[derive(Debug, Error)]
pub enum Error {
    /// A length a page routine cannot take (exit 2).
    #[error("{routine} works on whole pages: {len} bytes is not a multiple of {page}")]
    NotWholePages {
        routine: Routine,
        len: u64,
        page: u64,
    },
    /// A length a fixed-size routine cannot take (exit 2).
    #[error("{routine} always works on {fixed} bytes, not {len}")]
    FixedSize {
        routine: Routine,
        fixed: u64,
        len: u64,
    },
    /// clear_pages lowered to clear_page needs consecutive pages (exit 2).
    #[error(
        "this blob has no clear_pages routine: clear_pages runs as clear_page on consecutive \
         pages, which needs a chunk step equal to the chunk size (got step {step} for {len} bytes)"
    )]
    PagesNotConsecutive { step: i64, len: u64 },
    /// `--el 2` together with an EL0 choice (exit 2).
    #[error(
        "--el 2 runs the routines at EL2; EL0 (--cpl 3, --no-dc-zva) runs under EL1: \
         use --el 1 or --el auto with them"
    )]
    El2WithEl0,
    /// The blob lacks the alias a call lowers to (exit 1).
    #[error("the guest blob is unusable: the {config} blob has no alias `{alias}`")]
    NoAlias { config: LinkConfig, alias: String },
    /// The blob has no variant of `routine` that runs on any CPU (exit 1).
    #[error("the guest blob is unusable: no {routine} variant without CPU requirements")]
    NoPlainVariant { routine: Routine },
    #[error(transparent)]
    Vmm(#[from] VmmError),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Failure for Error {
    fn category(&self) -> Category {
        match self {
            Error::NotWholePages { .. }
            | Error::FixedSize { .. }
            | Error::PagesNotConsecutive { .. }
            | Error::El2WithEl0 => Category::Usage,
            Error::NoAlias { .. } | Error::NoPlainVariant { .. } => Category::Run,
            Error::Vmm(e) => e.category(),
        }
    }
}

crate::vmm::lift_into_vmm!(Error);
