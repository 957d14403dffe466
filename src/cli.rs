//! Command-line interface (clap). `hypclear` with no subcommand runs `run`.
use crate::blob::LinkConfig;
use crate::memory::Backing;
use crate::privilege::CplChoice;
use crate::routines::Routine;
use crate::units::clap_size;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "hypclear",
    version,
    about = "Verify and time hyp-style clear_page/memset/memcpy/copy_page routines inside a KVM guest",
    long_about = "hypclear boots a tiny guest blob linked like the arm64 nVHE hyp (position-independent \
                  __pi_ routines reached through an alias table), runs its library routines on guest RAM \
                  and verifies, over exit-based hypercalls, that memory was cleared, filled or copied \
                  exactly. Exit status: 0 all checks passed, 1 a check or the guest failed, 2 usage or \
                  environment error."
)]
pub struct Cli {
    #[command(flatten)]
    pub common: Common,
    #[command(subcommand)]
    pub command: Option<Cmd>,
}

/// Options every subcommand takes.
#[derive(Debug, Clone, Args)]
pub struct Common {
    /// Guest RAM size (B/KB/MB/GB, like perf bench)
    #[arg(long, global = true, default_value = "256MB", value_parser = clap_size)]
    pub mem: u64,
    /// Seed for the load address and the fill patterns (random if not given)
    #[arg(long, global = true)]
    pub seed: Option<u64>,
    /// Guest privilege: auto picks CPL3 where CPL0 would be emulated (PVM)
    #[arg(long, global = true, value_enum, default_value = "auto")]
    pub cpl: CplChoice,
    /// Write the full results as JSON to FILE
    #[arg(long, global = true, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Which blob link configuration(s) to run
    #[arg(long, global = true, value_enum, default_value = "both")]
    pub config: ConfigChoice,
    /// Guest RAM backing
    #[arg(long, global = true, value_enum, default_value = "anon")]
    pub backing: Backing,
    /// Populate guest RAM on the host before the guest starts
    #[arg(long, global = true)]
    pub prefault: bool,
    /// Watchdog: seconds without a hypercall before the guest is declared stuck
    #[arg(long, global = true, default_value_t = 5.0)]
    pub timeout: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConfigChoice {
    Vanilla,
    Memset,
    Both,
}

impl ConfigChoice {
    pub fn configs(self) -> Vec<LinkConfig> {
        match self {
            ConfigChoice::Vanilla => vec![LinkConfig::Vanilla],
            ConfigChoice::Memset => vec![LinkConfig::Memset],
            ConfigChoice::Both => vec![LinkConfig::Vanilla, LinkConfig::Memset],
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Run the whole verification suite (the default)
    Run,
    /// Run verification checks only for some routines / variants
    Verify(VerifyArgs),
    /// Prove the checker can fail: run deliberately broken routines
    Selftest,
    /// Show host, KVM and CPU capabilities, privilege, load address and alias table
    Info,
}

#[derive(Debug, Clone, Default, Args)]
pub struct VerifyArgs {
    /// Routine(s) to check (repeat or comma-separate); default all
    #[arg(long, short = 'r', value_enum, value_delimiter = ',')]
    pub routine: Vec<Routine>,
    /// Variant name(s) to check (e.g. erms); default all
    #[arg(long, short = 'f', value_delimiter = ',')]
    pub variant: Vec<String>,
    /// Check only these sizes (B/KB/MB/GB) instead of the built-in list
    #[arg(long, short = 's', value_parser = clap_size, value_delimiter = ',')]
    pub size: Vec<u64>,
}
