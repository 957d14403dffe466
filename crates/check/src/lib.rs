//! Verification: seeded patterns and the checker, the suite of checks run
//! in a VM, and the selftest that proves the checker catches broken routines.
pub mod report;

// The crates below, under the names the modules use.
use hypclear_arch as arch;
use hypclear_format::{ktap, table, units};
use hypclear_kernel as kernel;
use hypclear_process::interrupt;
use hypclear_routines as routines;
use hypclear_vmm as vmm;
use hypclear_vmm::blob;
pub mod checker;
pub mod error;
pub mod hostile;
pub mod reclaim;
pub mod record;
pub mod selftest;
mod stray;
pub mod suite;
pub mod verify;
