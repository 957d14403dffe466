//! Architecture-specific code. Pure builders (page tables, descriptor and
//! system-register encodings) compile on every host so their unit tests run
//! anywhere; the parts that talk to KVM exist only for the host architecture,
//! which re-exports them as `arch::*`.
pub mod aarch64;
pub mod x86_64;

/// CPU model and the features routines depend on (named as in the
/// architecture's `VARIANTS[].requires`), as the guest sees them. An emulated
/// CPU says so in `model`: its results are functional only.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CpuCaps {
    pub model: String,
    pub features: Vec<(String, bool)>,
}

impl CpuCaps {
    pub fn has(&self, f: &str) -> bool {
        self.features.iter().any(|(n, v)| n == f && *v)
    }
}

#[cfg(target_arch = "aarch64")]
pub use self::aarch64::host::*;
#[cfg(target_arch = "x86_64")]
pub use self::x86_64::host::*;
