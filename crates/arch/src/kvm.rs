//! Which KVM runs the guest: the flavour (how guest code reaches the CPU)
//! and the paging mode (how guest-physical memory is translated), as KVM
//! reports them. Typed, so `--cpl auto` and result comparisons match on
//! variants; serialized as the names earlier JSON used.
use serde::{Deserialize, Serialize};

/// How KVM runs guest code on this host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum KvmFlavour {
    /// Intel VT-x (kvm_intel): CPL 0 guest code runs natively.
    #[serde(rename = "vmx")]
    Vmx,
    /// AMD-V (kvm_amd): CPL 0 guest code runs natively.
    #[serde(rename = "svm")]
    Svm,
    /// Paravirtual KVM without VMX/SVM (kvm_pvm): CPL 0 is emulated.
    #[serde(rename = "pvm")]
    Pvm,
    #[serde(rename = "arm64-vhe")]
    Arm64Vhe,
    #[serde(rename = "arm64-nvhe")]
    Arm64Nvhe,
    #[serde(rename = "arm64-protected")]
    Arm64Protected,
    /// `kvm-arm.mode=nested`: VHE with nested virtualization (guests may
    /// start at EL2).
    #[serde(rename = "arm64-nested")]
    Arm64Nested,
    /// `kvm-arm.mode=none`: KVM is off.
    #[serde(rename = "arm64-none")]
    Arm64None,
    /// KVM/arm64 in a mode this build cannot tell.
    #[serde(rename = "arm64")]
    Arm64,
    /// No known KVM module (or a name a newer hypclear wrote).
    #[serde(rename = "unknown", other)]
    Unknown,
}

impl KvmFlavour {
    pub fn name(self) -> &'static str {
        match self {
            KvmFlavour::Vmx => "vmx",
            KvmFlavour::Svm => "svm",
            KvmFlavour::Pvm => "pvm",
            KvmFlavour::Arm64Vhe => "arm64-vhe",
            KvmFlavour::Arm64Nvhe => "arm64-nvhe",
            KvmFlavour::Arm64Protected => "arm64-protected",
            KvmFlavour::Arm64Nested => "arm64-nested",
            KvmFlavour::Arm64None => "arm64-none",
            KvmFlavour::Arm64 => "arm64",
            KvmFlavour::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for KvmFlavour {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How guest-physical addresses are translated for the guest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PagingMode {
    /// Intel extended page tables (kvm_intel `ept=Y`).
    Ept,
    /// AMD nested page tables (kvm_amd `npt=Y`).
    Npt,
    /// KVM shadows the guest's page tables (`ept=N`/`npt=N`, and PVM).
    Shadow,
    /// Arm stage-2 translation (the only mode KVM/arm64 has).
    Stage2,
    /// Not known (or results written before hypclear recorded it).
    #[default]
    #[serde(other)]
    Unknown,
}

impl std::fmt::Display for PagingMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PagingMode::Ept => "EPT",
            PagingMode::Npt => "NPT",
            PagingMode::Shadow => "shadow paging",
            PagingMode::Stage2 => "stage 2",
            PagingMode::Unknown => "paging unknown",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flavours_keep_the_names_earlier_results_used() {
        for f in [
            KvmFlavour::Vmx,
            KvmFlavour::Svm,
            KvmFlavour::Pvm,
            KvmFlavour::Arm64Vhe,
            KvmFlavour::Arm64Nvhe,
            KvmFlavour::Arm64Protected,
            KvmFlavour::Arm64None,
            KvmFlavour::Arm64,
            KvmFlavour::Unknown,
        ] {
            let json = serde_json::to_value(f).unwrap();
            assert_eq!(json, serde_json::json!(f.name()));
            assert_eq!(serde_json::from_value::<KvmFlavour>(json).unwrap(), f);
        }
        let newer: KvmFlavour = serde_json::from_value(serde_json::json!("tdx")).unwrap();
        assert_eq!(newer, KvmFlavour::Unknown);
    }

    #[test]
    fn paging_modes_serialize_lowercase() {
        assert_eq!(serde_json::to_value(PagingMode::Npt).unwrap(), "npt");
        assert_eq!(serde_json::to_value(PagingMode::Shadow).unwrap(), "shadow");
        let old: PagingMode = serde_json::from_value(serde_json::json!("x")).unwrap();
        assert_eq!(old, PagingMode::Unknown);
    }
}
