//! Architecture-specific code. Pure builders (page tables, descriptor and
//! system-register encodings) compile on every host so their unit tests run
//! anywhere; the parts that talk to KVM exist only for the host architecture,
//! which re-exports them as `arch::*`.
pub mod aarch64;
pub mod x86_64;

#[cfg(target_arch = "aarch64")]
pub use self::aarch64::host::*;
#[cfg(target_arch = "x86_64")]
pub use self::x86_64::host::*;
