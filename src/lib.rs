//! hypclear: verify and time hyp-style clear_page / memset / memcpy /
//! copy_page routines inside a KVM guest.
pub mod abi;
pub mod arch;
pub mod blob;
pub mod error;
pub mod hyprel;
pub mod kvmstats;
pub mod memory;
pub mod stats;
pub mod units;
pub mod vm;
pub mod watchdog;
