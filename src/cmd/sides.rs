//! The sides a command line asks for: the kernel blobs (`--kernel-tree`,
//! `--blob`) or the built-in link configurations (`--config`), and what
//! each subcommand allows of them.
use crate::blob::LinkConfig;
use crate::cli::{Cmd, Common};
use crate::error::{Error, Result};
use crate::kernel::Side;

/// The sides `command` runs on.
pub(super) fn command_sides(common: &Common, command: &Cmd) -> Result<Vec<Side>> {
    Ok(match command {
        Cmd::Run { .. } | Cmd::Verify { .. } | Cmd::Info => sides(common, SideRules::default())?,
        Cmd::Bench { args, .. } => sides(
            common,
            SideRules {
                several_kernels: true,
                builtin_beside: args.builtin,
            },
        )?,
        Cmd::Blob { .. } => Vec::new(),
        _ if common.kernel.is_set() => {
            return Err(Error::usage(
                "--kernel-tree/--blob apply to run, verify, bench, info and blob only \
                 (selftest runs hypclear's own broken routines; compare reads JSON)"
                    .into(),
            ));
        }
        _ => common
            .builtin_configs()
            .into_iter()
            .map(Side::Builtin)
            .collect(),
    })
}

/// What a subcommand allows of its sides.
#[derive(Debug, Clone, Copy, Default)]
struct SideRules {
    /// Several kernel sides in one invocation (bench).
    several_kernels: bool,
    /// `--builtin`: the built-ins beside the kernel sides.
    builtin_beside: bool,
}

/// The sides of run, verify, info and bench: the kernel blobs asked for
/// (`--kernel-tree`, `--blob`), else the built-in link configurations of
/// `--config`. Only bench takes several kernel sides, and built-ins beside
/// them (`--builtin`: first, in `--config` or else the kernels' link
/// configurations).
fn sides(common: &Common, rules: SideRules) -> Result<Vec<Side>> {
    let SideRules {
        several_kernels: bench,
        builtin_beside: builtin,
    } = rules;
    let kernel = super::kernel::sides(common)?;
    if kernel.is_empty() {
        if builtin {
            return Err(Error::usage(
                "--builtin adds the built-in routines beside --kernel-tree/--blob sides; \
                 without those, bench runs the built-ins anyway (leave --builtin out)"
                    .into(),
            ));
        }
        return Ok(common
            .builtin_configs()
            .into_iter()
            .map(Side::Builtin)
            .collect());
    }
    if !bench && kernel.len() > 1 {
        return Err(Error::usage(format!(
            "{} kernel sides given (--kernel-tree/--blob); only bench runs several in one \
             invocation: give one here",
            kernel.len()
        )));
    }
    let mut kernel_configs: Vec<LinkConfig> = Vec::new();
    for s in &kernel {
        if !kernel_configs.contains(&s.config()) {
            kernel_configs.push(s.config());
        }
    }
    if builtin {
        let configs = common
            .config
            .map_or(kernel_configs, crate::cli::ConfigChoice::configs);
        return Ok(configs
            .into_iter()
            .map(Side::Builtin)
            .chain(kernel)
            .collect());
    }
    if let Some(choice) = common.config
        && let Some(s) = kernel
            .iter()
            .find(|s| !choice.configs().contains(&s.config()))
    {
        return Err(Error::usage(format!(
            "the {} is linked in the {} configuration; --config {} is not available for it \
             (bench: add --builtin to run the built-ins in that configuration beside it)",
            s.describe(),
            s.config(),
            choice.name()
        )));
    }
    Ok(kernel)
}
