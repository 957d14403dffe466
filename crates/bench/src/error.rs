//! The bench crate's errors: plans no run can satisfy, files `compare`
//! cannot read or line up, a routine that got its region or its contract
//! wrong (no number is reported for it), and the errors of the crates
//! beneath. Paths in messages are the sanitized forms files are shown by.
use crate::routines::Routine;
use crate::units::format_size;
use crate::vmm::Breach;
use hypclear_process::exit::Category;
use thiserror::Error;

pub use crate::check::error::Error as CheckError;
pub use crate::routines::error::Error as RoutinesError;
pub use crate::vmm::error::{Error as VmmError, GuestFailure};
pub use hypclear_process::exit::Failure;

#[derive(Debug, Error)]
pub enum Error {
    // ---- the plan (exit 2, before KVM is touched) ----
    #[error("--vcpus {vcpus} is out of range: use 1 to {max}")]
    Vcpus { vcpus: u64, max: u64 },
    #[error(
        "-s {} x {vcpus} vCPU(s) needs {} of guest RAM, more than the largest guest RAM ({}); \
         use a smaller -s or fewer --vcpus",
        format_size(*size), format_size(*need), format_size(*max)
    )]
    BeyondRam {
        size: u64,
        vcpus: u64,
        need: u64,
        max: u64,
    },
    #[error(
        "--mem {} is too small for -s {} x {vcpus} vCPU(s): use --mem {} or more (or leave --mem out)",
        format_size(*mem), format_size(*size), format_size(*need)
    )]
    MemTooSmall {
        mem: u64,
        size: u64,
        vcpus: u64,
        need: u64,
    },
    #[error(
        "-s {} is larger than the largest guest RAM ({}); pick a size up to it",
        format_size(*size), format_size(*max)
    )]
    SizeTooLarge { size: u64, max: u64 },
    #[error("-s {size} is not a whole number of 4KB pages; bench sizes must be (e.g. -s 256MB)")]
    SizeNotPages { size: u64 },
    #[error("-l, --repeats and --sessions must be at least 1")]
    ZeroCount,
    #[error(
        "--max-runs {max_runs} is below --repeats {repeats}: the cap counts every measured run, \
         undisturbed or not; use --max-runs {repeats} or more"
    )]
    MaxRuns { max_runs: u64, repeats: u64 },
    #[error(
        "--max-warmup {max_warmup} is below the steady-state window ({window} runs) or --warmup \
         {warmup}: use --max-warmup {} or more, or 0 for exactly --warmup runs",
        (*window).max(*warmup)
    )]
    MaxWarmup {
        max_warmup: u64,
        window: u64,
        warmup: u64,
    },
    #[error("--max-warmup: {0}")]
    WarmupRule(String),
    #[error("unknown variant `{name}` for {routine}; choose all or one of: {}", known.join(", "))]
    UnknownVariant {
        routine: Routine,
        name: String,
        known: Vec<&'static str>,
    },
    #[error(
        "{routine} always copies {} per call: use -k 4KB (or bench memcpy for other chunk sizes)",
        format_size(*fixed)
    )]
    FixedChunk { routine: Routine, fixed: u64 },
    #[error("-s {} is not a multiple of -k {}", format_size(*size), format_size(*chunk))]
    NotMultiple { size: u64, chunk: u64 },
    #[error("{routine} works on whole pages: -k {chunk} is not a multiple of 4096")]
    ChunkNotPages { routine: Routine, chunk: u64 },
    #[error("nothing to run for {routine} with -f {filter}")]
    NothingToRun { routine: Routine, filter: String },

    // ---- compare and plot (exit 2) ----
    #[error(
        "{file} is not a hypclear bench JSON ({why}); write one with `hypclear bench ... --json FILE`"
    )]
    NotBenchJson { file: String, why: String },
    #[error(
        "{file}: schema_version {value} is not a version number (0, 1, ...); a damaged or \
         hand-edited file? Re-run the bench"
    )]
    BadSchemaVersion { file: String, value: String },
    #[error(
        "{file} has schema_version {version}, newer than this hypclear reads (up to \
         {supported}); compare it with the hypclear that wrote it, or a newer one"
    )]
    NewerSchema {
        file: String,
        version: u64,
        supported: u64,
    },
    #[error(
        "{file}: row {row}, {side} sample of session {session} run {run}: throughput {value:e} \
         bytes/s is not a rate a machine measures (it must be finite, above 0 and below 10 TB/s); \
         a damaged or hand-edited file? Re-run the bench or drop the file"
    )]
    ImplausibleRate {
        file: String,
        row: String,
        side: &'static str,
        session: u64,
        run: u64,
        value: f64,
    },
    #[error("compare needs a base file")]
    NoBase,
    #[error("--alpha {0} must be between 0 and 0.5")]
    Alpha(f64),
    #[error("--margin {0} must be a fraction between 0 and 1 (0.02 = 2%)")]
    Margin(f64),
    #[error(
        "{file} comes from a different host than {base} ({host} vs {base_host}); pass \
         --per-host for one table per host, or --allow-different-hosts to compare anyway"
    )]
    DifferentHosts {
        file: String,
        base: String,
        host: String,
        base_host: String,
    },
    #[error("no row lines up between the sides: {notes}")]
    NothingLinesUp { notes: String },
    #[error(
        "{file} holds {count} side(s) ({names}): one file compares two or more (`hypclear bench \
         ... --config both`, or several --kernel-tree/--blob, or --builtin beside one); to \
         compare runs, pass two files"
    )]
    OneSide {
        file: String,
        count: usize,
        names: String,
    },
    #[error(
        "the axes do not line up: {has} has `{cell}` but {lacks} does not; run both benches \
         with the same options"
    )]
    AxesDiffer {
        has: String,
        cell: String,
        lacks: String,
    },
    #[error("nothing to plot: no cell has samples")]
    NothingToPlot,

    // ---- a routine that got it wrong: no number for it (exit 1) ----
    #[error(
        "verification failed: the routine broke the calling contract ({breach}); no number is \
         reported for a wrong routine"
    )]
    Contract { breach: Breach },
    #[error(
        "verification failed: {cell}: the measured region is wrong ({breakdown}: {bad_bytes} bad \
         bytes{}); no number is reported for a wrong routine",
        first_bad.map(|o| format!(", first at offset {o}")).unwrap_or_default()
    )]
    WrongRegion {
        cell: String,
        breakdown: &'static str,
        bad_bytes: u64,
        first_bad: Option<i64>,
    },
    #[error(
        "verification failed: {cell}: A/B kept {kept} blocks of {of} in {guests} guests (the \
         rest were disturbed): too few to report"
    )]
    TooFewBlocks {
        cell: String,
        kept: usize,
        of: u64,
        guests: usize,
    },

    // ---- the crates beneath ----
    #[error(transparent)]
    Check(CheckError),
    #[error(transparent)]
    Routines(RoutinesError),
    #[error(transparent)]
    Vmm(#[from] VmmError),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Failure for Error {
    fn category(&self) -> Category {
        use Error::*;
        match self {
            Contract { .. } | WrongRegion { .. } | TooFewBlocks { .. } => Category::Verification,
            Check(e) => e.category(),
            Routines(e) => e.category(),
            Vmm(e) => e.category(),
            _ => Category::Usage,
        }
    }
}

impl Error {
    /// A fault of hypclear itself (exit 2, "please report it").
    pub fn internal(what: impl Into<String>) -> Error {
        Error::Vmm(VmmError::Internal(what.into()))
    }

    /// A guest that broke the protocol in what it reported.
    pub fn protocol(detail: String) -> Error {
        Error::Vmm(VmmError::Guest(Box::new(GuestFailure::protocol(detail))))
    }
}

/// The VMM's errors sit at [`Error::Vmm`] whichever crate passed them up,
/// so one pattern finds a guest failure or an interruption.
impl From<CheckError> for Error {
    fn from(e: CheckError) -> Self {
        match e {
            CheckError::Vmm(e) => Error::Vmm(e),
            CheckError::Routines(e) => e.into(),
            e => Error::Check(e),
        }
    }
}

impl From<RoutinesError> for Error {
    fn from(e: RoutinesError) -> Self {
        match e {
            RoutinesError::Vmm(e) => Error::Vmm(e),
            e => Error::Routines(e),
        }
    }
}

crate::vmm::lift_into_vmm!(Error);
