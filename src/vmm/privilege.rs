//! Choosing the guest privilege level.
//!
//! On PVM (a paravirtual KVM without VMX/SVM) guest code at CPL 0 is
//! emulated instruction by instruction, while CPL 3 runs natively; on VMX,
//! SVM and arm64 KVM the kernel level runs natively. `--cpl auto` measures
//! instead of guessing: it runs a short calibration at the kernel level and
//! reads the vCPU's `insn_emulation` KVM statistic.
use crate::blob::LinkConfig;
use crate::error::{Error, Result};
use crate::routines::{self, Call, Routine};
use crate::vmm::memory::Backing;
use crate::vmm::{Privilege, Vm, VmOptions};
use serde::Serialize;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CplChoice {
    Auto,
    #[value(name = "0")]
    Kernel,
    #[value(name = "3")]
    User,
}

/// The decision and why.
#[derive(Debug, Clone, Serialize)]
pub struct PrivilegeChoice {
    pub privilege: Privilege,
    pub name: &'static str,
    pub reason: String,
    /// Emulated instructions seen during calibration at the kernel level.
    pub calibration_insn_emulation: Option<u64>,
}

/// Calls made at the kernel level to detect emulation.
const CALIBRATION_CALLS: u64 = 64;

pub fn choose(choice: CplChoice) -> Result<PrivilegeChoice> {
    let mk = |p: Privilege, reason: String, n: Option<u64>| PrivilegeChoice {
        privilege: p,
        name: crate::arch::privilege_name(p),
        reason,
        calibration_insn_emulation: n,
    };
    match choice {
        CplChoice::Kernel => return Ok(mk(Privilege::Kernel, "requested".into(), None)),
        CplChoice::User => return Ok(mk(Privilege::User, "requested".into(), None)),
        CplChoice::Auto => {}
    }
    let emulated = calibrate()?;
    Ok(match emulated {
        Some(n) if n >= CALIBRATION_CALLS => mk(
            Privilege::User,
            format!(
                "kernel-level guest code is emulated here ({n} emulated instructions \
                 for {CALIBRATION_CALLS} calibration calls; KVM flavour {})",
                crate::arch::kvm_flavour()
            ),
            Some(n),
        ),
        Some(n) => mk(
            Privilege::Kernel,
            format!(
                "kernel-level guest code runs natively ({n} emulated instructions in calibration)"
            ),
            Some(n),
        ),
        None if crate::arch::kvm_flavour() == "pvm" => mk(
            Privilege::User,
            "no KVM stats; the kvm_pvm module emulates kernel-level guest code".into(),
            None,
        ),
        None => mk(
            Privilege::Kernel,
            "KVM has no insn_emulation statistic here (arm64, or an older kernel): \
             the kernel level is taken to run natively"
                .into(),
            None,
        ),
    })
}

/// Emulated instructions during a short kernel-level run, if KVM says.
fn calibrate() -> Result<Option<u64>> {
    let kvm2 = crate::vmm::open_kvm()?;
    let opts = VmOptions {
        mem: crate::arch::MIN_RAM,
        backing: Backing::Anon,
        prefault: false,
        privilege: Privilege::Kernel,
        config: LinkConfig::Memset,
        vcpus: 1,
        seed: 0,
    };
    let mut vm = Vm::new(kvm2, &opts)?;
    let v = routines::variants(Routine::Memset, LinkConfig::Memset)
        .into_iter()
        .find(|v| v.requires.is_none())
        .ok_or_else(|| Error::Blob("no memset variant without CPU requirements".into()))?;
    let call = Call {
        routine: Routine::Memset,
        dst: crate::arch::ARENA_BASE,
        src: 0,
        fill: 0x5a,
        len: 256,
        count: CALIBRATION_CALLS,
        step: 0,
    };
    let cmd = routines::command(&vm.blob, v, &call)?;
    let timeout = Duration::from_secs(10);
    let cpu = vm.vcpu(0)?;
    cpu.start(timeout)?;
    // Warm up once (first touch of the page), then measure.
    cpu.call(&cmd, timeout)?;
    let r = cpu.call(&cmd, timeout)?;
    Ok(r.stats.get("insn_emulation").copied())
}
