//! hypclear: verify and time hyp-style clear_page / memset / memcpy /
//! copy_page routines inside a KVM guest.
pub mod abi;
pub mod app;
pub mod arch;
pub mod bench;
pub mod bench_report;
pub mod blob;
pub mod cli;
pub mod compare;
pub mod error;
pub mod host;
pub mod hostbench;
pub mod hyprel;
pub mod inference;
pub mod kvmstats;
pub mod memory;
pub mod privilege;
pub mod report;
pub mod routines;
pub mod selftest;
pub mod stats;
pub mod suite;
pub mod units;
pub mod verify;
pub mod vm;
pub mod watchdog;
