//! The check crate's errors: run/verify filters no check can satisfy,
//! blobs without what a check needs, a reclaim left unchecked, and the
//! routines' and VMM's errors beneath.
use crate::routines::Routine;
use crate::units::format_size;
use crate::vmm::Breach;
use hypclear_process::exit::Category;
pub use hypclear_process::exit::Failure;
use thiserror::Error;

pub use crate::routines::error::Error as RoutinesError;
pub use crate::vmm::error::{Error as VmmError, GuestFailure};

#[derive(Debug, Error)]
pub enum Error {
    /// `--mem` cannot hold the largest check asked for (exit 2).
    #[error(
        "--mem {} is too small for the requested sizes: they need {} of arena; use --mem {} or more",
        format_size(*mem), format_size(*need), format_size(*fit)
    )]
    MemTooSmall { mem: u64, need: u64, fit: u64 },
    /// A `--variant` no selected routine has (exit 2).
    #[error(
        "unknown variant `{name}` for the selected routines; known variants: {}",
        known.join(", ")
    )]
    UnknownVariant {
        name: String,
        known: Vec<&'static str>,
    },
    /// A `--size` above the largest guest RAM (exit 2).
    #[error(
        "--size {size} ({}) is larger than the largest guest RAM ({}): no check of it \
         fits; pick a size up to {}",
        format_size(*size), format_size(*max), format_size(*max)
    )]
    SizeTooLarge { size: u64, max: u64 },
    /// A `--size` a page routine cannot take (exit 2).
    #[error(
        "{routine} works on whole pages: --size {size} is not a multiple of 4096 \
         (try {} or pick --routine memset/memcpy)",
        format_size(size.div_ceil(4096).max(1) * 4096)
    )]
    NotWholePages { routine: Routine, size: u64 },
    /// A `--case` the hostile suite does not have (exit 2).
    #[error("no hostile case `{name}`; the cases are {}", known.join(", "))]
    UnknownCase {
        name: String,
        known: Vec<&'static str>,
    },
    /// The blob has no variant of `routine` at all (exit 1).
    #[error("the guest blob is unusable: no {routine} variant")]
    NoVariant { routine: Routine },
    /// The blob has no variant of `routine` that runs on any CPU (exit 1).
    #[error("the guest blob is unusable: no {routine} variant without a CPU requirement")]
    NoPlainVariant { routine: Routine },
    /// The blob lacks an alias a check calls (exit 1).
    #[error("the guest blob is unusable: the blob has no {alias} alias")]
    NoAlias { alias: &'static str },
    /// The arena fill broke the call contract, so the reclaim went
    /// unchecked (exit 1).
    #[error(
        "verification failed: the guest's memset_generic broke the call contract ({breach}) \
         while filling the arena, so the reclaim went unchecked"
    )]
    ReclaimUnchecked { breach: Breach },
    #[error(transparent)]
    Routines(RoutinesError),
    #[error(transparent)]
    Vmm(#[from] VmmError),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Failure for Error {
    fn category(&self) -> Category {
        match self {
            Error::MemTooSmall { .. }
            | Error::UnknownVariant { .. }
            | Error::SizeTooLarge { .. }
            | Error::NotWholePages { .. }
            | Error::UnknownCase { .. } => Category::Usage,
            Error::NoVariant { .. } | Error::NoPlainVariant { .. } | Error::NoAlias { .. } => {
                Category::Run
            }
            Error::ReclaimUnchecked { .. } => Category::Verification,
            Error::Routines(e) => e.category(),
            Error::Vmm(e) => e.category(),
        }
    }
}

impl Error {
    /// A fault of hypclear itself (exit 2, "please report it").
    pub fn internal(what: impl Into<String>) -> Error {
        Error::Vmm(VmmError::Internal(what.into()))
    }
}

/// The VMM's errors sit at [`Error::Vmm`] whichever crate passed them up,
/// so one pattern finds a guest failure or an interruption.
impl From<RoutinesError> for Error {
    fn from(e: RoutinesError) -> Self {
        match e {
            RoutinesError::Vmm(e) => Error::Vmm(e),
            e => Error::Routines(e),
        }
    }
}

crate::vmm::lift_into_vmm!(Error);
