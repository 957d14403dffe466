//! The CLI edge's error: each library crate's error, folded here (and only
//! here) into one exit status. Each message says what happened and what to
//! do about it.
use hypclear_kernel::blob::KernelBlobError;
pub(crate) use hypclear_process::exit::EXIT_FAILED;
use hypclear_process::exit::{Category, Failure};
pub(crate) use hypclear_vmm::error::Error as VmmError;

/// One variant per library crate whose errors reach the binary; each
/// keeps its own category. A VMM error sits at [`Error::Vmm`] whichever
/// crate passed it up, so one pattern finds an interruption.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// The VMM's errors, the one usage error among them (exit 2).
    #[error(transparent)]
    Vmm(VmmError),
    #[error(transparent)]
    Routines(hypclear_routines::error::Error),
    #[error(transparent)]
    Check(hypclear_check::error::Error),
    #[error(transparent)]
    Bench(hypclear_bench::error::Error),
    /// A kernel tree or kernel blob file that cannot be used (exit 2).
    #[error(transparent)]
    Kernel(#[from] KernelBlobError),
    /// The result file could not be written at the end (ENOSPC); `kept`
    /// says what the file holds instead (exit 1).
    #[error("cannot write the result to {}: {source}; {kept}", path.display())]
    Unsaved {
        path: std::path::PathBuf,
        kept: String,
        #[source]
        source: std::io::Error,
    },
}

pub(crate) type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// A bad command line (exit 2): the VMM's usage error, the one there is.
    pub(crate) fn usage(msg: String) -> Error {
        Error::Vmm(VmmError::Usage(msg))
    }
}

impl From<VmmError> for Error {
    fn from(e: VmmError) -> Self {
        Error::Vmm(e)
    }
}

impl From<hypclear_routines::error::Error> for Error {
    fn from(e: hypclear_routines::error::Error) -> Self {
        use hypclear_routines::error::Error as E;
        match e {
            E::Vmm(e) => Error::Vmm(e),
            e => Error::Routines(e),
        }
    }
}

impl From<hypclear_check::error::Error> for Error {
    fn from(e: hypclear_check::error::Error) -> Self {
        use hypclear_check::error::Error as E;
        match e {
            E::Vmm(e) => Error::Vmm(e),
            E::Routines(e) => e.into(),
            e => Error::Check(e),
        }
    }
}

impl From<hypclear_bench::error::Error> for Error {
    fn from(e: hypclear_bench::error::Error) -> Self {
        use hypclear_bench::error::Error as E;
        match e {
            E::Vmm(e) => Error::Vmm(e),
            E::Routines(e) => e.into(),
            E::Check(e) => e.into(),
            e => Error::Bench(e),
        }
    }
}

impl From<hypclear_kernel::external::SideError> for Error {
    fn from(e: hypclear_kernel::external::SideError) -> Self {
        use hypclear_kernel::external::SideError;
        match e {
            SideError::Unusable(why) => Error::usage(why),
            SideError::Blob(e) => Error::Kernel(e),
        }
    }
}

hypclear_vmm::lift_into_vmm!(
    Error: hypclear_vmm::error::lifted::FileError,
    hypclear_vmm::error::lifted::Interrupted,
    hypclear_vmm::error::lifted::InstallError
);

impl Failure for Error {
    fn category(&self) -> Category {
        match self {
            Error::Vmm(e) => e.category(),
            Error::Routines(e) => e.category(),
            Error::Check(e) => e.category(),
            Error::Bench(e) => e.category(),
            Error::Kernel(_) => Category::Environment,
            Error::Unsaved { .. } => Category::Run,
        }
    }
}

/// What the `--json` file holds when the final write fails: the last
/// checkpoint that could be written (finished cells of all), or what was
/// there before the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kept {
    Before,
    Cells(usize, usize),
}

impl Kept {
    fn describe(self) -> String {
        match self {
            Kept::Before => "no checkpoint could be written either: the file holds what was \
                             there before the run; free space and run again"
                .into(),
            Kept::Cells(done, of) => format!(
                "the file still holds the last checkpoint that could be written ({done} of \
                 {of} cells finished, \"partial\": true, \"partial_reason\" \"in progress\"): \
                 the process was not killed, it could not write the rest; free space and run again"
            ),
        }
    }
}

/// A failed final `--json` write, saying what the file holds instead.
pub(crate) fn unsaved(e: Error, json: Option<&std::path::Path>, kept: Kept) -> Error {
    let is_json = |p: &std::path::Path| json.is_some_and(|j| j == p);
    match e {
        Error::Vmm(VmmError::Io { path, source }) if is_json(&path) => Error::Unsaved {
            path,
            kept: kept.describe(),
            source,
        },
        e => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_and_kernel_errors_exit_2_run_errors_keep_theirs() {
        assert_eq!(Error::usage(String::new()).exit_code(), 2);
        assert_eq!(
            Error::from(hypclear_bench::error::Error::TooFewBlocks {
                cell: String::new(),
                kept: 0,
                of: 0,
                guests: 1
            })
            .exit_code(),
            EXIT_FAILED
        );
        assert_eq!(Error::from(VmmError::Interrupted).exit_code(), 130);
    }

    /// Issue 38: after ENOSPC the stale checkpoint claimed the process was
    /// killed, and the error said only "I/O error on FILE".
    #[test]
    fn a_failed_final_write_says_what_the_json_still_holds() {
        let enospc = || {
            Error::Vmm(VmmError::Io {
                path: "out.json".into(),
                source: std::io::Error::from_raw_os_error(libc::ENOSPC),
            })
        };
        let json = Some(std::path::Path::new("out.json"));
        let msg = unsaved(enospc(), json, Kept::Cells(3, 8)).to_string();
        assert!(
            msg.contains("out.json") && msg.contains("3 of 8 cells") && msg.contains("not killed"),
            "{msg}"
        );
        let msg = unsaved(enospc(), json, Kept::Before).to_string();
        assert!(msg.contains("before the run"), "{msg}");
        // A failed --csv is not described as the JSON.
        let other = unsaved(enospc(), Some(std::path::Path::new("x.json")), Kept::Before);
        assert!(matches!(other, Error::Vmm(_)));
        assert!(crate::bench::IN_PROGRESS.contains("could not write its final result"));
    }
}
