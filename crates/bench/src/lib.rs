//! `hypclear bench`: perf-bench-style throughput of the blob's routines
//! inside the guest, side by side with the same objects on the host.
//!
//! Method (as in the seed discussion, made rigorous after Kalibera & Jones):
//! in each of `--sessions` fresh VMs, at least `--warmup` unmeasured runs,
//! extended until the throughput is steady (up to `--max-warmup`), then
//! `--repeats` measured runs; every timed pass starts from the `--cache`
//! precondition, guest and host alike. Link configurations alternate their
//! order by session (ABBA). Guest
//! timestamps come from the guest counter around the call loop and are
//! converted with the vCPU's counter frequency. An untimed verification
//! pass before and after every session's runs checks the routine, so a fast
//! but wrong routine never produces a number (and no timed run starts from
//! a state the check left behind); each run carries its KVM binary-stats deltas and runs disturbed
//! by instruction emulation are flagged and left out of the statistics.

// The crates below, under the names the modules use.
use hypclear_arch as arch;
use hypclear_check as check;
use hypclear_format::{ktap, table, text, units};
use hypclear_kernel as kernel;
use hypclear_process::{files, interrupt};
use hypclear_routines as routines;
use hypclear_vmm as vmm;
use hypclear_vmm::blob;
pub mod ab;
pub mod compare;
pub mod error;
pub mod explain;
/// Fuzz harnesses of `compare`'s input and the KTAP/rst writers: for
/// `fuzz/` (feature `fuzzing`) and the corpus replay tests.
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz;
pub(crate) mod guest;
pub(crate) mod host;
pub(crate) mod inference;
mod model;
pub mod plan;
pub mod precision;
pub mod report;
mod run;
pub(crate) mod sched;
pub mod sequence;
pub mod sides;
pub mod stats;

pub use plan::{CellSpec, Plan, PlanSide};

pub use sequence::{SessionRuns, Steady};

pub use model::*;
pub use run::{IN_PROGRESS, check_memory, run, run_ab};
