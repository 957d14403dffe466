//! Host fingerprint: what machine, kernel and KVM produced a result.
use crate::arch;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HostInfo {
    pub arch: String,
    pub cpu_model: String,
    pub cpus: usize,
    pub kernel: String,
    /// pvm, vmx, svm, arm64-vhe, arm64-nvhe, arm64-protected, ...
    pub kvm_flavour: arch::KvmFlavour,
    /// npt, ept, shadow or stage2 (unknown in results from before it).
    #[serde(default)]
    pub kvm_paging: arch::PagingMode,
    pub counter: String,
    pub counter_khz: u64,
    pub hypclear_version: String,
    pub git_commit: String,
}

impl HostInfo {
    pub fn collect(caps: &arch::CpuCaps, counter_khz: u64) -> HostInfo {
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        let cpus = online_cpus();
        HostInfo {
            arch: std::env::consts::ARCH.into(),
            cpu_model: caps.model.clone(),
            cpus,
            kernel,
            kvm_flavour: arch::kvm_flavour(),
            kvm_paging: arch::kvm_paging(),
            counter: arch::COUNTER_NAME.into(),
            counter_khz,
            hypclear_version: env!("CARGO_PKG_VERSION").into(),
            git_commit: hypclear_guest::GIT_COMMIT.into(),
        }
    }

    /// Whether two results come from the same kind of host.
    pub fn same_host(&self, other: &HostInfo) -> bool {
        self.arch == other.arch
            && self.cpu_model == other.cpu_model
            && self.kernel == other.kernel
            && self.kvm_flavour == other.kvm_flavour
    }
}

/// The host's online CPUs, not this process's affinity (which a caller's
/// `taskset` narrows).
fn online_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n)
        .ok()
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, std::num::NonZero::get))
}
