//! The subcommands. Each resolves a [`Ctx`] once (options validated, CPU
//! capabilities read, seed and guest privilege decided, guest RAM size
//! fixed) and then only reads it. run and verify resolve it in two steps:
//! [`boot`] (what a VM needs to boot), then [`Ctx::complete`] while their
//! first VM boots. A new option for run/verify/bench/info goes into
//! `cli.rs` (`Common`, or the subcommand's `*Args`) and, when several
//! commands need its resolved value, into [`boot`] if a VM
//! depends on it, else [`Ctx::complete`].
mod bench;
mod compare;
mod info;
mod kernel;
mod reclaim;
mod run;
mod selftest;
mod sides;
mod verify;

use crate::arch;
use crate::check::verify::Boot;
use crate::cli::{Cli, Cmd, Common, DcZvaChoice, Format};
use crate::error::{Error, Result, VmmError};
use crate::files::Precheck;
use crate::kernel::Side;
use crate::routines::privilege::{self, CplChoice, ElChoice, PrivilegeChoice};
use crate::vmm::{self, VmOptions};
use std::time::{Duration, Instant};

/// Everything decided before the first check runs, decided once.
pub(crate) struct Ctx {
    pub start: Instant,
    pub common: Common,
    pub caps: arch::CpuCaps,
    pub seed: u64,
    pub privilege: PrivilegeChoice,
    /// Guest RAM size for every VM of this command.
    pub mem: u64,
    pub timeout: Duration,
    /// The blob sources to run: built-in link configurations and/or kernel blobs.
    pub sides: Vec<Side>,
}

/// The part of [`Ctx`] a VM needs to boot, resolved first so that run and
/// verify can boot their VMs while the rest is resolved and checked: the
/// options a VM depends on validated, the seed and the guest privilege
/// picked (`--cpl auto` reads its cached decision, or runs a calibration
/// VM).
pub(crate) fn boot(common: &Common, start: Instant, mem: u64) -> Result<Boot> {
    let timeout = crate::cli::timeout(common.timeout)?;
    let request = privilege_request(common)?;
    vmm::validate_mem(mem)?;
    crate::vmm::memory::precheck(mem, common.backing)?;
    Ok(Boot {
        start,
        seed: common.seed.unwrap_or_else(random_seed),
        privilege: privilege::choose(request)?,
        mem,
        timeout,
        backing: common.backing,
        prefault: common.prefault,
    })
}

impl Ctx {
    /// Validate the options and the environment, read the CPU
    /// capabilities, pick the seed and the guest privilege (`--cpl auto`
    /// may run a calibration VM). `mem` is the guest RAM size to use.
    pub(crate) fn resolve(
        common: &Common,
        start: Instant,
        mem: u64,
        sides: Vec<Side>,
    ) -> Result<Ctx> {
        Ctx::complete(common, &boot(common, start, mem)?, sides)
    }

    /// [`Ctx::resolve`] after [`boot`]: the output file and the CPU
    /// capabilities.
    pub(crate) fn complete(common: &Common, early: &Boot, sides: Vec<Side>) -> Result<Ctx> {
        if let Some(path) = &common.json {
            crate::files::precheck_output(path, Precheck::Writable)?;
        }
        let kvm = vmm::open_kvm()?;
        let caps = arch::cpu_caps(&kvm);
        Ok(Ctx {
            start: early.start,
            common: common.clone(),
            caps,
            seed: early.seed,
            privilege: early.privilege.clone(),
            mem: early.mem,
            timeout: early.timeout,
            sides,
        })
    }

    /// Options of one VM of `side`.
    pub(crate) fn vm_options(&self, side: &Side) -> Result<VmOptions> {
        let boot = Boot {
            start: self.start,
            seed: self.seed,
            privilege: self.privilege.clone(),
            mem: self.mem,
            timeout: self.timeout,
            backing: self.common.backing,
            prefault: self.common.prefault,
        };
        Ok(boot.vm_options(side)?)
    }

    /// Whether any side is a kernel blob.
    pub(crate) fn has_kernel_side(&self) -> bool {
        self.sides.iter().any(|s| !s.is_builtin())
    }

    /// A human-readable line: on stdout, or on stderr when stdout carries
    /// a machine format (KTAP) that must hold nothing else.
    pub(crate) fn say(&self, line: impl std::fmt::Display) {
        if self.common.format == Format::Ktap {
            crate::errln!("{line}");
        } else {
            crate::output::print_bytes(format!("{line}\n").as_bytes());
        }
    }
}

pub(crate) fn random_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    t ^ u64::from(std::process::id()).rotate_left(32)
}

/// The privilege request: `--cpl` with `--no-dc-zva` folded in, and `--el`
/// (aarch64 only: a usage error elsewhere).
fn privilege_request(common: &Common) -> Result<privilege::Request> {
    if common.el.is_some() && !cfg!(target_arch = "aarch64") {
        return Err(Error::usage(format!(
            "--el is an arm64 option (exception levels); on {} use --cpl",
            std::env::consts::ARCH
        )));
    }
    Ok(privilege::Request {
        cpl: cpl_choice(common)?,
        el: common.el.unwrap_or(ElChoice::Auto),
    })
}

/// The privilege request, with `--dc-zva` (and `--no-dc-zva`) folded in
/// (checked by [`check_dc_zva`]): off runs the guest at EL0, on and both
/// at EL1 (a bench's sides without DC ZVA then run at EL0, each its own VM).
fn cpl_choice(common: &Common) -> Result<CplChoice> {
    Ok(match common.dc_zva() {
        None => common.cpl,
        Some(DcZvaChoice::Off) => CplChoice::User,
        Some(DcZvaChoice::On | DcZvaChoice::Both) => CplChoice::Kernel,
    })
}

/// `--dc-zva` / `--no-dc-zva`: arm64 only, `both` only for bench (whose
/// sides it doubles), and not against the privilege `--cpl` asks for.
fn check_dc_zva(common: &Common, bench: bool) -> Result<()> {
    let Some(d) = common.dc_zva() else {
        return Ok(());
    };
    let flag = match common.no_dc_zva {
        true => "--no-dc-zva".to_string(),
        false => format!("--dc-zva {}", d.name()),
    };
    if arch::dc_zva_privilege(arch::DcZva::On).is_none() {
        return Err(Error::usage(format!(
            "{flag} is an arm64 option (DC ZVA does not exist on {}); leave it out",
            std::env::consts::ARCH
        )));
    }
    let why = match (d, common.cpl) {
        (DcZvaChoice::Both, _) if !bench => {
            "only bench runs both DC ZVA states (each side twice, interleaved); give on or off"
        }
        (DcZvaChoice::Off, CplChoice::Kernel) => {
            "runs the guest at EL0 (SCTLR_EL1.DZE clear); it cannot be combined with --cpl 0"
        }
        (DcZvaChoice::On | DcZvaChoice::Both, CplChoice::User) => {
            "needs EL1 for DC ZVA (EL0 runs with SCTLR_EL1.DZE clear); leave --cpl 3 out"
        }
        _ => return Ok(()),
    };
    Err(Error::usage(format!("{flag} {why}")))
}

/// Dispatch a parsed command line; returns the process exit status.
///
/// With `--format ktap`, a machine without a usable KVM device is a
/// skipped test run, as kselftest reports it: a `1..0 # SKIP` plan and
/// exit status 4 (KSFT_SKIP).
pub(crate) fn main(cli: Cli, start: Instant) -> Result<i32> {
    let ktap = cli.common.format == Format::Ktap;
    match dispatch(cli, start) {
        Err(e @ Error::Vmm(VmmError::KvmUnavailable { .. })) if ktap => {
            let doc = crate::ktap::Document::SkipAll(e.to_string());
            crate::output::print_bytes(doc.render().as_bytes());
            Ok(crate::ktap::KSFT_SKIP)
        }
        other => other,
    }
}

fn dispatch(cli: Cli, start: Instant) -> Result<i32> {
    let common = &cli.common;
    check_options(&cli)?;
    // Output paths before any work (a --kernel-tree build comes first).
    // run and verify of the built-in routines do nothing slow before their
    // first VM: they check only each target's kind here and whether it can
    // be written while the VM boots (`Ctx::complete`), off the first
    // hypercall's path (making and removing a probe file there cost
    // 0.05-0.1 ms of it).
    let boots_first = matches!(
        cli.command,
        None | Some(Cmd::Run { .. } | Cmd::Verify { .. })
    ) && !common.kernel.is_set();
    let how = match boots_first {
        true => Precheck::Kind,
        false => Precheck::Writable,
    };
    let mut outputs = vec![&common.json];
    if let Some(Cmd::Bench { args, .. }) = &cli.command {
        outputs.extend([&args.csv, &args.plot]);
    }
    for path in outputs.into_iter().flatten() {
        crate::files::precheck_output(path, how)?;
    }
    let command = cli.command.unwrap_or_else(|| Cmd::Run {
        args: crate::cli::RunArgs::default(),
    });
    let sides = sides::command_sides(common, &command)?;
    let resolve = |sides: Vec<Side>| Ctx::resolve(common, start, common.mem(), sides);
    match command {
        Cmd::Blob { args, .. } => kernel::blob(common, &args),
        Cmd::Compare { args, .. } => compare::compare(common, &args),
        Cmd::Completions { shell } => {
            let mut cmd = Cli::command();
            // Into memory first: generate() panics on a failed write.
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut cmd, "hypclear", &mut out);
            crate::output::print_bytes(&out);
            Ok(0)
        }
        Cmd::Man => {
            let cmd = Cli::command();
            let mut out = Vec::new();
            clap_mangen::Man::new(cmd)
                .render(&mut out)
                .map_err(|e| VmmError::Internal(format!("rendering the man page failed: {e}")))?;
            crate::output::print_bytes(&out);
            Ok(0)
        }
        Cmd::Bench { args, .. } => bench::bench(common, &args, start, sides),
        Cmd::Run { args, .. } => run::run(common, &args, start, sides),
        Cmd::Verify { args, .. } => verify::verify(common, &args, start, "verify", sides),
        // A stop request (SIGINT, SIGTERM, SIGHUP) from here on ends the
        // command with what it has, never a silent kill.
        Cmd::Selftest { args, .. } if args.hostile => {
            crate::interrupt::install()?;
            selftest::hostile(&resolve(sides)?, &args.case)
        }
        Cmd::Selftest { .. } => {
            crate::interrupt::install()?;
            selftest::selftest(&resolve(sides)?)
        }
        Cmd::Info => {
            crate::interrupt::install()?;
            info::info(&resolve(sides)?)
        }
        Cmd::Reclaim { args, .. } => reclaim::reclaim(common, &args),
    }
}

/// The common options each subcommand takes (`--format` values, and the
/// few options compare and blob accept).
fn check_options(cli: &Cli) -> Result<()> {
    let common = &cli.common;
    check_dc_zva(common, matches!(cli.command, Some(Cmd::Bench { .. })))?;
    let text_or_ktap = [Format::Text, Format::Ktap];
    match &cli.command {
        Some(Cmd::Run { .. } | Cmd::Verify { .. } | Cmd::Selftest { .. }) | None => {
            common
                .format
                .check("run, verify and selftest", &text_or_ktap)?
        }
        Some(Cmd::Info) => common.format.check("info", &[Format::Text])?,
        Some(Cmd::Bench { .. }) => common.format.check("bench", &text_or_ktap)?,
        Some(Cmd::Compare { .. }) => common.only("compare", &["--format"])?,
        Some(Cmd::Reclaim { .. }) => {
            common.only(
                "reclaim",
                &[
                    "--mem",
                    "--seed",
                    "--json",
                    "--backing",
                    "--timeout",
                    "--format",
                ],
            )?;
            common.format.check("reclaim", &text_or_ktap)?
        }
        Some(Cmd::Blob { .. }) => common.only(
            "blob",
            &[
                "--kernel-tree",
                "--kernel-config",
                "--kernel-build-dir",
                "--arch",
            ],
        )?,
        Some(Cmd::Completions { .. }) => common.only("completions", &[])?,
        Some(Cmd::Man) => common.only("man", &[])?,
    }
    Ok(())
}
