//! Architecture-specific code. Pure builders (page tables, descriptor and
//! system-register encodings) compile on every host so their unit tests run
//! anywhere; the parts that talk to KVM exist only for the host architecture,
//! which re-exports them as `arch::*`.
pub mod aarch64;
pub mod x86_64;

/// CPU model and the features routines depend on (named as in the
/// architecture's `VARIANTS[].requires`), as the guest sees them. An emulated
/// CPU says so in `model`: its results are functional only.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct CpuCaps {
    pub model: String,
    pub features: Vec<(String, bool)>,
    /// The variant each kernel version would run on this CPU, per family.
    pub defaults: Vec<KernelPick>,
}

/// The variant of one routine family that a kernel version picks on this
/// CPU (its alternatives / run-time checks), and the feature that decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct KernelPick {
    pub family: &'static str,
    pub variant: &'static str,
    /// "6.12" or "6.1".
    pub kernel: &'static str,
    pub why: &'static str,
}

/// The kernel version whose pick is the default.
pub const DEFAULT_KERNEL: &str = "6.12";

impl CpuCaps {
    pub fn has(&self, f: &str) -> bool {
        self.features.iter().any(|(n, v)| n == f && *v)
    }

    /// The variant `kernel` ("6.12", "6.1") picks for `family`.
    pub fn kernel_pick(&self, family: &str, kernel: &str) -> Option<&KernelPick> {
        self.defaults
            .iter()
            .find(|p| p.family == family && p.kernel == kernel)
    }

    /// "memset orig (no FSRS), memcpy orig (no FSRM), ..." for `kernel`.
    pub fn kernel_picks_line(&self, kernel: &str) -> String {
        self.defaults
            .iter()
            .filter(|p| p.kernel == kernel)
            .map(|p| format!("{} {} ({})", p.family, p.variant, p.why))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(target_arch = "aarch64")]
pub use self::aarch64::host::*;
#[cfg(target_arch = "x86_64")]
pub use self::x86_64::host::*;
