//! The CLI edge's error: each library crate's error, folded here (and only
//! here) into one exit status. Each message says what happened and what to
//! do about it.
use hypclear_kernel::blob::KernelBlobError;
use hypclear_process::exit::Category;
pub(crate) use hypclear_process::exit::EXIT_FAILED;
pub(crate) use hypclear_vmm::error::Error as RunError;

#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// A bad command line (exit 2).
    #[error("{0}")]
    Usage(String),
    /// The VMM, a check or a benchmark failed (its own category).
    #[error(transparent)]
    Run(#[from] RunError),
    /// A kernel tree or kernel blob file that cannot be used (exit 2).
    #[error(transparent)]
    Kernel(#[from] KernelBlobError),
    /// The result file could not be written at the end (ENOSPC); `kept`
    /// says what the file holds instead (exit 1).
    #[error("cannot write the result to {path}: {source}; {kept}")]
    Unsaved {
        path: String,
        kept: String,
        #[source]
        source: std::io::Error,
    },
}

pub(crate) type Result<T> = std::result::Result<T, Error>;

impl From<hypclear_process::files::FileError> for Error {
    fn from(e: hypclear_process::files::FileError) -> Self {
        Error::Run(e.into())
    }
}

impl From<hypclear_kernel::external::SideError> for Error {
    fn from(e: hypclear_kernel::external::SideError) -> Self {
        use hypclear_kernel::external::SideError;
        match e {
            SideError::Unusable(why) => Error::Usage(why),
            SideError::Blob(e) => Error::Kernel(e),
        }
    }
}

impl From<hypclear_process::interrupt::Interrupted> for Error {
    fn from(e: hypclear_process::interrupt::Interrupted) -> Self {
        Error::Run(e.into())
    }
}

impl From<hypclear_process::interrupt::InstallError> for Error {
    fn from(e: hypclear_process::interrupt::InstallError) -> Self {
        Error::Run(e.into())
    }
}

impl Error {
    pub(crate) fn category(&self) -> Category {
        match self {
            Error::Usage(_) => Category::Usage,
            Error::Run(e) => e.category(),
            Error::Kernel(_) => Category::Environment,
            Error::Unsaved { .. } => Category::Run,
        }
    }

    /// Process exit status for this error (an interruption's by its signal).
    pub(crate) fn exit_code(&self) -> i32 {
        match self {
            Error::Run(e) => e.exit_code(),
            e => e.category().exit_code(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_and_kernel_errors_exit_2_run_errors_keep_theirs() {
        assert_eq!(Error::Usage(String::new()).exit_code(), 2);
        assert_eq!(
            Error::from(RunError::Verification(String::new())).exit_code(),
            EXIT_FAILED
        );
        assert_eq!(Error::from(RunError::Interrupted).exit_code(), 130);
    }
}
