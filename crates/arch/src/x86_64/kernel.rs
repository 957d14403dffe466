//! The CPU as the Linux kernel sees it, from the guest's CPUID (pure, so
//! it is unit tested on every host). Which routine a kernel runs with it is
//! read from that kernel's own tree (`hypclear_kernel::picks`), not here.
//!
//! The string-operation features come from CPUID except REP_GOOD, which
//! Linux synthesizes per vendor (arch/x86/kernel/cpu/{intel,amd,hygon,
//! centaur,zhaoxin}.c). That rule is kept here as a documented CPU rule,
//! not read from a tree: it compares family and signature ranges (C a
//! parser would have to evaluate), it has been the same from 6.1 to 7.3,
//! and the guest's feature list needs it without any tree:
//! - Intel: family 6 (cleared again if IA32_MISC_ENABLE has fast strings
//!   off, which CPUID cannot show; assumed on);
//! - AMD: family >= 0x10, or family 0xf with CPUID.1:EAX in
//!   [0x0f48, 0x0f50) or >= 0x0f58 (K8 revision C and later);
//! - Hygon: always; Zhaoxin: family >= 6;
//! - Centaur: family 6 model >= 0xf, or family >= 7.
//!
//! Implications between CPUID features that a kernel version adds (6.12's
//! "AMD FSRM also implies FSRS" in amd.c) are read from the tree: see
//! [`Vendor::setup_file`].

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
    /// FSRS as CPUID reports it (a tree may imply it from others).
    pub fsrs: bool,
    /// Synthesized by Linux from vendor and family (see the module docs).
    pub rep_good: bool,
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
        let vendor = Vendor::of(&self.vendor);
        let rep_good = match vendor {
            Some(Vendor::Intel) => family == 6,
            Some(Vendor::Amd) => {
                let sig = self.leaf1_eax;
                family >= 0x10
                    || (0x0f48..0x0f50).contains(&sig)
                    || (family == 0xf && sig >= 0x0f58)
            }
            Some(Vendor::Hygon) => true,
            Some(Vendor::Zhaoxin) => family >= 6,
            Some(Vendor::Centaur) => (family == 6 && self.model() >= 0xf) || family >= 7,
            None => false,
        };
        StringFeatures {
            erms: self.leaf7_ebx & (1 << 9) != 0,
            fsrm: self.leaf7_edx & (1 << 4) != 0,
            fsrs: self.leaf7_1_eax & (1 << 11) != 0,
            rep_good,
            vendor,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // FSRS is CPUID's alone here: an implication is a tree's to say.
        let f = cpu(b"AuthenticAMD", 0x00a0_0f11, true, true, false);
        assert!(f.fsrm && !f.fsrs && f.erms && f.rep_good);
    }
}
