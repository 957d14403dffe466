//! Decoding for humans: ESR_EL1 / ESR_EL2 syndromes (exception class, data/instruction
//! fault status, trapped system instructions, MOPS exceptions), exception
//! vector offsets, MIDR_EL1 CPU names, and the KVM/arm64 mode from the
//! kernel command line and log. Pure, unit tested on every host.
use super::sysregs::mode_name;
use crate::{HypSupport, KvmFlavour};

/// ESR_ELx.EC, bits [31:26].
pub(crate) fn ec(esr: u64) -> u64 {
    (esr >> 26) & 0x3f
}

/// ESR_ELx.ISS, bits [24:0].
pub(crate) fn iss(esr: u64) -> u64 {
    esr & 0x1ff_ffff
}

pub(crate) const EC_UNKNOWN: u64 = 0x00;
pub(crate) const EC_WFX: u64 = 0x01;
pub(crate) const EC_FP_ASIMD: u64 = 0x07;
pub(crate) const EC_BTI: u64 = 0x0d;
pub(crate) const EC_ILLEGAL_STATE: u64 = 0x0e;
pub(crate) const EC_SVC64: u64 = 0x15;
pub(crate) const EC_HVC64: u64 = 0x16;
pub(crate) const EC_SMC64: u64 = 0x17;
pub(crate) const EC_SYS64: u64 = 0x18;
pub(crate) const EC_SVE: u64 = 0x19;
pub(crate) const EC_FPAC: u64 = 0x1c;
pub(crate) const EC_SME: u64 = 0x1d;
pub(crate) const EC_IABT_LOW: u64 = 0x20;
pub(crate) const EC_IABT_CUR: u64 = 0x21;
pub(crate) const EC_PC_ALIGN: u64 = 0x22;
pub(crate) const EC_DABT_LOW: u64 = 0x24;
pub(crate) const EC_DABT_CUR: u64 = 0x25;
pub(crate) const EC_SP_ALIGN: u64 = 0x26;
pub(crate) const EC_MOPS: u64 = 0x27;
pub(crate) const EC_FP_EXC64: u64 = 0x2c;
pub(crate) const EC_SERROR: u64 = 0x2f;
pub(crate) const EC_BREAKPT_LOW: u64 = 0x30;
pub(crate) const EC_BREAKPT_CUR: u64 = 0x31;
pub(crate) const EC_SOFTSTP_LOW: u64 = 0x32;
pub(crate) const EC_SOFTSTP_CUR: u64 = 0x33;
pub(crate) const EC_WATCHPT_LOW: u64 = 0x34;
pub(crate) const EC_WATCHPT_CUR: u64 = 0x35;
pub(crate) const EC_BRK64: u64 = 0x3c;

/// A short name of an exception class.
pub(crate) fn ec_name(ec: u64) -> &'static str {
    match ec {
        EC_UNKNOWN => "undefined instruction",
        EC_WFX => "trapped WFI/WFE",
        0x03..=0x06 | 0x0c => "trapped AArch32 coprocessor access",
        EC_FP_ASIMD => "trapped FP/SIMD access",
        0x0a => "trapped LD64B/ST64B",
        EC_BTI => "branch target exception",
        EC_ILLEGAL_STATE => "illegal execution state",
        0x11 => "SVC from AArch32",
        EC_SVC64 => "SVC",
        EC_HVC64 => "HVC",
        EC_SMC64 => "SMC",
        EC_SYS64 => "trapped system register access or system instruction",
        EC_SVE => "trapped SVE access",
        EC_FPAC => "pointer authentication failure",
        EC_SME => "trapped SME access",
        EC_IABT_LOW => "instruction abort from a lower exception level",
        EC_IABT_CUR => "instruction abort",
        EC_PC_ALIGN => "PC alignment fault",
        EC_DABT_LOW => "data abort from a lower exception level",
        EC_DABT_CUR => "data abort",
        EC_SP_ALIGN => "SP alignment fault",
        EC_MOPS => "memory copy/set (MOPS) exception",
        0x28 | EC_FP_EXC64 => "floating-point exception",
        EC_SERROR => "SError interrupt",
        EC_BREAKPT_LOW | EC_BREAKPT_CUR => "hardware breakpoint",
        EC_SOFTSTP_LOW | EC_SOFTSTP_CUR => "software step",
        EC_WATCHPT_LOW | EC_WATCHPT_CUR => "watchpoint",
        0x38 => "BKPT (AArch32)",
        EC_BRK64 => "BRK instruction",
        _ => "unknown exception class",
    }
}

/// A data/instruction fault status code (DFSC/IFSC, ISS[5:0]).
pub(crate) fn fault_status(fsc: u64) -> String {
    let level = fsc & 3;
    match fsc & 0x3f {
        0x00..=0x03 => format!("address size fault at level {level}"),
        0x04..=0x07 => format!("translation fault at level {level} (address not mapped)"),
        0x08..=0x0b => format!("access flag fault at level {level}"),
        0x0c..=0x0f => format!("permission fault at level {level}"),
        0x10 => "synchronous external abort".into(),
        0x11 => "synchronous tag check fault".into(),
        0x14..=0x17 => format!("synchronous external abort on a table walk at level {level}"),
        0x18 => "synchronous parity or ECC error".into(),
        0x21 => "alignment fault".into(),
        0x30 => "TLB conflict abort".into(),
        0x31 => "unsupported atomic hardware update".into(),
        0x35 => "unsupported exclusive or atomic access".into(),
        f => format!("fault status {f:#04x}"),
    }
}

/// Where the vector offset points: e.g. "current EL with SP_ELx, synchronous".
pub(crate) fn vector_name(voff: u64) -> String {
    let from = match voff / 0x200 {
        0 => "current EL with SP_EL0",
        1 => "current EL with SP_ELx",
        2 => "lower EL using AArch64",
        3 => "lower EL using AArch32",
        _ => return format!("invalid vector offset {voff:#x}"),
    };
    let kind = ["synchronous", "IRQ", "FIQ", "SError"][((voff / 0x80) % 4) as usize];
    format!("{from}, {kind}")
}

/// Name of a trapped system instruction/register (EC 0x18 ISS), if known.
fn sys_name(op0: u64, op1: u64, crn: u64, crm: u64, op2: u64) -> Option<&'static str> {
    Some(match (op0, op1, crn, crm, op2) {
        (1, 3, 7, 4, 1) => "DC ZVA",
        (1, 3, 7, 11, 1) => "DC CVAU",
        (1, 3, 7, 14, 1) => "DC CIVAC",
        (1, 3, 7, 10, 1) => "DC CVAC",
        (1, 3, 7, 5, 1) => "IC IVAU",
        (3, 3, 14, 0, 0) => "CNTFRQ_EL0",
        (3, 3, 14, 0, 1) => "CNTPCT_EL0",
        (3, 3, 14, 0, 2) => "CNTVCT_EL0",
        (3, 3, 0, 0, 1) => "CTR_EL0",
        (3, 3, 0, 0, 7) => "DCZID_EL0",
        _ => return None,
    })
}

/// The exception level whose syndrome registers a report carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TakenTo {
    /// VBAR_EL1: ESR_EL1, ELR_EL1, FAR_EL1, SPSR_EL1.
    El1,
    /// VBAR_EL2 (E2H = 0): ESR_EL2, ELR_EL2, FAR_EL2, SPSR_EL2.
    El2,
}

impl TakenTo {
    /// "EL1" / "EL2", the suffix of the register names.
    pub fn suffix(self) -> &'static str {
        match self {
            TakenTo::El1 => "EL1",
            TakenTo::El2 => "EL2",
        }
    }
}

/// The registers of a FAIL_EXCEPTION report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exception {
    pub esr: u64,
    pub elr: u64,
    pub far: u64,
    pub spsr: u64,
    /// Offset of the vector taken from VBAR_ELx.
    pub voff: u64,
    pub sp: u64,
    pub taken_to: TakenTo,
}

impl Exception {
    /// From the mailbox words D0..D5 = ESR_ELx, ELR_ELx, FAR_ELx, SPSR_ELx,
    /// vector offset (with `abi::FAIL_EXC_EL2` set by the EL2 vectors), SP.
    pub fn from_mailbox(d: [u64; 6]) -> Exception {
        let [esr, elr, far, spsr, d4, sp] = d;
        let taken_to = if d4 & hypclear_abi::FAIL_EXC_EL2 != 0 {
            TakenTo::El2
        } else {
            TakenTo::El1
        };
        Exception {
            esr,
            elr,
            far,
            spsr,
            voff: d4 & !hypclear_abi::FAIL_EXC_EL2,
            sp,
            taken_to,
        }
    }

    /// Taken to a synchronous vector (ESR_EL1 describes it).
    fn synchronous(&self) -> bool {
        self.voff % 0x200 < 0x80
    }
}

/// The sentence for a FAIL_EXCEPTION report; `sym` names ELR_ELx.
pub fn describe(x: &Exception, sym: &str) -> String {
    let Exception {
        esr,
        elr,
        far,
        spsr,
        voff,
        sp,
        taken_to,
    } = *x;
    let el = taken_to.suffix();
    let ec = ec(esr);
    let mut s = if x.synchronous() {
        let mut s = format!(
            "{} (EC {ec:#04x}) at {elr:#x} ({sym}) in {}",
            ec_name(ec),
            mode_name(spsr)
        );
        s.push_str(&class_detail(x));
        s
    } else {
        format!(
            "asynchronous exception at {elr:#x} ({sym}) in {} (ESR_{el} is only meaningful for \
             SError)",
            mode_name(spsr)
        )
    };
    // FAR_ELx is UNKNOWN except for aborts, PC alignment faults and watchpoints.
    let far_valid = x.synchronous()
        && matches!(
            ec,
            EC_IABT_LOW
                | EC_IABT_CUR
                | EC_PC_ALIGN
                | EC_DABT_LOW
                | EC_DABT_CUR
                | EC_WATCHPT_LOW
                | EC_WATCHPT_CUR
        );
    let far = if far_valid {
        format!(", FAR_{el} {far:#x}")
    } else {
        String::new()
    };
    s.push_str(&format!(
        "; taken to the {} vector (VBAR_{el}+{voff:#x}); ESR_{el} {esr:#x}{far}, SPSR_{el} \
         {spsr:#x}, SP {sp:#x}",
        vector_name(voff)
    ));
    s
}

/// What a synchronous exception's syndrome says, by exception class (one
/// function per class group, in the Arm ARM's order); empty for the rest.
fn class_detail(x: &Exception) -> String {
    let iss = iss(x.esr);
    let el2 = x.taken_to == TakenTo::El2;
    match ec(x.esr) {
        EC_UNKNOWN if el2 => ": an UNDEFINED encoding, or an instruction the CPU or EL2 \
             does not have (e.g. MOPS without FEAT_MOPS, or an EL1-only instruction)"
            .to_string(),
        EC_UNKNOWN => ": an UNDEFINED encoding, or an instruction the CPU or the \
             current exception level does not have (e.g. MOPS without FEAT_MOPS or, at EL0, \
             with SCTLR_EL1.MSCEn clear)"
            .to_string(),
        EC_FP_ASIMD | EC_SVE | EC_SME => format!(
            ": FP/SIMD/SVE is trapped ({}), as hyp code must not touch FP state; the \
             routine used an FP/SIMD/SVE register",
            if el2 { "CPTR_EL2" } else { "CPACR_EL1.FPEN" }
        ),
        EC_SVC64 | EC_HVC64 | EC_SMC64 | EC_BRK64 => format!(", immediate {:#x}", iss & 0xffff),
        EC_SYS64 => sys64_detail(iss, x.taken_to),
        EC_IABT_LOW | EC_IABT_CUR => {
            let mut s = format!(": {} fetching {:#x}", fault_status(iss), x.far);
            if iss & 0x3c == 0x0c {
                s.push_str(" (the page is not executable at this level)");
            }
            s
        }
        EC_DABT_LOW | EC_DABT_CUR => dabt_detail(iss, x.far, x.spsr & 0xf == 0),
        EC_PC_ALIGN | EC_SP_ALIGN => format!(", SP {:#x}", x.sp),
        EC_MOPS => mops_detail(iss),
        _ => String::new(),
    }
}

/// A trapped MSR/MRS or system instruction (EC 0x18).
fn sys64_detail(iss: u64, taken_to: TakenTo) -> String {
    let (op0, op2, op1) = ((iss >> 20) & 3, (iss >> 17) & 7, (iss >> 14) & 7);
    let (crn, rt, crm) = ((iss >> 10) & 0xf, (iss >> 5) & 0x1f, (iss >> 1) & 0xf);
    let read = iss & 1 == 1;
    let enc = format!("S{op0}_{op1}_C{crn}_C{crm}_{op2}");
    let name = sys_name(op0, op1, crn, crm, op2).unwrap_or(&enc);
    let mut s = format!(
        ": {} {name} with x{rt}",
        if op0 == 1 {
            "system instruction"
        } else if read {
            "MRS of"
        } else {
            "MSR to"
        }
    );
    if name == "DC ZVA" && taken_to == TakenTo::El2 {
        s.push_str(
            " (DC ZVA is never disabled at EL2 with E2H = 0: a trap here is the CPU's or KVM's)",
        );
    } else if name == "DC ZVA" {
        s.push_str(
            " (DC ZVA is disabled at EL0 when SCTLR_EL1.DZE is clear; routines \
                 must check DCZID_EL0.DZP first)",
        );
    }
    s
}

/// A data abort (EC 0x24/0x25): the fault, the access, and why it is
/// likely (`from_el0`: taken from EL0).
fn dabt_detail(iss: u64, far: u64, from_el0: bool) -> String {
    let fsc = iss & 0x3f;
    let write = iss & (1 << 6) != 0;
    let cm = iss & (1 << 8) != 0;
    let fnv = iss & (1 << 10) != 0;
    let mut s = format!(
        ": {} on {}{}",
        fault_status(fsc),
        if cm {
            "cache maintenance"
        } else if write {
            "write"
        } else {
            "read"
        },
        if fnv {
            String::from(" (FAR not valid)")
        } else {
            format!(" of {far:#x}")
        }
    );
    if iss & (1 << 24) != 0 {
        s.push_str(&format!(
            ", {}-byte access with x{}",
            1u64 << ((iss >> 22) & 3),
            (iss >> 16) & 0x1f
        ));
    }
    match fsc {
        0x21 => s.push_str(
            " (an unaligned access to Device memory, an unaligned \
                 exclusive/atomic, or SCTLR_ELx.A set; with the MMU off all memory is \
                 Device memory)",
        ),
        0x0c..=0x0f if from_el0 => s.push_str(
            " (EL0 may not access this page, or \
                 it is read-only)",
        ),
        0x0c..=0x0f if write => s.push_str(" (the page is read-only)"),
        _ => {}
    }
    s
}

/// A MOPS exception (EC 0x27): the sequence and why the CPU stopped it.
fn mops_detail(iss: u64) -> String {
    let set = iss & (1 << 24) != 0;
    format!(
        ": {}{} sequence with Xd=x{}, {}, Xn=x{}{}{}: the CPU asks the handler to \
             restart the sequence from its prologue (the MOPS registers or the algorithm \
             option changed, e.g. after migration to another CPU); hypclear's vectors \
             report instead of restarting",
        if set { "SET" } else { "CPY" },
        if set && iss & (1 << 23) != 0 { "G" } else { "" },
        (iss >> 10) & 0x1f,
        if set {
            format!("Xs=x{}", (iss >> 5) & 0x1f)
        } else {
            format!("Xs=[x{}]", (iss >> 5) & 0x1f)
        },
        iss & 0x1f,
        if iss & (1 << 18) != 0 {
            ", from the epilogue"
        } else {
            ""
        },
        if iss & (1 << 17) != 0 {
            if iss & (1 << 16) != 0 {
                ", wrong option (this CPU uses option A)"
            } else {
                ", wrong option (this CPU uses option B)"
            }
        } else {
            ""
        }
    )
}

/// MIDR_EL1 implementer 0x00 is "reserved for software use": QEMU's TCG
/// `max` CPU uses it. (Emulated named CPUs like `-cpu cortex-a57` carry the
/// real MIDR and cannot be told apart this way.)
pub(crate) fn midr_is_emulated(midr: u64) -> bool {
    midr != 0 && (midr >> 24) & 0xff == 0
}

/// A CPU name from MIDR_EL1, e.g. "Arm Neoverse-N1 r3p1 (MIDR_EL1 0x413fd0c1)".
pub(crate) fn midr_model(midr: u64) -> String {
    let imp = (midr >> 24) & 0xff;
    let part = (midr >> 4) & 0xfff;
    let (variant, rev) = ((midr >> 20) & 0xf, midr & 0xf);
    let name = match (imp, part) {
        (0x00, 0x051) => Some("QEMU TCG 'max' CPU"),
        (0x41, 0xd03) => Some("Arm Cortex-A53"),
        (0x41, 0xd04) => Some("Arm Cortex-A35"),
        (0x41, 0xd05) => Some("Arm Cortex-A55"),
        (0x41, 0xd07) => Some("Arm Cortex-A57"),
        (0x41, 0xd08) => Some("Arm Cortex-A72"),
        (0x41, 0xd09) => Some("Arm Cortex-A73"),
        (0x41, 0xd0a) => Some("Arm Cortex-A75"),
        (0x41, 0xd0b) => Some("Arm Cortex-A76"),
        (0x41, 0xd0c) => Some("Arm Neoverse-N1"),
        (0x41, 0xd0d) => Some("Arm Cortex-A77"),
        (0x41, 0xd40) => Some("Arm Neoverse-V1"),
        (0x41, 0xd41) => Some("Arm Cortex-A78"),
        (0x41, 0xd44) => Some("Arm Cortex-X1"),
        (0x41, 0xd46) => Some("Arm Cortex-A510"),
        (0x41, 0xd47) => Some("Arm Cortex-A710"),
        (0x41, 0xd48) => Some("Arm Cortex-X2"),
        (0x41, 0xd49) => Some("Arm Neoverse-N2"),
        (0x41, 0xd4f) => Some("Arm Neoverse-V2"),
        (0x41, 0xd80) => Some("Arm Cortex-A520"),
        (0x41, 0xd81) => Some("Arm Cortex-A720"),
        (0x41, 0xd82) => Some("Arm Cortex-X4"),
        (0x41, 0xd84) => Some("Arm Neoverse-V3"),
        (0x41, 0xd8e) => Some("Arm Neoverse-N3"),
        (0x46, 0x001) => Some("Fujitsu A64FX"),
        (0xc0, 0xac3) => Some("AmpereOne"),
        _ => None,
    };
    let name = name.map(str::to_string).unwrap_or_else(|| {
        format!(
            "{} part {part:#05x}",
            super::sysregs::implementer_name(midr)
        )
    });
    format!("{name} r{variant}p{rev} (MIDR_EL1 {midr:#010x})")
}

/// The KVM/arm64 mode: from the kernel log line KVM prints when it comes up
/// (what actually happened), else from `kvm-arm.mode=` on the command line,
/// else "arm64" (unknown; the kernel default is VHE where the CPU has it).
pub(crate) fn flavour_from(cmdline: &str, log: &str) -> KvmFlavour {
    let mut from_log = None;
    for line in log.lines().filter(|l| l.contains("kvm")) {
        if line.contains("Protected nVHE mode initialized")
            || line.contains("Protected hVHE mode initialized")
        {
            from_log = Some(KvmFlavour::Arm64Protected);
        } else if line.contains("Hyp mode initialized")
            || line.contains("Hyp nVHE mode initialized")
            || line.contains("Hyp hVHE mode initialized")
        {
            from_log = Some(KvmFlavour::Arm64Nvhe);
        } else if line.contains("VHE+NV2 mode initialized")
            || line.contains("VHE+NV mode initialized")
        {
            from_log = Some(KvmFlavour::Arm64Nested);
        } else if line.contains("VHE mode initialized") {
            from_log = Some(KvmFlavour::Arm64Vhe);
        }
    }
    if let Some(f) = from_log {
        return f;
    }
    let mode = cmdline
        .split_whitespace()
        .rev()
        .find_map(|w| w.strip_prefix("kvm-arm.mode="));
    match mode {
        Some("protected") => KvmFlavour::Arm64Protected,
        Some("nvhe") => KvmFlavour::Arm64Nvhe,
        Some("nested") => KvmFlavour::Arm64Nested,
        Some("none") => KvmFlavour::Arm64None,
        _ => KvmFlavour::Arm64,
    }
}

/// What the host offers for a guest at EL2, from the two capabilities
/// (KVM_CAP_ARM_EL2, KVM_CAP_ARM_EL2_E2H0), the kernel command line and
/// log and the kernel release; when it is not offered, the detail names
/// what the host lacks.
pub(crate) fn el2_support(
    el2: bool,
    e2h0: bool,
    cmdline: &str,
    log: &str,
    release: &str,
) -> HypSupport {
    let flavour = flavour_from(cmdline, log);
    let detail = match (el2, e2h0) {
        (true, true) => format!(
            "KVM offers KVM_CAP_ARM_EL2 and KVM_CAP_ARM_EL2_E2H0 (kernel {release}, KVM {flavour})"
        ),
        (true, false) => format!(
            "KVM offers KVM_CAP_ARM_EL2 but not KVM_CAP_ARM_EL2_E2H0 (kernel {release}): \
             only a VHE guest hypervisor (E2H = 1) could run here, not the nVHE one \
             (E2H0 support: the CPU or this KVM cannot run EL2 with E2H = 0)"
        ),
        (false, _) if flavour == KvmFlavour::Arm64Nested => format!(
            "kvm-arm.mode=nested is set but KVM offers no KVM_CAP_ARM_EL2 (kernel {release}): \
             the CPU lacks FEAT_NV2 (the kernel log has no 'VHE+NV2 mode initialized'), or \
             the kernel is too old for guests at EL2"
        ),
        (false, _) if cmdline.contains("kvm-arm.mode=nested") => format!(
            "kernel {release} does not offer KVM_CAP_ARM_EL2 (240) although booted with \
             kvm-arm.mode=nested: it needs a kernel with nested virtualization for userspace \
             (e.g. Debian's 7.x from trixie-backports) on a CPU with FEAT_NV2"
        ),
        (false, _) => format!(
            "KVM offers no KVM_CAP_ARM_EL2 (kernel {release}, KVM {flavour}): boot a kernel \
             with guests at EL2 (KVM_CAP_ARM_EL2 240 and KVM_CAP_ARM_EL2_E2H0 241, e.g. \
             Debian's 7.x from trixie-backports) with kvm-arm.mode=nested, on a CPU with \
             FEAT_NV2"
        ),
    };
    HypSupport {
        offered: el2 && e2h0,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn el2_support_names_what_the_host_lacks() {
        let nv2 = "kvm [1]: VHE+NV2 mode initialized successfully";
        let vhe = "kvm [1]: VHE mode initialized successfully";
        let ok = el2_support(true, true, "kvm-arm.mode=nested", nv2, "7.3.4+deb13-arm64");
        assert!(ok.offered);
        assert!(ok.detail.contains("KVM_CAP_ARM_EL2_E2H0"), "{}", ok.detail);
        let no_e2h0 = el2_support(true, false, "kvm-arm.mode=nested", nv2, "7.3.4");
        assert!(!no_e2h0.offered && no_e2h0.detail.contains("E2H0 support"));
        let old = el2_support(false, false, "console=ttyAMA0", vhe, "6.12.95+deb12-arm64");
        assert!(!old.offered);
        for want in [
            "6.12.95+deb12-arm64",
            "kvm-arm.mode=nested",
            "FEAT_NV2",
            "arm64-vhe",
        ] {
            assert!(old.detail.contains(want), "{want}: {}", old.detail);
        }
        let old_nested = el2_support(false, false, "kvm-arm.mode=nested", vhe, "6.12.95");
        assert!(
            old_nested
                .detail
                .contains("although booted with kvm-arm.mode=nested")
        );
        let no_nv2 = el2_support(false, false, "kvm-arm.mode=nested", "", "7.3.4");
        assert!(
            no_nv2.detail.contains("lacks FEAT_NV2"),
            "{}",
            no_nv2.detail
        );
    }

    fn describe_d(d: [u64; 6], sym: &str) -> String {
        describe(&Exception::from_mailbox(d), sym)
    }

    #[test]
    fn undefined_instruction_from_el1() {
        // udf #0 at EL1h: EC 0, IL 1.
        let s = describe_d(
            [0x0200_0000, 0x4060_0100, 0, 0x3c5, 0x200, 0x4021_0000],
            "selftest_fault+0x0",
        );
        assert!(
            s.starts_with(
                "undefined instruction (EC 0x00) at 0x40600100 (selftest_fault+0x0) in EL1h"
            ),
            "{s}"
        );
        assert!(s.contains("current EL with SP_ELx, synchronous"), "{s}");
        assert!(!s.contains("FAR_EL1"), "FAR is UNKNOWN for EC 0: {s}");
        assert_eq!(ec(0x0200_0000), 0);
    }

    #[test]
    fn exceptions_taken_to_el2_name_the_el2_registers() {
        // udf #0 at EL2h, reported by the EL2 vectors (FAIL_EXC_EL2 in D4).
        let d4 = 0x200 | hypclear_abi::FAIL_EXC_EL2;
        let s = describe_d(
            [0x0200_0000, 0x4060_0100, 0, 0x3c9, d4, 0],
            "selftest_fault+0x0",
        );
        assert!(s.contains("in EL2h"), "{s}");
        assert!(s.contains("VBAR_EL2+0x200"), "{s}");
        assert!(
            s.contains("ESR_EL2 0x2000000") && s.contains("SPSR_EL2 0x3c9"),
            "{s}"
        );
        assert!(!s.contains("_EL1"), "{s}");
        assert!(s.contains("current EL with SP_ELx, synchronous"), "{s}");
        // A data abort at EL2 names FAR_EL2.
        let s = describe_d([0x9600_0047, 0x1000, 0x5000_0000, 0x3c9, d4, 0], "f");
        assert!(s.contains("FAR_EL2 0x50000000"), "{s}");
        // Without the flag the same words are EL1's.
        let s = describe_d([0x0200_0000, 0x4060_0100, 0, 0x3c5, 0x200, 0], "f");
        assert!(s.contains("VBAR_EL1+0x200") && !s.contains("_EL2"), "{s}");
    }

    #[test]
    fn data_aborts_explain_the_fault() {
        // EL1 write translation fault at level 3 (DFSC 0x07), WnR.
        let s = describe_d([0x9600_0047, 0x1000, 0x5000_0000, 0x3c5, 0x200, 0], "f");
        assert!(s.contains("data abort (EC 0x25)"), "{s}");
        assert!(
            s.contains("translation fault at level 3 (address not mapped) on write of 0x50000000"),
            "{s}"
        );
        // Alignment fault read with ISV, 8-byte access into x3.
        let esr = (0x25 << 26) | (1 << 25) | (1 << 24) | (3 << 22) | (3 << 16) | 0x21;
        let s = describe_d([esr, 0, 0x1001, 0x3c5, 0x200, 0], "f");
        assert!(
            s.contains("alignment fault on read of 0x1001, 8-byte access with x3"),
            "{s}"
        );
        assert!(s.contains("MMU off"), "{s}");
        // EL0 permission fault on write, taken from the lower EL.
        let esr = (0x24 << 26) | (1 << 25) | (1 << 6) | 0x0f;
        let s = describe_d([esr, 0, 0x4000_1000, 0x3c0, 0x400, 0], "f");
        assert!(s.contains("data abort from a lower exception level"), "{s}");
        assert!(s.contains("permission fault at level 3 on write"), "{s}");
        assert!(s.contains("EL0 may not access"), "{s}");
        assert!(s.contains("lower EL using AArch64, synchronous"), "{s}");
    }

    #[test]
    fn instruction_abort_and_traps() {
        let s = describe_d(
            [
                (0x21 << 26) | (1 << 25) | 0x0f,
                0x4100_0000,
                0x4100_0000,
                0x3c5,
                0x200,
                0,
            ],
            "x",
        );
        assert!(
            s.contains(
                "permission fault at level 3 fetching 0x41000000 (the page is not executable"
            ),
            "{s}"
        );
        // DC ZVA at EL0 with DZE clear: EC 0x18, op0 1 op1 3 CRn 7 CRm 4 op2 1, Rt 5.
        let iss = (1 << 20) | (1 << 17) | (3 << 14) | (7 << 10) | (5 << 5) | (4 << 1);
        let s = describe_d([(0x18 << 26) | (1 << 25) | iss, 0, 0, 0x3c0, 0x400, 0], "x");
        assert!(s.contains("system instruction DC ZVA with x5"), "{s}");
        assert!(s.contains("SCTLR_EL1.DZE"), "{s}");
        // MRS of CNTVCT_EL0 into x0 at EL0.
        let iss = (3 << 20) | (2 << 17) | (3 << 14) | (14 << 10) | 1;
        let s = describe_d([(0x18 << 26) | iss, 0, 0, 0x3c0, 0x400, 0], "x");
        assert!(s.contains("MRS of CNTVCT_EL0 with x0"), "{s}");
        let s = describe_d([(0x07 << 26) | (1 << 25), 0, 0, 0x3c5, 0x200, 0], "x");
        assert!(s.contains("FP/SIMD"), "{s}");
        let s = describe_d([(0x15 << 26) | 0x42, 0, 0, 0x3c0, 0x400, 0], "x");
        assert!(
            s.contains("SVC (EC 0x15)") && s.contains("immediate 0x42"),
            "{s}"
        );
    }

    #[test]
    fn mops_exception_names_the_registers() {
        // SET* from the epilogue, wrong option (this CPU uses option A): Xd x3, Xs x1, Xn x2.
        let iss = (1 << 24) | (1 << 18) | (1 << 17) | (1 << 16) | (3 << 10) | (1 << 5) | 2;
        let s = describe_d(
            [(0x27 << 26) | (1 << 25) | iss, 0x10, 0, 0x3c5, 0x200, 0],
            "__pi_memset_mops+0x8",
        );
        assert!(
            s.contains("memory copy/set (MOPS) exception (EC 0x27)"),
            "{s}"
        );
        assert!(s.contains("SET sequence with Xd=x3, Xs=x1, Xn=x2, from the epilogue, wrong option (this CPU uses option A)"), "{s}");
    }

    #[test]
    fn async_exceptions_and_vector_names() {
        assert_eq!(vector_name(0x0), "current EL with SP_EL0, synchronous");
        assert_eq!(vector_name(0x280), "current EL with SP_ELx, IRQ");
        assert_eq!(vector_name(0x580), "lower EL using AArch64, SError");
        assert_eq!(vector_name(0x600), "lower EL using AArch32, synchronous");
        let s = describe_d([0, 0x10, 0, 0x3c5, 0x280, 0], "x");
        assert!(s.starts_with("asynchronous exception"), "{s}");
    }

    #[test]
    fn fault_status_codes() {
        assert_eq!(
            fault_status(0x05),
            "translation fault at level 1 (address not mapped)"
        );
        assert_eq!(fault_status(0x0b), "access flag fault at level 3");
        assert_eq!(fault_status(0x21), "alignment fault");
        assert_eq!(fault_status(0x10), "synchronous external abort");
        assert_eq!(fault_status(0x3f), "fault status 0x3f");
    }

    #[test]
    fn midr_names() {
        assert_eq!(
            midr_model(0x000f_0510),
            "QEMU TCG 'max' CPU r0p0 (MIDR_EL1 0x000f0510)"
        );
        assert!(midr_is_emulated(0x000f_0510));
        assert_eq!(
            midr_model(0x413f_d0c1),
            "Arm Neoverse-N1 r3p1 (MIDR_EL1 0x413fd0c1)"
        );
        assert!(!midr_is_emulated(0x413f_d0c1));
        assert!(!midr_is_emulated(0));
        assert_eq!(
            midr_model(0x610f_0220),
            "Apple part 0x022 r0p0 (MIDR_EL1 0x610f0220)"
        );
    }

    #[test]
    fn kvm_mode_from_log_then_cmdline() {
        let vhe = "[    0.5] kvm [1]: VHE mode initialized successfully\n";
        let nvhe = "[    0.5] kvm [1]: Hyp nVHE mode initialized successfully\n";
        let nvhe612 = "[    0.5] kvm [1]: Hyp mode initialized successfully\n";
        let prot = "[    0.5] kvm [1]: Protected nVHE mode initialized successfully\n";
        assert_eq!(flavour_from("", vhe), KvmFlavour::Arm64Vhe);
        assert_eq!(
            flavour_from("kvm-arm.mode=nvhe", nvhe),
            KvmFlavour::Arm64Nvhe
        );
        assert_eq!(flavour_from("", nvhe612), KvmFlavour::Arm64Nvhe);
        assert_eq!(
            flavour_from("kvm-arm.mode=protected", prot),
            KvmFlavour::Arm64Protected
        );
        assert_eq!(
            flavour_from("quiet kvm-arm.mode=protected", ""),
            KvmFlavour::Arm64Protected
        );
        assert_eq!(flavour_from("kvm-arm.mode=nvhe", ""), KvmFlavour::Arm64Nvhe);
        assert_eq!(flavour_from("console=ttyAMA0", ""), KvmFlavour::Arm64);
        // Linux 7.3 with kvm-arm.mode=nested under QEMU -cpu max.
        let nv2 = "[    2.0] kvm [1]: VHE+NV2 mode initialized successfully\n";
        assert_eq!(
            flavour_from("kvm-arm.mode=nested", nv2),
            KvmFlavour::Arm64Nested
        );
        assert_eq!(
            flavour_from("kvm-arm.mode=nested", ""),
            KvmFlavour::Arm64Nested
        );
    }
}
