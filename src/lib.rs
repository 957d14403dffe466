//! hypclear: verify and time hyp-style clear_page / memset / memcpy /
//! copy_page routines inside a KVM guest.
//!
//! Layout (one concern per module):
//! - [`cmd`]: the subcommands; each resolves its context once;
//! - [`vmm`]: the VM, its vCPUs and the hypercall loop, guest memory;
//! - [`blob`]: the guest blob, its link pipeline, relocation policy and ABI;
//! - [`arch`]: everything architecture-specific, behind a documented contract;
//! - [`routines`]: the routines under test, their variants and the one
//!   calling convention;
//! - [`check`]: the verification checker, suite and selftest;
//! - [`bench`]: benchmark plan, guest and host runs, reports, compare and
//!   the session-aware statistics behind them ([`bench::inference`]).
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod arch;
pub mod bench;
pub mod blob;
pub mod check;
pub mod cli;
pub mod cmd;
pub mod error;
pub mod exit;
pub mod kernel;
pub mod ktap;
pub mod output;
pub mod report;
pub mod routines;
pub mod units;
pub mod vmm;
