//! pKVM protected VMs (Linux 7.1+, host booted with
//! `kvm-arm.mode=protected`): the VM type bit, VM creation, and the KVM
//! mode the host runs in. The mode parsing is pure and compiles on every
//! host; creating a VM exists only on aarch64.
use serde::Serialize;

/// `KVM_VM_TYPE_ARM_PROTECTED`: bit 31 of KVM_CREATE_VM's type, beside the
/// IPA size in bits 7:0 (include/uapi/linux/kvm.h, Linux 7.3:
/// `#define KVM_VM_TYPE_ARM_PROTECTED (1UL << 31)`); kvm-bindings 0.14
/// predates it.
pub const KVM_VM_TYPE_ARM_PROTECTED: u64 = 1 << 31;

/// How KVM/arm64 runs on this host, and where that was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KvmArmMode {
    /// `protected`, `nvhe`, `nested`, `none`, ... as the kernel spells it.
    pub mode: String,
    /// `/sys/module/kvm/parameters/mode` or `/proc/cmdline`.
    pub source: &'static str,
}

/// The mode from the module parameter (its file's text, if readable),
/// else the last `kvm-arm.mode=` on the kernel command line.
pub(crate) fn mode_from(sys_param: Option<&str>, cmdline: &str) -> Option<KvmArmMode> {
    if let Some(m) = sys_param.map(str::trim).filter(|m| !m.is_empty()) {
        return Some(KvmArmMode {
            mode: m.to_string(),
            source: "/sys/module/kvm/parameters/mode",
        });
    }
    cmdline
        .split_whitespace()
        .rev()
        .find_map(|w| w.strip_prefix("kvm-arm.mode="))
        .map(|m| KvmArmMode {
            mode: m.to_string(),
            source: "/proc/cmdline",
        })
}

/// This host's KVM/arm64 mode (None: neither source names one).
pub fn kvm_arm_mode() -> Option<KvmArmMode> {
    let sys = std::fs::read_to_string("/sys/module/kvm/parameters/mode").ok();
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    mode_from(sys.as_deref(), &cmdline)
}

/// KVM_CREATE_VM's type for `ty` with an IPA size of `ipa_bits` (0: KVM's
/// default 40 bits).
pub(crate) fn vm_type_word(ty: crate::VmType, ipa_bits: u32) -> u64 {
    let ipa = u64::from(ipa_bits) & 0xff;
    match ty {
        crate::VmType::Normal => ipa,
        crate::VmType::Protected => ipa | KVM_VM_TYPE_ARM_PROTECTED,
    }
}

/// KVM_CREATE_VM of type `ty`, with the IPA size kvm-ioctls uses for an
/// ordinary VM (the host's limit where KVM_CAP_ARM_VM_IPA_SIZE exists).
#[cfg(target_arch = "aarch64")]
pub fn create_vm(
    kvm: &kvm_ioctls::Kvm,
    ty: crate::VmType,
) -> super::error::Result<kvm_ioctls::VmFd> {
    use super::error::Error;
    if ty == crate::VmType::Normal {
        return kvm.create_vm().map_err(Error::kvm("KVM_CREATE_VM"));
    }
    let ipa = if kvm.check_extension(kvm_ioctls::Cap::ArmVmIPASize) {
        u32::try_from(kvm.get_host_ipa_limit()).unwrap_or(0)
    } else {
        0
    };
    let word = vm_type_word(ty, ipa);
    kvm.create_vm_with_type(word)
        .map_err(|source| Error::VmType { word, source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::VmType;

    #[test]
    fn the_mode_comes_from_the_parameter_else_the_command_line() {
        let m = mode_from(Some("protected\n"), "kvm-arm.mode=nvhe").unwrap();
        assert_eq!(
            (m.mode.as_str(), m.source),
            ("protected", "/sys/module/kvm/parameters/mode")
        );
        let m = mode_from(
            None,
            "console=ttyAMA0 kvm-arm.mode=nvhe kvm-arm.mode=protected",
        )
        .unwrap();
        assert_eq!((m.mode.as_str(), m.source), ("protected", "/proc/cmdline"));
        assert_eq!(mode_from(Some(" "), "quiet"), None);
    }

    #[test]
    fn the_protected_bit_goes_beside_the_ipa_size() {
        assert_eq!(vm_type_word(VmType::Protected, 40), 0x8000_0028);
        assert_eq!(vm_type_word(VmType::Normal, 40), 40);
        assert_eq!(vm_type_word(VmType::Protected, 0), 0x8000_0000);
    }
}
