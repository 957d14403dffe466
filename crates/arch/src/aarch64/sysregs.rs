//! aarch64 system-register values the host programs before the first entry,
//! and the `KVM_{GET,SET}_ONE_REG` ids to program them with.
//!
//! Pure: no KVM, no inline assembly, so the unit tests run on any host. The
//! ids are built from the uapi layout (`KVM_REG_ARM64 | KVM_REG_SIZE_U64 |
//! KVM_REG_ARM64_SYSREG | op0:op1:CRn:CRm:op2`, and `KVM_REG_ARM_CORE` with
//! the `struct kvm_regs` offset in 32-bit words for the core registers);
//! on aarch64 hosts a test cross-checks them against `kvm-bindings`.
// A register map: every field is named as the Arm ARM names it, whether or
// not the VMM sets it.
#![allow(dead_code)]
use crate::Privilege;

// ---- ONE_REG id layout (include/uapi/linux/kvm.h, arch/arm64/include/uapi/asm/kvm.h) ----
pub(crate) const KVM_REG_ARM64: u64 = 0x6000_0000_0000_0000;
pub(crate) const KVM_REG_SIZE_U64: u64 = 0x0030_0000_0000_0000;
pub(crate) const KVM_REG_ARM_COPROC_SHIFT: u64 = 16;
pub(crate) const KVM_REG_ARM_CORE: u64 = 0x0010 << KVM_REG_ARM_COPROC_SHIFT;
pub(crate) const KVM_REG_ARM64_SYSREG: u64 = 0x0013 << KVM_REG_ARM_COPROC_SHIFT;

/// The ONE_REG id of the system register `S<op0>_<op1>_C<crn>_C<crm>_<op2>`.
pub const fn sysreg_id(op0: u64, op1: u64, crn: u64, crm: u64, op2: u64) -> u64 {
    KVM_REG_ARM64
        | KVM_REG_SIZE_U64
        | KVM_REG_ARM64_SYSREG
        | (op0 << 14)
        | (op1 << 11)
        | (crn << 7)
        | (crm << 3)
        | op2
}

/// The ONE_REG id of a 64-bit field of `struct kvm_regs` at byte `offset`.
pub const fn core_reg_id(offset: u64) -> u64 {
    KVM_REG_ARM64 | KVM_REG_SIZE_U64 | KVM_REG_ARM_CORE | (offset / 4)
}

/// `struct kvm_regs` byte offsets: `regs: user_pt_regs { regs[31], sp, pc,
/// pstate }`, then `sp_el1`, `elr_el1`, `spsr[5]`, `fp_regs`.
pub const fn core_x(n: u64) -> u64 {
    core_reg_id(8 * n)
}
/// SP_EL0 (`regs.sp`).
pub(crate) const CORE_SP_EL0: u64 = core_reg_id(31 * 8);
pub(crate) const CORE_PC: u64 = core_reg_id(32 * 8);
pub(crate) const CORE_PSTATE: u64 = core_reg_id(33 * 8);
pub(crate) const CORE_SP_EL1: u64 = core_reg_id(34 * 8);
pub(crate) const CORE_ELR_EL1: u64 = core_reg_id(35 * 8);
/// `spsr[KVM_SPSR_EL1]`.
pub(crate) const CORE_SPSR_EL1: u64 = core_reg_id(36 * 8);

// ---- System registers (op0, op1, CRn, CRm, op2) ----
pub(crate) const MIDR_EL1: u64 = sysreg_id(3, 0, 0, 0, 0);
pub(crate) const MPIDR_EL1: u64 = sysreg_id(3, 0, 0, 0, 5);
pub(crate) const ID_AA64ISAR2_EL1: u64 = sysreg_id(3, 0, 0, 6, 2);
pub(crate) const ID_AA64MMFR0_EL1: u64 = sysreg_id(3, 0, 0, 7, 0);
pub const SCTLR_EL1: u64 = sysreg_id(3, 0, 1, 0, 0);
pub(crate) const CPACR_EL1: u64 = sysreg_id(3, 0, 1, 0, 2);
pub(crate) const TTBR0_EL1: u64 = sysreg_id(3, 0, 2, 0, 0);
pub(crate) const TTBR1_EL1: u64 = sysreg_id(3, 0, 2, 0, 1);
pub(crate) const TCR_EL1: u64 = sysreg_id(3, 0, 2, 0, 2);
pub const ESR_EL1: u64 = sysreg_id(3, 0, 5, 2, 0);
pub const FAR_EL1: u64 = sysreg_id(3, 0, 6, 0, 0);
pub(crate) const MAIR_EL1: u64 = sysreg_id(3, 0, 10, 2, 0);
pub(crate) const VBAR_EL1: u64 = sysreg_id(3, 0, 12, 0, 0);
pub(crate) const TPIDR_EL1: u64 = sysreg_id(3, 0, 13, 0, 4);
pub(crate) const CNTKCTL_EL1: u64 = sysreg_id(3, 0, 14, 1, 0);
pub const TPIDRRO_EL0: u64 = sysreg_id(3, 3, 13, 0, 3);
// EL2 registers (readable with ONE_REG on a vCPU with KVM_ARM_VCPU_HAS_EL2;
// the guest's own EL2 entry programs them, the host only reads them back
// for failure reports).
pub(crate) const SCTLR_EL2: u64 = sysreg_id(3, 4, 1, 0, 0);
pub(crate) const HCR_EL2: u64 = sysreg_id(3, 4, 1, 1, 0);
pub(crate) const TTBR0_EL2: u64 = sysreg_id(3, 4, 2, 0, 0);
pub(crate) const TCR_EL2: u64 = sysreg_id(3, 4, 2, 0, 2);
pub const SPSR_EL2: u64 = sysreg_id(3, 4, 4, 0, 0);
pub const ELR_EL2: u64 = sysreg_id(3, 4, 4, 0, 1);
pub(crate) const SP_EL2: u64 = sysreg_id(3, 6, 4, 1, 0);
pub const ESR_EL2: u64 = sysreg_id(3, 4, 5, 2, 0);
pub const FAR_EL2: u64 = sysreg_id(3, 4, 6, 0, 0);
pub const VBAR_EL2: u64 = sysreg_id(3, 4, 12, 0, 0);

// ---- KVM capabilities and vCPU features for a guest at EL2 ----
/// KVM_CAP_ARM_EL2 (include/uapi/linux/kvm.h of Linux 7.3; kvm-bindings
/// 0.14 predates it): the vCPU may start at EL2 (nested virtualization,
/// host booted with kvm-arm.mode=nested on a CPU with FEAT_NV2).
pub const KVM_CAP_ARM_EL2: u64 = 240;
/// KVM_CAP_ARM_EL2_E2H0 (same header): that EL2 may be non-VHE
/// (HCR_EL2.E2H = 0), as the nVHE hypervisor runs.
pub(crate) const KVM_CAP_ARM_EL2_E2H0: u64 = 241;
/// vCPU feature bits (arch/arm64/include/uapi/asm/kvm.h; also in
/// kvm-bindings as KVM_ARM_VCPU_HAS_EL2 / _HAS_EL2_E2H0).
pub(crate) const VCPU_FEATURE_HAS_EL2: u32 = 7;
pub(crate) const VCPU_FEATURE_HAS_EL2_E2H0: u32 = 8;

// ---- SCTLR_EL1 ----
pub(crate) const SCTLR_M: u64 = 1 << 0;
pub(crate) const SCTLR_A: u64 = 1 << 1;
pub(crate) const SCTLR_C: u64 = 1 << 2;
pub(crate) const SCTLR_SA: u64 = 1 << 3;
pub(crate) const SCTLR_SA0: u64 = 1 << 4;
pub(crate) const SCTLR_ITD: u64 = 1 << 7;
pub(crate) const SCTLR_SED: u64 = 1 << 8;
pub(crate) const SCTLR_EOS: u64 = 1 << 11;
pub(crate) const SCTLR_I: u64 = 1 << 12;
/// EL0 may use DC ZVA (else it traps and DCZID_EL0.DZP reads 1 at EL0).
pub(crate) const SCTLR_DZE: u64 = 1 << 14;
/// EL0 may read CTR_EL0.
pub(crate) const SCTLR_UCT: u64 = 1 << 15;
pub(crate) const SCTLR_NTWI: u64 = 1 << 16;
pub(crate) const SCTLR_NTWE: u64 = 1 << 18;
pub(crate) const SCTLR_WXN: u64 = 1 << 19;
pub(crate) const SCTLR_TSCXT: u64 = 1 << 20;
pub(crate) const SCTLR_EIS: u64 = 1 << 22;
pub(crate) const SCTLR_SPAN: u64 = 1 << 23;
pub(crate) const SCTLR_E0E: u64 = 1 << 24;
pub(crate) const SCTLR_EE: u64 = 1 << 25;
/// EL0 may use DC CVAU/CIVAC/CVAC/CVAP and IC IVAU.
pub(crate) const SCTLR_UCI: u64 = 1 << 26;
pub(crate) const SCTLR_NTLSMD: u64 = 1 << 28;
pub(crate) const SCTLR_LSMAOE: u64 = 1 << 29;
/// FEAT_MOPS: the memory copy/set instructions are enabled at EL0.
pub(crate) const SCTLR_MSCEN: u64 = 1 << 33;

/// Bits that are RES1 on a CPU without the features they control (ARMv8.0
/// without AArch32 EL0, IESB, PAN, LSMAOC ...); setting them is harmless
/// where the features exist: no AArch32 IT/SETEND, exception entry/exit are
/// context synchronizing, PAN unchanged on exception entry, no
/// load/store-multiple ordering relaxations.
pub(crate) const SCTLR_RES1: u64 = SCTLR_ITD
    | SCTLR_SED
    | SCTLR_EOS
    | SCTLR_TSCXT
    | SCTLR_EIS
    | SCTLR_SPAN
    | SCTLR_NTLSMD
    | SCTLR_LSMAOE;

/// SCTLR_EL1 for the guest: MMU, data and instruction caches on, SP
/// alignment checks at EL1 and EL0, no alignment checks for data (the
/// routines do unaligned accesses), WXN (writable never executable, as the
/// nVHE hyp's SCTLR_EL2 has it), little endian, WFI/WFE not trapped at
/// EL0, CTR_EL0 and cache maintenance allowed at EL0, MOPS enabled at EL0
/// when the CPU has it. DC ZVA at EL0 only for `Privilege::Kernel` (where
/// nothing runs at EL0): at EL0 (`Privilege::User`) DCZID_EL0.DZP reads 1
/// and the routines take their fallback paths.
pub(crate) fn sctlr_el1(privilege: Privilege, mops: bool) -> u64 {
    let mut v = SCTLR_RES1
        | SCTLR_M
        | SCTLR_C
        | SCTLR_I
        | SCTLR_SA
        | SCTLR_SA0
        | SCTLR_UCT
        | SCTLR_UCI
        | SCTLR_NTWI
        | SCTLR_NTWE
        | SCTLR_WXN;
    if privilege == Privilege::Kernel {
        v |= SCTLR_DZE;
    }
    if mops {
        v |= SCTLR_MSCEN;
    }
    v
}

// ---- SCTLR_EL2 (E2H = 0) ----
/// RES1 bits of SCTLR_EL2 when HCR_EL2.E2H is 0 (arch/arm64/include/asm/sysreg.h
/// SCTLR_EL2_RES1: 4, 5, 11, 16, 18, 22, 23, 28, 29).
pub(crate) const SCTLR_EL2_RES1: u64 = (1 << 4)
    | (1 << 5)
    | (1 << 11)
    | (1 << 16)
    | (1 << 18)
    | (1 << 22)
    | (1 << 23)
    | (1 << 28)
    | (1 << 29);

/// SCTLR_EL2 as the nVHE hyp's init sets it (INIT_SCTLR_EL2_MMU_ON): MMU,
/// data and instruction caches, SP alignment checks, WXN (writable never
/// executable), little endian, RES1. Left out: IESB and ITFSB, which need
/// FEAT_IESB / FEAT_MTE (RES0 without them). There is no DZE or MSCEn with
/// E2H = 0: DC ZVA and MOPS are always enabled at EL2.
pub const fn sctlr_el2() -> u64 {
    SCTLR_EL2_RES1 | SCTLR_M | SCTLR_C | SCTLR_SA | SCTLR_I | SCTLR_WXN
}

// ---- HCR_EL2 ----
/// EL1 is AArch64.
pub(crate) const HCR_RW: u64 = 1 << 31;
/// EL2 host (VHE); must stay clear for the nVHE regime.
pub(crate) const HCR_E2H: u64 = 1 << 34;

/// HCR_EL2 of a guest hypervisor with no guest of its own: EL1 AArch64,
/// no traps, no stage 2 (VM clear), E2H clear.
pub const fn hcr_el2() -> u64 {
    HCR_RW
}

// ---- TCR_EL1 ----
/// Virtual address size: 48 bits (four levels of 4 KiB tables from L0).
pub(crate) const VA_BITS: u64 = 48;
pub(crate) const TCR_T0SZ_SHIFT: u64 = 0;
pub(crate) const TCR_EPD0: u64 = 1 << 7;
pub(crate) const TCR_IRGN0_WBWA: u64 = 1 << 8;
pub(crate) const TCR_ORGN0_WBWA: u64 = 1 << 10;
pub(crate) const TCR_SH0_INNER: u64 = 3 << 12;
pub(crate) const TCR_TG0_4K: u64 = 0 << 14;
pub(crate) const TCR_T1SZ_SHIFT: u64 = 16;
pub(crate) const TCR_EPD1: u64 = 1 << 23;
pub(crate) const TCR_TG1_4K: u64 = 2 << 30;
pub(crate) const TCR_IPS_SHIFT: u64 = 32;
pub(crate) const TCR_IPS_MASK: u64 = 7 << TCR_IPS_SHIFT;

/// Physical address bits of an ID_AA64MMFR0_EL1.PARange / TCR.IPS encoding.
pub(crate) fn pa_bits(parange: u64) -> Option<u64> {
    match parange {
        0 => Some(32),
        1 => Some(36),
        2 => Some(40),
        3 => Some(42),
        4 => Some(44),
        5 => Some(48),
        6 => Some(52),
        _ => None,
    }
}

/// TCR_EL1: TTBR0 walks only (EPD1), 48-bit VAs, 4 KiB granule, inner
/// shareable write-back write-allocate table walks, and an intermediate
/// physical address size from ID_AA64MMFR0_EL1.PARange, capped at 48 bits
/// (the 4 KiB-granule maximum without FEAT_LPA2). `None` if the CPU cannot
/// address `need_pa` (the highest physical address the tables map).
pub(crate) fn tcr_el1(id_aa64mmfr0: u64, need_pa: u64) -> Option<u64> {
    let parange = (id_aa64mmfr0 & 0xf).min(5);
    let bits = pa_bits(parange)?;
    if bits < 64 && need_pa >> bits != 0 {
        return None;
    }
    Some(
        ((64 - VA_BITS) << TCR_T0SZ_SHIFT)
            | TCR_IRGN0_WBWA
            | TCR_ORGN0_WBWA
            | TCR_SH0_INNER
            | TCR_TG0_4K
            | ((64 - VA_BITS) << TCR_T1SZ_SHIFT)
            | TCR_EPD1
            | TCR_TG1_4K
            | (parange << TCR_IPS_SHIFT),
    )
}

// ---- TCR_EL2 (E2H = 0: one VA range, TTBR0_EL2) ----
/// RES1 bits 31 and 23 (kvm_arm.h TCR_EL2_RES1).
pub(crate) const TCR_EL2_RES1: u64 = (1 << 31) | (1 << 23);
pub(crate) const TCR_EL2_PS_SHIFT: u64 = 16;

/// TCR_EL2 as the nVHE hyp's init builds it (TCR_EL1's T0SZ/TG0/SH0/ORGN0/
/// IRGN0 fields, which sit at the same bits, plus RES1 and PS from
/// PARange; TCR_EL2 has no EPD1/T1SZ/TG1 or IPS field). `None` as for
/// [`tcr_el1`].
pub(crate) fn tcr_el2(id_aa64mmfr0: u64, need_pa: u64) -> Option<u64> {
    let el1 = tcr_el1(id_aa64mmfr0, need_pa)?;
    let fields = 0x3f | (0xf << 8) | (3 << 12) | (3 << 14);
    let parange = (el1 & TCR_IPS_MASK) >> TCR_IPS_SHIFT;
    Some((el1 & fields) | TCR_EL2_RES1 | (parange << TCR_EL2_PS_SHIFT))
}

// ---- MAIR_EL1 ----
/// MAIR index of Normal memory, inner/outer write-back, read/write allocate.
pub(crate) const MT_NORMAL: u64 = 0;
/// MAIR index of Device-nGnRE memory (the doorbell).
pub(crate) const MT_DEVICE_NGNRE: u64 = 1;
/// MAIR index of Device-nGnRnE memory (unused, for completeness).
pub(crate) const MT_DEVICE_NGNRNE: u64 = 2;
/// MAIR index of Normal non-cacheable memory (unused, for completeness).
pub(crate) const MT_NORMAL_NC: u64 = 3;
pub(crate) const MAIR_ATTR_NORMAL_WB: u64 = 0xff;
pub(crate) const MAIR_ATTR_DEVICE_NGNRE: u64 = 0x04;
pub(crate) const MAIR_ATTR_DEVICE_NGNRNE: u64 = 0x00;
pub(crate) const MAIR_ATTR_NORMAL_NC: u64 = 0x44;

pub const fn mair_el1() -> u64 {
    (MAIR_ATTR_NORMAL_WB << (8 * MT_NORMAL))
        | (MAIR_ATTR_DEVICE_NGNRE << (8 * MT_DEVICE_NGNRE))
        | (MAIR_ATTR_DEVICE_NGNRNE << (8 * MT_DEVICE_NGNRNE))
        | (MAIR_ATTR_NORMAL_NC << (8 * MT_NORMAL_NC))
}

// ---- CNTKCTL_EL1 ----
/// EL0 may read CNTPCT_EL0 (and CNTFRQ_EL0).
pub(crate) const CNTKCTL_EL0PCTEN: u64 = 1 << 0;
/// EL0 may read CNTVCT_EL0 (and CNTFRQ_EL0): the dispatcher's timestamps.
pub(crate) const CNTKCTL_EL0VCTEN: u64 = 1 << 1;

pub const fn cntkctl_el1() -> u64 {
    CNTKCTL_EL0PCTEN | CNTKCTL_EL0VCTEN
}

// ---- PSTATE / SPSR ----
pub(crate) const PSR_MODE_EL0T: u64 = 0x0;
pub(crate) const PSR_MODE_EL1T: u64 = 0x4;
pub(crate) const PSR_MODE_EL1H: u64 = 0x5;
pub(crate) const PSR_MODE_EL2H: u64 = 0x9;
pub(crate) const PSR_MODE_MASK: u64 = 0xf;
pub(crate) const PSR_F: u64 = 1 << 6;
pub(crate) const PSR_I: u64 = 1 << 7;
pub(crate) const PSR_A: u64 = 1 << 8;
pub(crate) const PSR_D: u64 = 1 << 9;
pub(crate) const PSR_DAIF: u64 = PSR_D | PSR_A | PSR_I | PSR_F;

/// Entry PSTATE: EL1h (`Kernel`), EL0t (`User`) or EL2h (`Hyp`), DAIF masked.
pub(crate) fn pstate(privilege: Privilege) -> u64 {
    PSR_DAIF
        | match privilege {
            Privilege::Kernel => PSR_MODE_EL1H,
            Privilege::User => PSR_MODE_EL0T,
            Privilege::Hyp => PSR_MODE_EL2H,
        }
}

/// "EL0t", "EL1h", ... for an SPSR/PSTATE value (AArch64 modes only).
pub(crate) fn mode_name(spsr: u64) -> &'static str {
    if spsr & (1 << 4) != 0 {
        return "AArch32";
    }
    match spsr & PSR_MODE_MASK {
        0x0 => "EL0t",
        0x4 => "EL1t",
        0x5 => "EL1h",
        0x8 => "EL2t",
        0x9 => "EL2h",
        0xc => "EL3t",
        0xd => "EL3h",
        _ => "invalid mode",
    }
}

// ---- ID register fields ----
/// ID_AA64ISAR2_EL1.MOPS, bits [19:16]: FEAT_MOPS if non-zero.
pub fn has_mops(id_aa64isar2: u64) -> bool {
    (id_aa64isar2 >> 16) & 0xf != 0
}

/// DCZID_EL0: (DC ZVA allowed, block size in bytes).
pub(crate) fn dczid(v: u64) -> (bool, u64) {
    (v & (1 << 4) == 0, 4u64 << (v & 0xf))
}

/// MIDR_EL1 implementer names (the common ones).
pub(crate) fn implementer_name(midr: u64) -> &'static str {
    match (midr >> 24) & 0xff {
        0x00 => "software (e.g. QEMU TCG)",
        0x41 => "Arm",
        0x42 => "Broadcom",
        0x43 => "Cavium",
        0x46 => "Fujitsu",
        0x48 => "HiSilicon",
        0x4e => "NVIDIA",
        0x50 => "APM",
        0x51 => "Qualcomm",
        0x61 => "Apple",
        0x6d => "Microsoft",
        0xc0 => "Ampere",
        _ => "unknown implementer",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysreg_ids_match_the_uapi_encoding() {
        // ARM64_SYS_REG(3, 0, 1, 0, 0) as the kernel selftests spell it.
        assert_eq!(SCTLR_EL1, 0x6030_0000_0013_c080);
        assert_eq!(TCR_EL1, 0x6030_0000_0013_c102);
        assert_eq!(MAIR_EL1, 0x6030_0000_0013_c510);
        assert_eq!(TTBR0_EL1, 0x6030_0000_0013_c100);
        assert_eq!(VBAR_EL1, 0x6030_0000_0013_c600);
        assert_eq!(TPIDRRO_EL0, 0x6030_0000_0013_de83);
        assert_eq!(MIDR_EL1, 0x6030_0000_0013_c000);
        assert_eq!(ID_AA64ISAR2_EL1, 0x6030_0000_0013_c032);
        assert_eq!(CNTKCTL_EL1, 0x6030_0000_0013_c708);
    }

    #[test]
    fn core_reg_ids_use_word_offsets() {
        assert_eq!(core_x(0), 0x6030_0000_0010_0000);
        assert_eq!(core_x(30), 0x6030_0000_0010_0000 + 60);
        assert_eq!(CORE_SP_EL0, 0x6030_0000_0010_003e);
        assert_eq!(CORE_PC, 0x6030_0000_0010_0040);
        assert_eq!(CORE_PSTATE, 0x6030_0000_0010_0042);
        assert_eq!(CORE_SP_EL1, 0x6030_0000_0010_0044);
        assert_eq!(CORE_ELR_EL1, 0x6030_0000_0010_0046);
        assert_eq!(CORE_SPSR_EL1, 0x6030_0000_0010_0048);
    }

    #[test]
    fn sctlr_turns_the_mmu_and_caches_on_and_gates_dc_zva_by_privilege() {
        let k = sctlr_el1(Privilege::Kernel, false);
        let u = sctlr_el1(Privilege::User, true);
        for v in [k, u] {
            assert_eq!(
                v & (SCTLR_M | SCTLR_C | SCTLR_I),
                SCTLR_M | SCTLR_C | SCTLR_I
            );
            assert_eq!(v & (SCTLR_A | SCTLR_EE | SCTLR_E0E), 0);
            assert_ne!(v & SCTLR_WXN, 0, "writable never executable");
            assert_ne!(v & SCTLR_SPAN, 0, "PAN must not be set on exception entry");
        }
        assert_ne!(k & SCTLR_DZE, 0);
        assert_eq!(u & SCTLR_DZE, 0, "EL0 must see DCZID_EL0.DZP = 1");
        assert_eq!(k & SCTLR_MSCEN, 0, "MSCEn is RES0 without FEAT_MOPS");
        assert_ne!(u & SCTLR_MSCEN, 0);
        assert_eq!(k & SCTLR_RES1, SCTLR_RES1);
        assert_eq!(k >> 34, 0, "no bits of features we do not program");
    }

    #[test]
    fn tcr_is_48_bit_4k_ttbr0_only_with_ips_from_parange() {
        let t = tcr_el1(0x2, 0xff_ffff_ffff).unwrap(); // PARange 40 bits
        assert_eq!(t & 0x3f, 16, "T0SZ");
        assert_eq!((t >> 14) & 3, 0, "TG0 4K");
        assert_eq!((t >> 8) & 0xf, 0b0101, "IRGN0/ORGN0 WBWA");
        assert_eq!((t >> 12) & 3, 3, "SH0 inner");
        assert_ne!(t & TCR_EPD1, 0);
        assert_eq!(t & TCR_EPD0, 0);
        assert_eq!((t & TCR_IPS_MASK) >> TCR_IPS_SHIFT, 2);
        // 52-bit PARange is capped to 48 bits with 4K pages.
        assert_eq!(
            (tcr_el1(0x6, 0).unwrap() & TCR_IPS_MASK) >> TCR_IPS_SHIFT,
            5
        );
        // A 36-bit CPU cannot reach the doorbell under 1 TiB.
        assert_eq!(tcr_el1(0x1, 0xff_ffff_f000), None);
        // Larger (future) encodings are capped too.
        assert_eq!(
            (tcr_el1(0x7, 0).unwrap() & TCR_IPS_MASK) >> TCR_IPS_SHIFT,
            5
        );
    }

    #[test]
    fn el2_registers_follow_the_nvhe_hyp_init() {
        assert_eq!(SCTLR_EL2, 0x6030_0000_0013_e080);
        assert_eq!(TCR_EL2, 0x6030_0000_0013_e102);
        assert_eq!(VBAR_EL2, 0x6030_0000_0013_e600);
        assert_eq!(ESR_EL2, 0x6030_0000_0013_e290);
        let s = sctlr_el2();
        assert_eq!(
            s & (SCTLR_M | SCTLR_C | SCTLR_I),
            SCTLR_M | SCTLR_C | SCTLR_I
        );
        assert_ne!(s & SCTLR_WXN, 0, "the nVHE hyp runs with WXN");
        assert_eq!(s & (SCTLR_A | SCTLR_EE), 0);
        assert_eq!(s & SCTLR_EL2_RES1, SCTLR_EL2_RES1);
        assert_eq!(s >> 30, 0, "no IESB/ITFSB or other feature bits");
        let t = tcr_el2(0x2, 0xff_ffff_ffff).unwrap();
        assert_eq!(t & 0x3f, 16, "T0SZ");
        assert_eq!((t >> 8) & 0xf, 0b0101, "IRGN0/ORGN0 WBWA");
        assert_eq!((t >> 12) & 3, 3, "SH0 inner");
        assert_eq!((t >> 14) & 3, 0, "TG0 4K");
        assert_eq!((t >> TCR_EL2_PS_SHIFT) & 7, 2, "PS from PARange");
        assert_eq!(t & TCR_EL2_RES1, TCR_EL2_RES1);
        assert_eq!(t >> 32, 0, "no EL1-only fields (IPS, TG1, ...)");
        assert_eq!(tcr_el2(0x1, 0xff_ffff_f000), None);
        assert_eq!(hcr_el2() & HCR_E2H, 0);
        assert_eq!(hcr_el2(), HCR_RW);
        assert_eq!(pstate(Privilege::Hyp), 0x3c9);
        assert_eq!(mode_name(0x3c9), "EL2h");
    }

    #[test]
    fn mair_has_normal_wb_at_0_and_device_ngnre_at_1() {
        assert_eq!(mair_el1(), 0x4400_04ff);
        assert_eq!((mair_el1() >> (8 * MT_NORMAL)) & 0xff, 0xff);
        assert_eq!((mair_el1() >> (8 * MT_DEVICE_NGNRE)) & 0xff, 0x04);
    }

    #[test]
    fn pstate_masks_daif_and_selects_the_mode() {
        assert_eq!(pstate(Privilege::Kernel), 0x3c5);
        assert_eq!(pstate(Privilege::User), 0x3c0);
        assert_eq!(mode_name(0x3c5), "EL1h");
        assert_eq!(mode_name(0x3c0), "EL0t");
        assert_eq!(mode_name(0x10), "AArch32");
    }

    #[test]
    fn id_fields_decode() {
        assert!(has_mops(0x0001_0000));
        assert!(!has_mops(0x0000_f000));
        assert_eq!(dczid(0x4), (true, 64));
        assert_eq!(dczid(0x14), (false, 64));
        assert_eq!(dczid(0x7), (true, 512));
        assert_eq!(implementer_name(0x000f_0510), "software (e.g. QEMU TCG)");
        assert_eq!(implementer_name(0x410f_d0c0), "Arm");
    }

    /// On an aarch64 host, cross-check the hand-built ids with kvm-bindings.
    #[cfg(target_arch = "aarch64")]
    #[test]
    fn ids_agree_with_kvm_bindings() {
        use kvm_bindings::{kvm_regs, user_pt_regs};
        use std::mem::offset_of;
        assert_eq!(KVM_REG_ARM64, kvm_bindings::KVM_REG_ARM64);
        assert_eq!(KVM_REG_SIZE_U64, kvm_bindings::KVM_REG_SIZE_U64);
        assert_eq!(KVM_REG_ARM_CORE, u64::from(kvm_bindings::KVM_REG_ARM_CORE));
        assert_eq!(
            KVM_REG_ARM64_SYSREG,
            u64::from(kvm_bindings::KVM_REG_ARM64_SYSREG)
        );
        let off = |f: usize| core_reg_id(f as u64);
        let regs = offset_of!(kvm_regs, regs);
        assert_eq!(CORE_PC, off(regs + offset_of!(user_pt_regs, pc)));
        assert_eq!(CORE_PSTATE, off(regs + offset_of!(user_pt_regs, pstate)));
        assert_eq!(CORE_SP_EL0, off(regs + offset_of!(user_pt_regs, sp)));
        assert_eq!(
            core_x(7),
            off(regs + offset_of!(user_pt_regs, regs) + 7 * 8)
        );
        assert_eq!(CORE_SP_EL1, off(offset_of!(kvm_regs, sp_el1)));
        assert_eq!(CORE_ELR_EL1, off(offset_of!(kvm_regs, elr_el1)));
        assert_eq!(CORE_SPSR_EL1, off(offset_of!(kvm_regs, spsr)));
    }
}
