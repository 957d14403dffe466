//! Command-line interface (clap). `hypclear` with no subcommand runs `run`.
use crate::bench::plan::{Plan, Variants};
use crate::blob::LinkConfig;
use crate::routines::Routine;
use crate::routines::privilege::{CplChoice, ElChoice};
use crate::units::clap_size;
use crate::vmm::memory::Backing;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::ffi::OsString;
use std::path::PathBuf;

/// The top level of the tree: what `hypclear --help` says above the
/// subcommands, and the common options.
#[derive(Debug, Parser)]
#[command(
    name = "hypclear",
    version,
    about = "Verify and time hyp-style clear_page/memset/memcpy/copy_page routines inside a KVM guest",
    long_about = "hypclear boots a tiny guest blob linked like the arm64 nVHE hyp (position-independent \
                  __pi_ routines reached through an alias table), runs its library routines on guest RAM \
                  and verifies, over exit-based hypercalls, that memory was cleared, filled or copied \
                  exactly. Exit status: 0 all checks passed, 1 a check or the guest failed (or the \
                  output could not be written), 2 usage or environment error, 130/143/129 stopped \
                  by SIGINT/SIGTERM/SIGHUP (results so far written, marked partial), 141 stdout \
                  closed."
)]
struct Top {
    #[command(flatten, next_help_heading = "Common options")]
    common: Common,
}

/// The parsed command line.
#[derive(Debug, Args)]
pub(crate) struct Cli {
    /// The common options, before or after the subcommand (clap `global`:
    /// the occurrence after the subcommand wins).
    #[command(flatten)]
    pub common: Common,
    #[command(subcommand)]
    pub command: Option<Cmd>,
}

impl Cli {
    /// The whole command tree (help, usage errors, man page, completions).
    pub(crate) fn command() -> clap::Command {
        Cmd::augment_subcommands(<Top as clap::CommandFactory>::command())
    }

    /// The tree with only the subcommands `args` names. Building a tree,
    /// clap copies every global (common) option into every subcommand:
    /// 0.14 ms for all of them, the largest step before the first
    /// hypercall. A line this tree parses parses the same in the whole
    /// tree (the top level takes no positional argument, so any other word
    /// where a subcommand stands is refused); whatever it refuses (help,
    /// a misspelt subcommand, a usage error) is left to the whole tree.
    fn command_naming(args: &[OsString]) -> clap::Command {
        let subcommands = Cmd::augment_subcommands(clap::Command::new("hypclear"));
        let named = subcommands.get_subcommands().filter(|sc| {
            let mut names = std::iter::once(sc.get_name()).chain(sc.get_all_aliases());
            names.any(|n| args.iter().any(|a| a == n))
        });
        <Top as clap::CommandFactory>::command().subcommands(named.cloned())
    }

    /// Parse the process's command line (usage errors exit as clap's do).
    pub(crate) fn parse_args() -> Cli {
        let args: Vec<OsString> = std::env::args_os().collect();
        Self::try_parse(&args).unwrap_or_else(|e| {
            // clap's own exit() ignores a failed write (--help > /dev/full: 0).
            if let Err(err) = e.print() {
                let stream = match e.use_stderr() {
                    true => crate::output::Stream::Stderr,
                    false => crate::output::Stream::Stdout,
                };
                crate::output::record(stream, err);
            }
            std::process::exit(crate::output::exit_status(e.exit_code()))
        })
    }

    /// Parse `args` (the first is the program name); what is refused is
    /// refused, and said, by the whole tree.
    fn try_parse(args: &[OsString]) -> Result<Cli, clap::Error> {
        if let Ok(cli) = Self::parse_with(&mut Self::command_naming(args), args) {
            return Ok(cli);
        }
        let mut cmd = Self::command();
        Self::parse_with(&mut cmd, args).map_err(|e| e.format(&mut cmd))
    }

    #[cfg(test)]
    pub(crate) fn try_parse_args<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString>,
    {
        Self::try_parse(&args.into_iter().map(Into::into).collect::<Vec<_>>())
    }

    fn parse_with(cmd: &mut clap::Command, args: &[OsString]) -> Result<Cli, clap::Error> {
        use clap::FromArgMatches;
        let m = cmd.try_get_matches_from_mut(args)?;
        let mut cli = Cli::from_arg_matches(&m)?;
        cli.common.given = given_flags(cmd, &m);
        Ok(cli)
    }
}

/// The long names of the top-level (common) options whose value came from
/// the command line, at the top or after a subcommand (`global`).
fn given_flags(cmd: &clap::Command, m: &clap::ArgMatches) -> Vec<String> {
    let mut levels = vec![m];
    while let Some((_, sub)) = levels.last().and_then(|l| l.subcommand()) {
        levels.push(sub);
    }
    let from_cli = |id: &clap::Id| {
        levels.iter().any(|l| {
            // An id a subcommand does not know is no error here.
            l.try_contains_id(id.as_str()).unwrap_or(false)
                && l.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine)
        })
    };
    cmd.get_arguments()
        .filter(|a| from_cli(a.get_id()))
        .filter_map(|a| a.get_long())
        .map(|long| format!("--{long}"))
        .collect()
}

// Options every subcommand that runs or reads results takes, before or
// after its name. (A doc comment here would become the about text of
// every subcommand that flattens it.)
#[derive(Debug, Clone, Args)]
pub(crate) struct Common {
    /// Guest RAM size (B/KB/MB/GB, like perf bench) [default: 256MB; bench: what -s needs]
    #[arg(long, value_parser = clap_size, global = true)]
    pub mem: Option<u64>,
    /// Seed for the load address and the fill patterns (random if not given)
    #[arg(long, global = true)]
    pub seed: Option<u64>,
    /// Guest privilege: auto picks CPL3 where CPL0 would be emulated (PVM)
    #[arg(long, value_enum, default_value = "auto", global = true)]
    pub cpl: CplChoice,
    /// aarch64: exception level of the kernel-level routines: 2 runs them at
    /// EL2 as a non-VHE guest hypervisor (nested virtualization, E2H=0, like
    /// the nVHE hyp); auto picks EL2 where KVM offers it, else EL1 [default: auto]
    #[arg(long, value_enum, global = true)]
    pub el: Option<ElChoice>,
    /// Write the full results as JSON to FILE
    #[arg(long, value_name = "FILE", global = true)]
    pub json: Option<PathBuf>,
    /// Which built-in link configuration(s) to run [default: both; with a
    /// kernel side and bench --builtin: the kernel's configuration]
    #[arg(long, value_enum, global = true)]
    pub config: Option<ConfigChoice>,
    /// Guest RAM backing (and the host baseline's buffer); bench compares
    /// the --backings it is given, this one when only it is given
    #[arg(long, value_enum, global = true, default_value = "anon")]
    pub backing: Backing,
    /// Populate guest RAM on the host before the guest starts
    #[arg(long, global = true)]
    pub prefault: bool,
    /// aarch64: whether the routines may use DC ZVA. off runs them where it
    /// is prohibited (EL0 with SCTLR_EL1.DZE clear, so DCZID_EL0.DZP reads
    /// 1), on at EL1; bench both: every side with and without it, the seed's
    /// four columns (vanilla, patch, stnp, patch_stp) from two --kernel-tree
    #[arg(long, value_enum, value_name = "on|off|both", global = true)]
    pub dc_zva: Option<DcZvaChoice>,
    /// aarch64: the same as --dc-zva off
    #[arg(long, conflicts_with = "dc_zva", global = true)]
    pub no_dc_zva: bool,
    /// Watchdog: seconds of vCPU CPU time one command (or the boot) may take
    /// before the guest is declared stuck (a vCPU asleep in KVM_RUN: as long
    /// asleep); time stopped or waiting for a CPU does not count, nor do logs
    /// extend it (0 < s <= 86400)
    #[arg(long, default_value_t = 5.0, global = true)]
    pub timeout: f64,
    /// What a check verifies: the target and its guards, or all guest RAM
    /// outside the harness areas ("nothing more"; slower: use a small --mem)
    #[arg(long, value_enum, default_value = "target", global = true)]
    pub check: crate::check::checker::Scope,
    /// Output format: text tables; ktap (run, verify, selftest: KTAP version 1
    /// for kernel CI); markdown or rst (compare)
    #[arg(long, value_enum, default_value = "text", global = true)]
    pub format: Format,
    #[command(flatten)]
    pub kernel: KernelArgs,
    /// The common options given on the command line (clap's value source,
    /// so one given at its default value counts), by flag, in declaration
    /// order: filled when the command line is parsed.
    #[arg(skip)]
    pub given: Vec<String>,
}

/// How results are printed on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    Text,
    Ktap,
    Markdown,
    Rst,
}

impl Format {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Ktap => "ktap",
            Format::Markdown => "markdown",
            Format::Rst => "rst",
        }
    }

    /// Usage error unless this command supports the format.
    pub(crate) fn check(self, command: &str, supported: &[Format]) -> crate::error::Result<()> {
        if supported.contains(&self) {
            return Ok(());
        }
        Err(crate::error::Error::usage(format!(
            "`{command}` does not print --format {}; use one of: {}",
            self.name(),
            supported
                .iter()
                .map(|f| f.name())
                .collect::<Vec<_>>()
                .join(", ")
        )))
    }
}

// Running a kernel tree's own routines instead of the built-ins. (Not a
// doc comment: see `Common`.)
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct KernelArgs {
    /// Build and run this kernel tree's own clear_page/memset/memcpy/copy_page
    /// (kbuild into --kernel-build-dir, then linked like the nVHE hyp)
    /// (bench: repeatable, each tree a side, sessions interleaved)
    #[arg(long, value_name = "PATH", global = true)]
    pub kernel_tree: Vec<PathBuf>,
    /// Kernel configuration: a .config FILE or `defconfig` [default: the tree's .config, else defconfig]
    #[arg(long, value_name = "FILE|defconfig", global = true)]
    pub kernel_config: Option<String>,
    /// kbuild output directory [default: a cache dir keyed by tree path + config hash]
    #[arg(long, value_name = "DIR", global = true)]
    pub kernel_build_dir: Option<PathBuf>,
    /// Architecture of the kernel blob (only `blob` can build for another one)
    #[arg(long, value_parser = parse_arch, global = true)]
    pub arch: Option<crate::kernel::tree::Arch>,
    /// Kernel alternatives at load time: host (what the host kernel decided),
    /// guest (the guest's CPUID view), none, or FEATURE[,FEATURE..]. Default:
    /// run/verify check every path the alternatives can take, bench and
    /// info take the host's
    #[arg(long, value_name = "host|guest|none|FEATURES", global = true)]
    pub alternatives: Option<String>,
    /// Run a kernel blob file made by `hypclear blob` (no toolchain needed;
    /// bench: repeatable, each file a side)
    #[arg(long, value_name = "FILE", global = true)]
    pub blob: Vec<PathBuf>,
}

impl KernelArgs {
    pub(crate) fn is_set(&self) -> bool {
        !self.kernel_tree.is_empty() || !self.blob.is_empty()
    }
}

fn parse_arch(s: &str) -> Result<crate::kernel::tree::Arch, String> {
    match s {
        "x86_64" | "x86" | "amd64" => Ok(crate::kernel::tree::Arch::X86_64),
        "aarch64" | "arm64" => Ok(crate::kernel::tree::Arch::Aarch64),
        _ => Err(format!("unknown architecture `{s}`: use x86_64 or aarch64")),
    }
}

/// `bench --backings` when neither it nor `--backing` is given.
const BENCH_BACKING: Backing = Backing::Thp;

/// Guest RAM when --mem is not given.
pub(crate) const DEFAULT_MEM: u64 = 256 << 20;

impl Common {
    pub(crate) fn mem(&self) -> u64 {
        self.mem.unwrap_or(DEFAULT_MEM)
    }

    /// Usage error (exit 2, naming the option) when a common option other
    /// than those in `applies` was given to `command`: compare and blob
    /// took `--json F --mem 0 --timeout nan` silently.
    pub(crate) fn only(&self, command: &str, applies: &[&str]) -> crate::error::Result<()> {
        let extra: Vec<&str> = self
            .given
            .iter()
            .map(String::as_str)
            .filter(|f| !applies.contains(f))
            .collect();
        if extra.is_empty() {
            return Ok(());
        }
        Err(crate::error::Error::usage(format!(
            "`{command}` does not take {} (it takes {}); leave {} out",
            extra.join(", "),
            if applies.is_empty() {
                "none of the common options".to_string()
            } else {
                applies.join(", ")
            },
            if extra.len() == 1 { "it" } else { "them" }
        )))
    }

    /// `--dc-zva`, with `--no-dc-zva` folded in (`off`).
    pub(crate) fn dc_zva(&self) -> Option<DcZvaChoice> {
        match self.no_dc_zva {
            true => Some(DcZvaChoice::Off),
            false => self.dc_zva,
        }
    }

    /// The built-in link configurations `--config` asks for (default both).
    pub(crate) fn builtin_configs(&self) -> Vec<LinkConfig> {
        self.config.unwrap_or(ConfigChoice::Both).configs()
    }
}

/// `--dc-zva`: one DC ZVA state, or (bench) both as a side dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum DcZvaChoice {
    On,
    Off,
    Both,
}

impl DcZvaChoice {
    pub(crate) fn name(self) -> &'static str {
        match self {
            DcZvaChoice::On => "on",
            DcZvaChoice::Off => "off",
            DcZvaChoice::Both => "both",
        }
    }

    /// The DC ZVA states of the sides, in column order.
    pub(crate) fn states(self) -> Vec<crate::arch::DcZva> {
        use crate::arch::DcZva;
        match self {
            DcZvaChoice::On => vec![DcZva::On],
            DcZvaChoice::Off => vec![DcZva::Off],
            DcZvaChoice::Both => vec![DcZva::On, DcZva::Off],
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ConfigChoice {
    Vanilla,
    Memset,
    Both,
}

impl ConfigChoice {
    pub(crate) fn name(self) -> &'static str {
        match self {
            ConfigChoice::Vanilla => "vanilla",
            ConfigChoice::Memset => "memset",
            ConfigChoice::Both => "both",
        }
    }

    pub(crate) fn configs(self) -> Vec<LinkConfig> {
        match self {
            ConfigChoice::Vanilla => vec![LinkConfig::Vanilla],
            ConfigChoice::Memset => vec![LinkConfig::Memset],
            ConfigChoice::Both => vec![LinkConfig::Vanilla, LinkConfig::Memset],
        }
    }
}

// Each subcommand's own arguments are built only when it is the one on
// the command line (`defer`; man and completions build the whole tree).
// (A doc comment here would become the about text of the tree.)
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(crate) enum Cmd {
    /// Run the whole verification suite (the default)
    Run {
        #[command(flatten)]
        args: RunArgs,
    },
    /// Run verification checks only for some routines / variants
    Verify {
        #[command(flatten)]
        args: VerifyArgs,
    },
    /// Prove the checker can fail: run deliberately broken routines
    Selftest {
        #[command(flatten)]
        args: SelftestArgs,
    },
    /// Show host, KVM and CPU capabilities, privilege, load address and alias table
    Info,
    /// perf-bench-style throughput inside the guest, with a host baseline
    Bench {
        #[command(flatten)]
        args: Box<BenchArgs>,
    },
    /// Compare bench JSON: change with CI, q and equivalence marks, like the seed's table
    Compare {
        #[command(flatten)]
        args: CompareArgs,
    },
    /// Build a kernel blob file from --kernel-tree (cross-compiles with --arch)
    Blob {
        #[command(flatten)]
        args: BlobArgs,
    },
    /// arm64 pKVM: fill a protected VM's RAM, destroy it, check every page reads zero (with a normal-VM control)
    #[command(
        long_about = "On a pKVM host (arm64, Linux 7.1+, kvm-arm.mode=protected): create a protected VM \
                      (KVM_VM_TYPE_ARM_PROTECTED) of --mem bytes [default: 64MB], let its guest write a \
                      seeded pattern over the arena (guest RAM past the harness's first 16 MiB) with the \
                      blob's own memset, timed by the guest counter and reported over the doorbell, power \
                      it off, close its fds (timed: the hypervisor reclaims the pages) and verify from the \
                      host that every arena page, the mailbox page and the blob's entry page read zero. \
                      The control, the same run as an ordinary VM, must keep the pattern. Where protected \
                      VMs are not offered: SKIP with the reason (exit 4 with --format ktap, else 2)."
    )]
    Reclaim {
        #[command(flatten)]
        args: ReclaimArgs,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) on stdout, e.g. `hypclear man > hypclear.1`
    Man,
}

#[derive(Debug, Clone, Args)]
pub(crate) struct ReclaimArgs {
    /// Only the protected VM, without the ordinary-VM control (which shows
    /// that the zero check can fail)
    #[arg(long)]
    pub no_control: bool,
}

/// `reclaim`'s guest RAM when --mem is not given.
pub(crate) const RECLAIM_MEM: u64 = 64 << 20;

#[derive(Debug, Clone, Args)]
pub(crate) struct BlobArgs {
    /// The blob file to write
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
}

#[derive(Debug, Clone, Args)]
pub(crate) struct BenchArgs {
    /// Routine to benchmark
    #[arg(value_enum)]
    pub routine: Routine,
    /// Total bytes per measured pass (B/KB/MB/GB)
    #[arg(short = 's', long = "size", default_value = "256MB", value_parser = clap_size)]
    pub size: u64,
    /// Chunk size per call, or several (comma-separated) [default: the whole -s]
    #[arg(short = 'k', long = "chunk", value_parser = clap_size, value_delimiter = ',')]
    pub chunk: Vec<u64>,
    /// Variant(s), or `all`
    #[arg(
        short = 'f',
        long = "function",
        default_value = "all",
        value_delimiter = ','
    )]
    pub function: Vec<String>,
    /// Passes per measured run
    #[arg(short = 'l', long = "loops", default_value_t = 1)]
    pub loops: u64,
    /// Clearing order(s)
    #[arg(long, value_enum, value_delimiter = ',', default_value = "forward")]
    pub order: Vec<crate::bench::Order>,
    /// Fill state(s): demand (first touch inside the measurement) or populate
    #[arg(
        long = "fill",
        value_enum,
        value_delimiter = ',',
        default_value = "populate"
    )]
    pub fill: Vec<crate::bench::PageState>,
    /// Backing(s) to compare [default: thp, as QEMU and cloud-hypervisor
    /// back guest RAM (with 4 KiB pages a guest pays for its two-level page
    /// walks: docs/method.md); a --backing given alone sets it]
    #[arg(long = "backings", value_enum, value_delimiter = ',')]
    pub backings: Vec<Backing>,
    /// Unmeasured warm-up runs per session (at least; see --max-warmup)
    #[arg(long, default_value_t = 1)]
    pub warmup: u64,
    /// Run until the last 5 runs are steady (no Mann-Kendall trend, within
    /// 2%), whose last --repeats are then the first measured ones, at most
    /// this many runs; 0: exactly --warmup runs, then --repeats
    #[arg(long, default_value_t = 20)]
    pub max_warmup: u64,
    /// Precondition of every timed pass, guest and host: cold evicts the
    /// target (and a copy's source) from the caches first
    #[arg(long, value_enum, default_value = "cold")]
    pub cache: crate::bench::Cache,
    /// Undisturbed measured runs per session, guest and host alike: a run
    /// that lost time to other tasks (or ran emulated code where the
    /// session does not) is repeated, up to --max-runs
    #[arg(long, default_value_t = 3)]
    pub repeats: u64,
    /// Measured runs per session and side at most, disturbed ones
    /// included; a cell whose session reaches it short of --repeats is
    /// reported "unmeasurable under load" [default: 4 x --repeats]
    #[arg(long)]
    pub max_runs: Option<u64>,
    /// Scheduling of the timed threads (guest vCPUs, host baseline): a
    /// busy machine preempts a normal thread mid-pass, and such runs are
    /// repeated; refused (not root), the next one down, said on stderr
    #[arg(long, value_enum, default_value = "fifo")]
    pub priority: crate::bench::Priority,
    /// Sessions (a fresh VM each): exactly N. Without it: at least 4, and
    /// two more at a time until --precision is reached, at most
    /// --max-sessions
    #[arg(long)]
    pub sessions: Option<u64>,
    /// Add sessions until every cell's 95% intervals (its guest throughput
    /// and, with a host baseline, its guest/host) lie within +-PCT% of
    /// their estimates; off: exactly --sessions. [default: 1 without
    /// --sessions, off with it]
    #[arg(long, value_name = "PCT|off", value_parser = clap_precision)]
    pub precision: Option<PrecisionArg>,
    /// Sessions at most under --precision [default: 50 x the planned sessions]
    #[arg(long)]
    pub max_sessions: Option<u64>,
    /// Wall seconds of sessions at most under --precision: no pair is
    /// added that would pass it at the mean session so far (the planned
    /// sessions always run) [default: 28]
    #[arg(long, value_name = "SECS")]
    pub max_seconds: Option<f64>,
    /// vCPUs clearing disjoint regions at once
    #[arg(long, default_value_t = 1)]
    pub vcpus: u64,
    /// Skip the host baseline
    #[arg(long)]
    pub no_host: bool,
    /// With --kernel-tree/--blob: also run the built-in routines as a side
    /// (first, so it is the base of `compare FILE`), in --config or else
    /// the kernel's link configuration; sessions interleave all sides
    #[arg(long)]
    pub builtin: bool,
    /// With --kernel-tree/--blob and no --alternatives: time every
    /// alternatives path of the routine the guest can run, each its own
    /// side (default: the host kernel's pick only)
    #[arg(long)]
    pub every_path: bool,
    /// For every cell whose guest/host lies outside 0.95-1.05 (=all: every
    /// cell): run it again under variants that each change one cause
    /// (backing page size, --prefault, --cache, x86 --cpl), the base
    /// settings beside them, sessions interleaved, and say which variant
    /// moves the ratio
    #[arg(
        long,
        value_enum,
        value_name = "CELLS",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "gaps",
        conflicts_with = "no_host"
    )]
    pub explain: Option<crate::bench::explain::Scope>,
    /// Two sides (or one side's two -f variants) in ONE guest, called in
    /// turn on the same buffer in randomised ABBA blocks, each call timed:
    /// the paired change, its interval and MDE; where they cannot share a
    /// guest (--vcpus, --fill demand, privileges), says why and pairs
    /// sessions as without it
    #[arg(long)]
    pub ab: bool,
    /// A/B (implies --ab): add blocks until the change is flagged or shown
    /// equivalent within +-PCT%, or --budget is spent, and say which
    #[arg(long, value_name = "PCT", value_parser = clap_detect)]
    pub detect: Option<f64>,
    /// A/B: wall seconds per pair of cells at most [default: 15 with
    /// --detect, else 5]
    #[arg(long, value_name = "SECS", value_parser = clap_budget)]
    pub budget: Option<f64>,
    /// Write every raw sample as CSV
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Draw throughput against chunk size per variant (SVG)
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Throughput unit of the table: GB/sec as perf bench prints it (2^30
    /// bytes/s), B/s (bytes/sec), or decimal KB/s, MB/s, GB/s (10^9)
    #[arg(long, value_enum, default_value = "GB/sec")]
    pub unit: crate::units::Rate,
}

#[derive(Debug, Clone, Args)]
pub(crate) struct CompareArgs {
    /// Baseline bench JSON; alone: its two link configurations (from
    /// `bench --config both`) against each other, sessions paired
    pub base: PathBuf,
    /// Bench JSON files to compare against the baseline (separate invocations)
    pub new: Vec<PathBuf>,
    /// Significance level (q values, Benjamini-Hochberg) and 1 - confidence of the intervals
    #[arg(long, default_value_t = 0.05)]
    pub alpha: f64,
    /// Equivalence margin as a fraction: (=) when the interval lies inside +-margin
    #[arg(long, default_value_t = 0.02)]
    pub margin: f64,
    /// Files from several hosts: one table per host ("Results for <host>:"),
    /// each host's files compared with its first
    #[arg(long, conflicts_with = "allow_different_hosts")]
    pub per_host: bool,
    /// Throughput unit of the tables: bytes/sec like perf bench (B/s), or
    /// decimal multiples (KB/s = 10^3, MB/s = 10^6, GB/s = 10^9 bytes/s);
    /// the JSON always holds bytes/sec
    #[arg(long, value_enum, default_value = "B/s")]
    pub unit: crate::units::Rate,
    /// Compare results from different hosts anyway
    #[arg(long)]
    pub allow_different_hosts: bool,
    /// Compare built-in routines with a kernel tree's (--kernel-tree/--blob) anyway
    #[arg(long)]
    pub allow_mixed: bool,
}

#[derive(Debug, Clone, Default, Args)]
pub(crate) struct SelftestArgs {
    /// Run the hostile-guest suite instead: guests that flood logs, forge
    /// results, ring odd doorbells, corrupt the harness or spin
    #[arg(long)]
    pub hostile: bool,
    /// With --hostile: only these cases (comma-separated)
    #[arg(long, value_delimiter = ',', requires = "hostile")]
    pub case: Vec<String>,
}

#[derive(Debug, Clone, Default, Args)]
pub(crate) struct VerifyArgs {
    /// Routine(s) to check (repeat or comma-separate); default all
    #[arg(long, short = 'r', value_enum, value_delimiter = ',')]
    pub routine: Vec<Routine>,
    /// Variant name(s) to check (e.g. erms); default all
    #[arg(long, short = 'f', value_delimiter = ',')]
    pub variant: Vec<String>,
    /// Check only these sizes (B/KB/MB/GB) instead of the built-in list
    #[arg(long, short = 's', value_parser = clap_size, value_delimiter = ',')]
    pub size: Vec<u64>,
    #[command(flatten)]
    pub run: RunArgs,
}

/// `run`'s own options (verify takes them too).
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct RunArgs {
    /// quick: the built-in sizes and offsets, every residue mod 64 at
    /// 1KB, 4KB, 64KB and 2MB, 16 random sizes from the seed (printed), one
    /// size above 32MB; memset with 0, 0xff and a seeded byte (above 16KB:
    /// 0 and one of the others). full: also every size 0..1024 at every
    /// offset 0..63 (memcpy: every source offset too), the hypervisor's
    /// page-order sizes, odd clear_pages extents, a size above 4GB (SKIP
    /// below the --mem it needs), every fill at every size
    #[arg(long, value_enum, default_value_t)]
    pub geometry: crate::check::suite::Geometry,
}

impl CompareArgs {
    /// What `compare` was asked for: the statistics, the host check, the
    /// table format (`--format`; text for anything but markdown and rst,
    /// which `compare` refuses before) and the unit.
    pub(crate) fn options(&self, common: &Common) -> crate::bench::compare::CompareOptions {
        use crate::bench::compare::Format as Table;
        crate::bench::compare::CompareOptions {
            alpha: self.alpha,
            margin: self.margin,
            allow_different_hosts: self.allow_different_hosts,
            format: match common.format {
                Format::Markdown => Table::Markdown,
                Format::Rst => Table::Rst,
                _ => Table::Text,
            },
            unit: self.unit,
        }
    }
}

/// `--detect PCT`: a fraction in (0, 0.5].
fn clap_detect(s: &str) -> Result<f64, String> {
    let pct: f64 = s
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("`{s}` is not a percentage: give e.g. 1% (a change of 1%)"))?;
    match pct > 0.0 && pct <= 50.0 {
        true => Ok(pct / 100.0),
        false => Err(format!(
            "{s}: the change to detect must be above 0% and at most 50%"
        )),
    }
}

/// `--budget SECS`: positive and at most a day.
fn clap_budget(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('s').parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 86400.0 => Ok(v),
        _ => Err(format!("`{s}`: give seconds above 0 (e.g. 15)")),
    }
}

impl BenchArgs {
    /// `--ab` / `--detect`: how an A/B run stops (`None`: no A/B).
    pub(crate) fn ab(&self) -> Option<crate::bench::ab::AbOptions> {
        (self.ab || self.detect.is_some()).then(|| crate::bench::ab::AbOptions {
            detect: self.detect,
            budget: std::time::Duration::from_secs_f64(self.budget.unwrap_or(match self.detect {
                Some(_) => 15.0,
                None => 5.0,
            })),
            alpha: 0.05,
        })
    }

    /// The bench plan of this command line, validated (usage errors before
    /// KVM). A new bench axis is its option above, its field here and its
    /// expansion in `bench/plan.rs`.
    pub(crate) fn plan(
        &self,
        common: &Common,
        sides: &[crate::kernel::Side],
    ) -> crate::error::Result<Plan> {
        let a = self;
        let plan = Plan {
            routine: a.routine,
            shape: crate::bench::Shape {
                size: a.size,
                loops: a.loops,
                vcpus: a.vcpus,
            },
            chunks: if a.chunk.is_empty() {
                vec![a.routine.fixed_size().unwrap_or(a.size)]
            } else {
                a.chunk.clone()
            },
            variants: Variants::from_names(&a.function),
            orders: a.order.clone(),
            fills: a.fill.clone(),
            backings: match (
                a.backings.is_empty(),
                common.given.iter().any(|g| g == "--backing"),
            ) {
                (false, _) => a.backings.clone(),
                (true, true) => vec![common.backing],
                (true, false) => vec![BENCH_BACKING],
            },
            sides: crate::bench::PlanSide::expand(
                sides,
                &common.dc_zva().map(DcZvaChoice::states).unwrap_or_default(),
            ),
            warmup: a.warmup,
            max_warmup: a.max_warmup,
            repeats: a.repeats,
            max_runs: a.max_runs.unwrap_or(
                a.repeats
                    .saturating_mul(crate::bench::plan::DEFAULT_MAX_RUNS_FACTOR),
            ),
            sessions: a.sessions.unwrap_or(DEFAULT_SESSIONS),
            precision: a.precision()?,
            priority: a.priority,
            cache: a.cache,
            // The host baseline runs hypclear's own routine objects, so
            // only the built-in sides have one (a kernel blob's routines
            // exist only in the guest image).
            host_baseline: !a.no_host,
            prefault: common.prefault,
            timeout: timeout(common.timeout)?,
        };
        plan.validate(common.mem)?;
        Ok(plan)
    }
}

/// Sessions of a bench without `--sessions` (at least, under `--precision`).
pub(crate) const DEFAULT_SESSIONS: u64 = 4;

/// `--max-sessions` without it: this many times the planned sessions (so
/// that `--max-seconds` is what ends a noisy run).
pub(crate) const DEFAULT_MAX_SESSIONS_FACTOR: u64 = 50;

/// `--precision` without `--sessions`: +-1%, the size of the changes
/// reviewers argue about (issue 37), within [`DEFAULT_MAX_SECONDS`].
pub(crate) const DEFAULT_PRECISION_PCT: f64 = 1.0;

/// `--max-seconds` without it: with setup and reporting (about half a
/// second), an answer (or "NOT reached") within half a minute.
pub(crate) const DEFAULT_MAX_SECONDS: f64 = 28.0;

/// `--precision PCT|off`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum PrecisionArg {
    Off,
    Pct(f64),
}

fn clap_precision(s: &str) -> Result<PrecisionArg, String> {
    if s == "off" {
        return Ok(PrecisionArg::Off);
    }
    let pct: f64 = s
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("`{s}` is not a percentage: give e.g. 2.5 (for +-2.5%) or off"))?;
    match pct > 0.0 && pct <= 50.0 {
        true => Ok(PrecisionArg::Pct(pct)),
        false => Err(format!(
            "{s}: give a half-width above 0 and at most 50 (percent)"
        )),
    }
}

impl BenchArgs {
    /// The precision rule: `--precision`, or its default without
    /// `--sessions`; with its cap.
    fn precision(&self) -> crate::error::Result<Option<crate::bench::precision::Precision>> {
        let pct = match (self.precision, self.sessions) {
            (Some(PrecisionArg::Off), _) | (None, Some(_)) => None,
            (Some(PrecisionArg::Pct(p)), _) => Some(p),
            (None, None) => Some(DEFAULT_PRECISION_PCT),
        };
        let planned = self.sessions.unwrap_or(DEFAULT_SESSIONS);
        let usage = |m: String| Err(crate::error::Error::usage(m));
        let caps = self.max_sessions.is_some() || self.max_seconds.is_some();
        match (pct, self.max_sessions) {
            (None, _) if caps => usage(
                "--max-sessions and --max-seconds cap --precision, which is off here \
                 (--sessions N runs exactly N): add --precision PCT, or leave them out"
                    .into(),
            ),
            (Some(_), Some(m)) if m < planned => usage(format!(
                "--max-sessions {m} is below the {planned} planned sessions: use {planned} or more"
            )),
            (None, _) => Ok(None),
            (Some(p), m) => Ok(Some(crate::bench::precision::Precision {
                half_width: p / 100.0,
                max_sessions: m.unwrap_or(planned.saturating_mul(DEFAULT_MAX_SESSIONS_FACTOR)),
                max_seconds: seconds(
                    "--max-seconds",
                    self.max_seconds.unwrap_or(DEFAULT_MAX_SECONDS),
                )?,
            })),
        }
    }
}

/// Longest accepted `--timeout` (and `--max-seconds`).
pub(crate) const MAX_TIMEOUT_S: f64 = 86_400.0;

/// `--timeout` as a Duration: finite, above 0, at most a day (usage error,
/// exit 2, otherwise; never a panic or a wrapped deadline).
pub(crate) fn timeout(secs: f64) -> crate::error::Result<std::time::Duration> {
    seconds("--timeout", secs)
}

/// Option `flag`'s seconds as a Duration, as [`timeout`] takes them.
fn seconds(flag: &str, secs: f64) -> crate::error::Result<std::time::Duration> {
    if !(secs.is_finite() && secs > 0.0 && secs <= MAX_TIMEOUT_S) {
        return Err(crate::error::Error::usage(format!(
            "{flag} {secs} is not usable: give seconds above 0 and at most {MAX_TIMEOUT_S} (one day)"
        )));
    }
    std::time::Duration::try_from_secs_f64(secs)
        .map_err(|e| crate::error::Error::usage(format!("{flag} {secs}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Command-line words that set common option `id` away from its
    /// default. A new common option needs its line here.
    fn sample(id: &str) -> Vec<&'static str> {
        match id {
            "mem" => vec!["--mem", "64MB"],
            "seed" => vec!["--seed", "7"],
            "cpl" => vec!["--cpl", "3"],
            "el" => vec!["--el", "1"],
            "json" => vec!["--json", "/tmp/out.json"],
            "config" => vec!["--config", "memset"],
            "backing" => vec!["--backing", "thp"],
            "prefault" => vec!["--prefault"],
            "no_dc_zva" => vec!["--no-dc-zva"],
            "dc_zva" => vec!["--dc-zva", "both"],
            "timeout" => vec!["--timeout", "7"],
            "check" => vec!["--check", "whole"],
            "format" => vec!["--format", "ktap"],
            "kernel_tree" => vec!["--kernel-tree", "/src/linux"],
            "kernel_config" => vec!["--kernel-config", "defconfig"],
            "kernel_build_dir" => vec!["--kernel-build-dir", "/tmp/kb"],
            "arch" => vec!["--arch", "arm64"],
            "alternatives" => vec!["--alternatives", "none"],
            "blob" => vec!["--blob", "/tmp/k.blob"],
            other => panic!("common option `{other}` has no sample: add one to this test"),
        }
    }

    fn parse(words: &[&str]) -> Cli {
        let argv = std::iter::once("hypclear").chain(words.iter().copied());
        Cli::try_parse_args(argv).unwrap_or_else(|e| panic!("{words:?}: {e}"))
    }

    fn show(c: &Common) -> String {
        format!("{c:?}")
    }

    #[test]
    fn the_command_definition_is_valid() {
        Cli::command().debug_assert();
    }

    fn argv(words: &[&str]) -> Vec<OsString> {
        let argv = std::iter::once("hypclear").chain(words.iter().copied());
        argv.map(Into::into).collect()
    }

    /// What `cmd` makes of `words`: the parsed line, or None when it is
    /// refused (how is the whole tree's to say).
    fn outcome(mut cmd: clap::Command, words: &[&str]) -> Option<String> {
        let parsed = Cli::parse_with(&mut cmd, &argv(words));
        parsed.ok().map(|c| format!("{c:?}"))
    }

    #[test]
    fn the_tree_of_the_named_subcommands_parses_as_the_whole_tree() {
        let lines: &[&[&str]] = &[
            &[],
            &["verify", "--routine", "memset", "--size", "4096"],
            &[
                "--seed", "1", "bench", "memset", "-s", "4KB", "--json", "run",
            ],
            &["--json", "verify"],
            &["--json", "run", "verify", "--mem", "64MB"],
            &["compare", "a.json", "b.json", "--format", "rst"],
            &["info"],
            &["man"],
            &["run", "verify"],
            &["verfy"],
            &["help", "verify"],
            &["--help"],
            &["bench", "--help"],
            &["--version"],
            &["--mem"],
        ];
        for words in lines {
            let pruned = outcome(Cli::command_naming(&argv(words)), words);
            assert_eq!(pruned, outcome(Cli::command(), words), "{words:?}");
        }
        let kept = Cli::command_naming(&argv(&["--json", "run", "verify"]));
        let names: Vec<&str> = kept.get_subcommands().map(|s| s.get_name()).collect();
        assert_eq!(names, ["run", "verify"]);
    }

    #[test]
    fn help_and_refusals_come_from_the_whole_tree() {
        let said = |words: &[&str]| match Cli::try_parse_args(argv(words)) {
            Err(e) => e.render().to_string(),
            Ok(c) => panic!("{words:?} parsed: {c:?}"),
        };
        let help = said(&["--help"]);
        for sc in Cli::command().get_subcommands() {
            assert!(help.contains(sc.get_name()), "{help}");
        }
        assert!(said(&["verfy"]).contains("similar subcommand exists: 'verify'"));
    }

    #[test]
    fn every_common_option_applies_before_or_after_the_subcommand() {
        let default = show(&parse(&["verify"]).common);
        let cmd = Common::augment_args(clap::Command::new("common"));
        let ids: Vec<String> = cmd
            .get_arguments()
            .map(|a| a.get_id().to_string())
            .collect();
        assert_eq!(ids.len(), 19, "{ids:?}");
        for id in &ids {
            let w = sample(id);
            let before = parse(&[&w[..], &["verify"]].concat());
            let after = parse(&[&["verify"], &w[..]].concat());
            let alone = parse(&w);
            assert_ne!(show(&after.common), default, "{id}: no effect");
            assert_eq!(show(&before.common), show(&after.common), "{id}");
            assert_eq!(show(&alone.common), show(&after.common), "{id}");
        }
    }

    #[test]
    fn an_option_after_the_subcommand_wins_over_the_one_before() {
        let c = parse(&["--mem", "1GB", "--seed", "5", "run", "--mem", "64MB"]);
        assert_eq!(c.common.mem, Some(64 << 20));
        assert_eq!(c.common.seed, Some(5));
        let c = parse(&[
            "--blob", "/a", "bench", "memset", "--blob", "/b", "--blob", "/c",
        ]);
        assert_eq!(
            c.common.kernel.blob,
            [PathBuf::from("/b"), PathBuf::from("/c")]
        );
        let c = parse(&["--blob", "/a", "--blob", "/b", "bench", "memset"]);
        assert_eq!(
            c.common.kernel.blob,
            [PathBuf::from("/a"), PathBuf::from("/b")]
        );
    }

    /// Issue 25 case 9: options that do not apply are refused, by name.
    #[test]
    fn options_that_do_not_apply_are_named() {
        let c = parse(&[
            "compare",
            "a.json",
            "--json",
            "f",
            "--mem",
            "0",
            "--timeout",
            "nan",
        ]);
        let m = c
            .common
            .only("compare", &["--format"])
            .unwrap_err()
            .to_string();
        assert!(m.contains("--mem, --json, --timeout"), "{m}");
        // Given at its default value is given all the same.
        let c = parse(&["compare", "a.json", "--timeout", "5", "--check", "target"]);
        let m = c
            .common
            .only("compare", &["--format"])
            .unwrap_err()
            .to_string();
        assert!(m.contains("does not take --timeout, --check"), "{m}");
        let c = parse(&["--seed", "3", "compare", "a.json"]);
        assert!(c.common.only("compare", &["--seed"]).is_ok());
        assert_eq!(c.common.given, ["--seed"]);
        let c = parse(&["compare", "a.json", "--format", "markdown"]);
        assert!(c.common.only("compare", &["--format"]).is_ok());
        let c = parse(&["--seed", "1", "blob", "--kernel-tree", "t", "-o", "x"]);
        let m = c
            .common
            .only("blob", &["--kernel-tree"])
            .unwrap_err()
            .to_string();
        assert!(m.contains("does not take --seed"), "{m}");
    }

    /// Each backing option has one default: --backing anon, bench's
    /// --backings thp; a --backing given alone is bench's axis.
    #[test]
    fn backing_defaults_once_per_option() {
        let backings = |words: &[&str]| {
            let c = parse(words);
            let Some(Cmd::Bench { args, .. }) = &c.command else {
                panic!("{words:?}: not bench");
            };
            let plan = args.plan(&c.common, &[crate::blob::LinkConfig::Vanilla.into()]);
            plan.unwrap_or_else(|e| panic!("{words:?}: {e}")).backings
        };
        assert_eq!(parse(&["run"]).common.backing, Backing::Anon);
        assert_eq!(backings(&["bench", "memset"]), [BENCH_BACKING]);
        assert_eq!(
            backings(&["bench", "memset", "--backing", "anon"]),
            [Backing::Anon]
        );
        assert_eq!(
            backings(&[
                "bench",
                "memset",
                "--backing",
                "anon",
                "--backings",
                "hugetlb"
            ]),
            [Backing::Hugetlb]
        );
    }

    /// The precision rule's defaults are constants that the help states:
    /// the plan a bare bench gets and the words of `--help` agree.
    #[test]
    fn the_precision_defaults_are_what_the_help_says() {
        let c = parse(&["bench", "memset"]);
        let Some(Cmd::Bench { args, .. }) = &c.command else {
            panic!("not bench");
        };
        let p = args
            .plan(&c.common, &[crate::blob::LinkConfig::Vanilla.into()])
            .unwrap()
            .precision
            .expect("a precision rule without --sessions");
        assert_eq!(p.half_width * 100.0, DEFAULT_PRECISION_PCT);
        assert_eq!(p.max_seconds.as_secs_f64(), DEFAULT_MAX_SECONDS);
        assert_eq!(
            p.max_sessions,
            DEFAULT_SESSIONS * DEFAULT_MAX_SESSIONS_FACTOR
        );
        let mut cmd = Cli::command();
        cmd.build();
        let bench = cmd.find_subcommand("bench").unwrap();
        let help = |id: &str| {
            let a = bench.get_arguments().find(|a| a.get_id() == id).unwrap();
            a.get_help().map(ToString::to_string).unwrap_or_default()
        };
        let says = |id: &str, want: String| assert!(help(id).contains(&want), "{}", help(id));
        says(
            "precision",
            format!("[default: {DEFAULT_PRECISION_PCT} without"),
        );
        says("max_seconds", format!("[default: {DEFAULT_MAX_SECONDS}]"));
        says(
            "max_sessions",
            format!("[default: {DEFAULT_MAX_SESSIONS_FACTOR} x the planned"),
        );
    }

    #[test]
    fn completions_and_man_take_no_common_options() {
        for words in [
            &["man", "--mem", "1GB"][..],
            &["--seed", "1", "completions", "bash"],
        ] {
            let e = parse(words)
                .common
                .only("man", &[])
                .unwrap_err()
                .to_string();
            assert!(e.contains("does not take --"), "{words:?}: {e}");
        }
        assert!(parse(&["man"]).common.only("man", &[]).is_ok());
    }
}
