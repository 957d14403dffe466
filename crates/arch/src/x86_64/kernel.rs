//! Which routine the Linux kernel itself would run on this CPU, from the
//! guest's CPUID (pure, so it is unit tested on every host).
//!
//! The string-operation features come from CPUID except REP_GOOD, which
//! Linux synthesizes per vendor (arch/x86/kernel/cpu/{intel,amd,hygon,
//! centaur,zhaoxin}.c, the same rule in 6.1 and 6.12):
//! - Intel: family 6 (cleared again if IA32_MISC_ENABLE has fast strings
//!   off, which CPUID cannot show; assumed on);
//! - AMD: family >= 0x10, or family 0xf with CPUID.1:EAX in
//!   [0x0f48, 0x0f50) or >= 0x0f58 (K8 revision C and later);
//! - Hygon: always; Zhaoxin: family >= 6;
//! - Centaur: family 6 model >= 0xf, or family >= 7.
//!
//! 6.12 also sets FSRS on AMD CPUs that have FSRM ("AMD FSRM also implies
//! FSRS", arch/x86/kernel/cpu/amd.c); 6.1 has no FSRS at all.

/// The CPUID words the decision needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CpuidView {
    /// CPUID.0: EBX, EDX, ECX as the 12-byte vendor string.
    pub vendor: [u8; 12],
    /// CPUID.1:EAX (family / model / stepping signature).
    pub leaf1_eax: u32,
    /// CPUID.(7,0):EBX (bit 9 ERMS).
    pub leaf7_ebx: u32,
    /// CPUID.(7,0):EDX (bit 4 FSRM).
    pub leaf7_edx: u32,
    /// CPUID.(7,1):EAX (bit 11 FSRS).
    pub leaf7_1_eax: u32,
}

pub use crate::KernelVersion;
use crate::{Family, KernelPick};

/// The x86 vendors whose CPU-setup code Linux runs (its `cpu_dev`s that
/// matter here), by CPUID.0's vendor string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Vendor {
    Intel,
    Amd,
    Hygon,
    Zhaoxin,
    Centaur,
}

impl Vendor {
    pub const ALL: [Vendor; 5] = [
        Vendor::Intel,
        Vendor::Amd,
        Vendor::Hygon,
        Vendor::Zhaoxin,
        Vendor::Centaur,
    ];

    fn of(id: &[u8; 12]) -> Option<Vendor> {
        Some(match id {
            b"GenuineIntel" => Vendor::Intel,
            b"AuthenticAMD" => Vendor::Amd,
            b"HygonGenuine" => Vendor::Hygon,
            b"  Shanghai  " => Vendor::Zhaoxin,
            b"CentaurHauls" => Vendor::Centaur,
            _ => return None,
        })
    }

    /// The tree's C that sets this vendor's CPUs up (the `init_<vendor>`
    /// whose feature implications a kernel tree is read for).
    pub fn setup_file(self) -> &'static str {
        match self {
            Vendor::Intel => "arch/x86/kernel/cpu/intel.c",
            Vendor::Amd => "arch/x86/kernel/cpu/amd.c",
            Vendor::Hygon => "arch/x86/kernel/cpu/hygon.c",
            Vendor::Zhaoxin => "arch/x86/kernel/cpu/zhaoxin.c",
            Vendor::Centaur => "arch/x86/kernel/cpu/centaur.c",
        }
    }

    /// The function of [`Vendor::setup_file`] that sets a CPU up.
    pub fn setup_function(self) -> &'static str {
        match self {
            Vendor::Intel => "init_intel",
            Vendor::Amd => "init_amd",
            Vendor::Hygon => "init_hygon",
            Vendor::Zhaoxin => "init_zhaoxin",
            Vendor::Centaur => "init_centaur",
        }
    }
}

/// The kernel's view of the string-operation features.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StringFeatures {
    pub erms: bool,
    pub fsrm: bool,
    /// FSRS as CPUID reports it (before the 6.12 AMD rule).
    pub fsrs: bool,
    /// Synthesized by Linux from vendor and family (see the module docs).
    pub rep_good: bool,
    pub amd: bool,
    pub vendor: Option<Vendor>,
}

impl CpuidView {
    /// Linux's x86 family: the base family, plus the extended family when
    /// the base is 0xf.
    pub(crate) fn family(&self) -> u32 {
        let base = (self.leaf1_eax >> 8) & 0xf;
        if base == 0xf {
            base + ((self.leaf1_eax >> 20) & 0xff)
        } else {
            base
        }
    }

    /// Linux's x86 model: the extended model is added for family >= 6.
    pub(crate) fn model(&self) -> u32 {
        let m = (self.leaf1_eax >> 4) & 0xf;
        if self.family() >= 6 {
            m | (((self.leaf1_eax >> 16) & 0xf) << 4)
        } else {
            m
        }
    }

    pub(crate) fn features(&self) -> StringFeatures {
        let family = self.family();
        let v = &self.vendor;
        let amd = v == b"AuthenticAMD";
        let rep_good = match v {
            b"GenuineIntel" => family == 6,
            b"AuthenticAMD" => {
                let sig = self.leaf1_eax;
                family >= 0x10
                    || (0x0f48..0x0f50).contains(&sig)
                    || (family == 0xf && sig >= 0x0f58)
            }
            b"HygonGenuine" => true,
            b"  Shanghai  " => family >= 6,
            b"CentaurHauls" => (family == 6 && self.model() >= 0xf) || family >= 7,
            _ => false,
        };
        StringFeatures {
            erms: self.leaf7_ebx & (1 << 9) != 0,
            fsrm: self.leaf7_edx & (1 << 4) != 0,
            fsrs: self.leaf7_1_eax & (1 << 11) != 0,
            rep_good,
            amd,
            vendor: Vendor::of(&self.vendor),
        }
    }
}

impl StringFeatures {
    /// FSRS as the 6.12 kernel sees it (AMD: implied by FSRM).
    pub fn fsrs_612(&self) -> bool {
        self.fsrs || (self.amd && self.fsrm)
    }
}

/// The variant of `family` that the kernel `version` runs on a CPU with
/// features `f`, and the alternative that decides it.
pub fn kernel_pick(family: Family, f: &StringFeatures, version: KernelVersion) -> KernelPick {
    use Family::*;
    use KernelVersion::*;
    let (variant, why) = match (family, version) {
        // page_64.h alternative_call_2: ERMS beats REP_GOOD (both versions).
        (ClearPage, _) if f.erms => ("erms", "ERMS"),
        (ClearPage, _) if f.rep_good => ("rep", "REP_GOOD"),
        (ClearPage, _) => ("orig", "neither ERMS nor REP_GOOD"),
        // memset_64.S
        (Memset, V6_12) if f.fsrs_612() => ("erms", "FSRS"),
        (Memset, V6_12) => ("orig", "no FSRS"),
        (Memset, V6_1) if f.erms => ("erms", "ERMS"),
        (Memset, V6_1) if f.rep_good => ("rep_good", "REP_GOOD"),
        (Memset, V6_1) => ("orig", "neither ERMS nor REP_GOOD"),
        // memcpy_64.S
        (Memcpy, V6_12) if f.fsrm => ("fsrm", "FSRM"),
        (Memcpy, V6_12) => ("orig", "no FSRM"),
        (Memcpy, V6_1) if f.erms => ("fsrm", "ERMS"),
        (Memcpy, V6_1) if f.rep_good => ("rep_good", "REP_GOOD"),
        (Memcpy, V6_1) => ("orig", "neither ERMS nor REP_GOOD"),
        // copy_page_64.S
        (CopyPage, _) if f.rep_good => ("rep", "REP_GOOD"),
        (CopyPage, _) => ("regs", "no REP_GOOD"),
    };
    KernelPick {
        family,
        variant,
        kernel: version,
        why,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Family::*;
    use KernelVersion::*;

    fn cpu(
        vendor: &[u8; 12],
        leaf1_eax: u32,
        erms: bool,
        fsrm: bool,
        fsrs: bool,
    ) -> StringFeatures {
        CpuidView {
            vendor: *vendor,
            leaf1_eax,
            leaf7_ebx: u32::from(erms) << 9,
            leaf7_edx: u32::from(fsrm) << 4,
            leaf7_1_eax: u32::from(fsrs) << 11,
        }
        .features()
    }

    fn pick(f: &StringFeatures, fam: Family, v: KernelVersion) -> &'static str {
        kernel_pick(fam, f, v).variant
    }

    #[test]
    fn family_and_model_follow_linux() {
        // Zen 3 EPYC: base family 0xf + extended 0xa = 0x19, model 0x01.
        let c = CpuidView {
            leaf1_eax: 0x00a0_0f11,
            ..Default::default()
        };
        assert_eq!((c.family(), c.model()), (0x19, 0x01));
        // Intel Sapphire Rapids: family 6, model 0x8f.
        let c = CpuidView {
            leaf1_eax: 0x0008_06f8,
            ..Default::default()
        };
        assert_eq!((c.family(), c.model()), (6, 0x8f));
    }

    #[test]
    fn rep_good_is_synthesized_per_vendor() {
        assert!(cpu(b"GenuineIntel", 0x0008_06f8, false, false, false).rep_good);
        // Intel family 15 (Pentium 4) does not get it.
        assert!(!cpu(b"GenuineIntel", 0x0000_0f41, false, false, false).rep_good);
        assert!(cpu(b"AuthenticAMD", 0x00a0_0f11, false, false, false).rep_good);
        // K8 before revision C does not; C+ does.
        assert!(!cpu(b"AuthenticAMD", 0x0000_0f40, false, false, false).rep_good);
        assert!(cpu(b"AuthenticAMD", 0x0000_0f48, false, false, false).rep_good);
        assert!(!cpu(b"AuthenticAMD", 0x0000_0f51, false, false, false).rep_good);
        assert!(cpu(b"HygonGenuine", 0x0090_0f01, false, false, false).rep_good);
        assert!(!cpu(b"CentaurHauls", 0x0000_06a0, false, false, false).rep_good);
        assert!(cpu(b"CentaurHauls", 0x0000_06f0, false, false, false).rep_good);
        assert!(!cpu(b"SomeOtherCPU", 0x0008_06f8, true, true, true).rep_good);
    }

    #[test]
    fn the_vendor_names_its_setup_code() {
        assert_eq!(
            cpu(b"AuthenticAMD", 0x00a0_0f11, true, true, false).vendor,
            Some(Vendor::Amd)
        );
        assert_eq!(
            cpu(b"  Shanghai  ", 0x0000_06f0, false, false, false).vendor,
            Some(Vendor::Zhaoxin)
        );
        assert_eq!(cpu(b"SomeOtherCPU", 0, false, false, false).vendor, None);
        assert_eq!(Vendor::Amd.setup_file(), "arch/x86/kernel/cpu/amd.c");
        assert_eq!(Vendor::Hygon.setup_function(), "init_hygon");
    }

    #[test]
    fn epyc_host_view_and_pvm_guest_view() {
        // The host: ERMS, FSRM, no FSRS in CPUID, REP_GOOD synthesized.
        let host = cpu(b"AuthenticAMD", 0x00a0_0f11, true, true, false);
        assert_eq!(pick(&host, Memset, V6_12), "erms"); // FSRS implied by FSRM on AMD
        assert_eq!(pick(&host, Memcpy, V6_12), "fsrm");
        assert_eq!(pick(&host, Memset, V6_1), "erms");
        assert_eq!(pick(&host, ClearPage, V6_12), "erms");
        assert_eq!(pick(&host, CopyPage, V6_12), "rep");
        // The PVM guest: KVM hides ERMS and FSRM.
        let guest = cpu(b"AuthenticAMD", 0x00a0_0f11, false, false, false);
        assert_eq!(pick(&guest, Memset, V6_12), "orig");
        assert_eq!(pick(&guest, Memcpy, V6_12), "orig");
        assert_eq!(pick(&guest, Memset, V6_1), "rep_good");
        assert_eq!(pick(&guest, Memcpy, V6_1), "rep_good");
        assert_eq!(pick(&guest, ClearPage, V6_1), "rep");
    }

    #[test]
    fn intel_without_fsrs_runs_memset_orig_on_612() {
        let f = cpu(b"GenuineIntel", 0x0008_06f8, true, true, false);
        assert_eq!(pick(&f, Memset, V6_12), "orig");
        assert_eq!(pick(&f, Memset, V6_1), "erms");
        let f = cpu(b"GenuineIntel", 0x0008_06f8, true, true, true);
        assert_eq!(pick(&f, Memset, V6_12), "erms");
    }

    #[test]
    fn nothing_at_all_takes_the_orig_and_regs_paths() {
        let f = cpu(b"SomeOtherCPU", 0x0000_0f41, false, false, false);
        for v in [V6_1, V6_12] {
            assert_eq!(pick(&f, Memset, v), "orig");
            assert_eq!(pick(&f, Memcpy, v), "orig");
            assert_eq!(pick(&f, ClearPage, v), "orig");
            assert_eq!(pick(&f, CopyPage, v), "regs");
        }
        // clear_pages has no pick of its own: it is not a family.
        assert!(Family::from_name("clear_pages").is_none());
    }
}
