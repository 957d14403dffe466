//! x86_64: long mode entered directly from the host, CPL 3 or CPL 0.
#[cfg(target_arch = "x86_64")]
pub mod host;
pub mod kernel;
pub mod layout;
pub mod paging;
#[cfg(target_arch = "x86_64")]
pub mod regs;
