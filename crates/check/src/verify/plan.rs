//! What run/verify are asked to do ([`Plan`]: the sides, the filter, how
//! a VM boots), the usage errors found before any VM, and what the host
//! must hold before any check runs ([`Plan::admit`]).
use crate::arch::{self, CpuCaps};
use crate::checker::{Patterns, Scope};
use crate::error::{Error, Result};
use crate::kernel::Side;
use crate::kernel::paths::Runnable;
use crate::routines::privilege::PrivilegeChoice;
use crate::routines::{self, Routine};
use crate::suite::{self, CheckRecord, Filter, RandomSize};
use crate::vmm::memory::Backing;
use crate::vmm::{self, VmOptions};
use hypclear_abi::PAGE_SIZE;
use std::time::{Duration, Instant};

/// What every VM of the run needs to boot, resolved before the first one
/// does (the rest is checked while it boots).
#[derive(Debug, Clone)]
pub struct Boot {
    /// When the process started: the first hypercall and the elapsed
    /// time count from it.
    pub start: Instant,
    pub seed: u64,
    pub privilege: PrivilegeChoice,
    /// Guest RAM of every VM.
    pub mem: u64,
    /// The watchdog's timeout for one hypercall.
    pub timeout: Duration,
    pub backing: Backing,
    pub prefault: bool,
}

impl Boot {
    /// Options of one single-vCPU VM of `side`.
    pub fn vm_options(&self, side: &Side) -> Result<VmOptions> {
        Ok(VmOptions {
            mem: self.mem,
            backing: self.backing,
            prefault: self.prefault,
            privilege: self.privilege.privilege,
            blob: side.blob()?,
            vcpus: 1,
            seed: self.seed,
            vm_type: vmm::VmType::Normal,
        })
    }
}

/// A run/verify: the suite of each side in a VM of its own.
#[derive(Debug, Clone)]
pub struct Plan {
    /// `run` or `verify`, as the JSON and the summary line name it.
    pub command: &'static str,
    /// The sides to run, in order, each with its own VM (the kernel
    /// alternatives loads with nothing selected are dropped).
    pub sides: Vec<Side>,
    /// The kernel alternatives loads the guest CPU cannot run, with the
    /// reason: their checks are SKIP rows.
    pub unrunnable: Vec<(Side, String)>,
    /// Seeded with the boot's seed.
    pub filter: Filter,
    /// The run's random memset/memcpy sizes (drawn from the seed).
    pub random_sizes: Vec<RandomSize>,
    pub boot: Boot,
    pub scope: Scope,
}

impl Plan {
    /// The plan of `sides` (a kernel side already one side per
    /// alternatives load): the loads the guest CPU cannot run set apart,
    /// the filter seeded with `boot.seed`, the random sizes drawn.
    pub fn new(
        command: &'static str,
        sides: Vec<Side>,
        mut filter: Filter,
        boot: Boot,
        scope: Scope,
    ) -> Plan {
        let (sides, unrunnable) = split_runnable(sides, &filter);
        filter.seed = boot.seed;
        let random_sizes = match filter.has_byte_routines() {
            true => filter.random_sizes(),
            false => Vec::new(),
        };
        Plan {
            command,
            sides,
            unrunnable,
            filter,
            random_sizes,
            boot,
            scope,
        }
    }

    /// The checks before any check runs, once the CPU's capabilities are
    /// known: the sizes fit `--mem`, the host holds what the run touches.
    pub fn admit(&self, caps: CpuCaps) -> Result<Admitted> {
        self.check_mem_fits(&caps)?;
        // Decided once: the memory check and the run must agree on it.
        let side_by_side = self.concurrent();
        self.check_memory(side_by_side)?;
        Ok(Admitted { caps, side_by_side })
    }

    /// A `--mem` too small for the requested sizes. Only explicit sizes
    /// make it an error (built-in sizes that do not fit are skipped with
    /// the reason); planning costs milliseconds, so it is skipped
    /// otherwise.
    fn check_mem_fits(&self, caps: &CpuCaps) -> Result<()> {
        let (f, mem) = (&self.filter, self.boot.mem);
        if f.sizes.is_empty() {
            return Ok(());
        }
        let pats = Patterns::new(self.boot.seed, 0);
        for c in &self.sides {
            let (specs, _) = suite::plan(c, caps, f, u64::MAX, &pats);
            let need = specs.iter().map(suite::footprint).max().unwrap_or(0);
            if need > arena(mem) {
                let fit = suite::round_up(
                    suite::sum(&[arch::ARENA_BASE - arch::RAM_BASE, need]),
                    arch::RAM_ALIGN,
                );
                return Err(Error::MemTooSmall { mem, need, fit });
            }
        }
        Ok(())
    }

    /// Whether the sides' suites may run side by side: a second core,
    /// and guest RAM for all of them within half the host memory this
    /// process may use (`host_available`: MemAvailable, cgroup limits;
    /// hugetlb pages are reserved per VM, so that backing stays one at a
    /// time).
    fn concurrent(&self) -> bool {
        let n = self.sides.len();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let available = vmm::memory::host_available().map_or(0, |(bytes, _)| bytes);
        let need = self.boot.mem.saturating_mul(n as u64);
        n > 1 && cores > 1 && self.boots_early() && need <= available / 2
    }

    /// Whether the VM of a side after the first boots before its turn
    /// comes: not when hugetlb-backed (those pages are reserved per VM,
    /// so such VMs exist one at a time).
    pub(crate) fn boots_early(&self) -> bool {
        self.boot.backing != Backing::Hugetlb
    }

    /// That the host can hold what the run touches: the largest target
    /// and its copy source in guest RAM, plus the host pattern (per side:
    /// they may run side by side).
    fn check_memory(&self, side_by_side: bool) -> Result<()> {
        let (largest, pattern) = sizes(&self.filter, self.boot.mem);
        let guest =
            (arch::ARENA_BASE - arch::RAM_BASE + 2 * largest + (4 << 20)).min(self.boot.mem);
        let vms = if side_by_side {
            self.sides.len() as u64
        } else {
            1
        };
        if self.boot.backing != Backing::Hugetlb {
            vmm::memory::check_host_memory(
                guest * vms + pattern,
                "verify (guest RAM it touches plus the copy pattern)",
            )?;
        }
        Ok(())
    }

    /// The SKIP rows of the loads the guest CPU cannot run.
    pub(crate) fn unrunnable_rows(&self, caps: &CpuCaps) -> Vec<CheckRecord> {
        let pats = Patterns::new(self.boot.seed, 0);
        let mut out = Vec::new();
        for (side, reason) in &self.unrunnable {
            let Some(f) = side_filter(side, &self.filter) else {
                continue;
            };
            let mut rows = suite::skip_all(side, caps, &f, &pats, reason);
            relabel(side, &mut rows);
            out.extend(rows);
        }
        out
    }
}

/// The go-ahead of a run: the guest CPU's capabilities, and whether the
/// sides run side by side. Only [`Plan::admit`] makes one, so no run
/// starts unchecked.
#[derive(Debug)]
pub struct Admitted {
    pub(crate) caps: CpuCaps,
    pub(crate) side_by_side: bool,
}

/// Bytes the ordinary checks may use: from the arena's base to the edge
/// region at the top of RAM (the edge checks' own).
pub(crate) fn arena(mem: u64) -> u64 {
    (arch::RAM_BASE.saturating_add(mem)).saturating_sub(arch::ARENA_BASE + arch::EDGE_REGION)
}

/// The largest check and the copy source pattern (host) the suite needs
/// in `mem` bytes of guest RAM.
pub(crate) fn sizes(filter: &Filter, mem: u64) -> (u64, u64) {
    let (largest, copy) = suite::largest_sizes(filter, arena(mem));
    (largest, copy.max(4 << 20))
}

/// Usage errors in the variant filter, found before any VM is created.
fn check_variants(sides: &[Side], f: &Filter) -> Result<()> {
    let selected = |r: &Routine| f.routines.is_empty() || f.routines.contains(r);
    for v in &f.variants {
        let known = sides.iter().any(|c| {
            Routine::ALL.iter().filter(|r| selected(r)).any(|r| {
                routines::variants(*r, c)
                    .iter()
                    .any(|x| routines::is_named(x, v))
            })
        });
        if !known {
            let mut names: Vec<&str> = sides
                .iter()
                .flat_map(|c| {
                    Routine::ALL
                        .iter()
                        .flat_map(move |r| routines::variants(*r, c))
                })
                .map(|x| x.name)
                .collect();
            names.sort();
            names.dedup();
            return Err(Error::UnknownVariant {
                name: v.clone(),
                known: names,
            });
        }
    }
    Ok(())
}

/// Usage errors in run/verify's filters, found before any VM is created.
pub fn check_filter(sides: &[Side], f: &Filter) -> Result<()> {
    check_variants(sides, f)?;
    for &size in &f.sizes {
        if size > suite::MAX_SIZE {
            return Err(Error::SizeTooLarge {
                size,
                max: suite::MAX_SIZE,
            });
        }
        for r in Routine::ALL {
            if !(f.routines.is_empty() || f.routines.contains(&r)) {
                continue;
            }
            if r.page_granular() && (size == 0 || size % PAGE_SIZE != 0) {
                return Err(Error::NotWholePages { routine: r, size });
            }
        }
    }
    Ok(())
}

/// The filter of a kernel alternatives load: only the routines whose
/// family's path it verifies (`None`: none of the selected ones). Other
/// sides keep `filter`.
pub(crate) fn side_filter(side: &Side, filter: &Filter) -> Option<Filter> {
    let Some(load) = side.external().and_then(|e| e.load.as_ref()) else {
        return Some(filter.clone());
    };
    let config = side.config();
    let routines: Vec<Routine> = Routine::ALL
        .into_iter()
        .filter(|r| filter.routines.is_empty() || filter.routines.contains(r))
        .filter(|r| load.verifies(r.family(config)).is_some())
        .collect();
    (!routines.is_empty()).then(|| Filter {
        routines,
        ..filter.clone()
    })
}

/// Name a kernel alternatives load's rows by the path they verify.
pub(crate) fn relabel(side: &Side, records: &mut [CheckRecord]) {
    if let Some(load) = side.external().and_then(|e| e.load.as_ref()) {
        for r in records {
            r.variant = load.row_name(r.routine.family(r.config), &r.variant);
        }
    }
}

/// [`relabel`] for the per-row counts of a run.
fn relabel_rows(side: &Side, rows: suite::Rows) -> suite::Rows {
    let Some(load) = side.external().and_then(|e| e.load.as_ref()) else {
        return rows;
    };
    let renamed = rows.0.into_iter().map(|(mut k, t)| {
        k.variant = load.row_name(k.routine.family(k.config), &k.variant);
        (k, t)
    });
    suite::Rows(renamed.collect())
}

/// [`relabel`] for a run's records and per-row counts.
pub(crate) fn relabel_run(side: &Side, run: &mut suite::SuiteRun) {
    relabel(side, &mut run.records);
    run.rows = relabel_rows(side, std::mem::take(&mut run.rows));
}

/// The kernel alternatives loads the guest CPU cannot run, with the
/// reason, apart from the others; loads with nothing selected dropped.
fn split_runnable(sides: Vec<Side>, filter: &Filter) -> (Vec<Side>, Vec<(Side, String)>) {
    let mut run = Vec::new();
    let mut skip = Vec::new();
    for side in sides {
        if side_filter(&side, filter).is_none() {
            continue;
        }
        match side
            .external()
            .and_then(|e| e.load.as_ref())
            .map(|l| l.runnable())
        {
            Some(Runnable::No { reason }) => skip.push((side, reason)),
            _ => run.push(side),
        }
    }
    (run, skip)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blob::LinkConfig;
    use crate::error::Failure as _;
    use proptest::prelude::Strategy as _;

    proptest::proptest! {
        /// Issue 38: `verify -s 18446744073709551615` passed the fit check
        /// and failed inside the VM (exit 1). Over the whole u64 range of
        /// `-s` and `--mem`: a usage error (exit 2), or a plan whose every
        /// check's footprint covers its bytes and fits the arena.
        #[test]
        fn every_size_and_mem_plans_or_is_a_usage_error(
            size in proptest::prop_oneof![
                proptest::prelude::any::<u64>(),
                (0..4096u64).prop_map(|d| u64::MAX - d),
                (0..1u64 << 24),
            ],
            mem in proptest::prop_oneof![
                proptest::prelude::any::<u64>(),
                (1..64u64).prop_map(|m| m << 26),
            ],
        ) {
            let side = Side::Builtin(LinkConfig::Vanilla);
            let f = Filter {
                routines: vec![Routine::Memset, Routine::Memcpy],
                sizes: vec![size],
                ..Filter::default()
            };
            let checked = check_filter(std::slice::from_ref(&side), &f)
                .and_then(|()| Ok(vmm::validate_mem(mem)?));
            match checked {
                // Usage or environment: exit 2.
                Err(e) if e.exit_code() == 2 => {}
                Err(e) => proptest::prop_assert!(false, "exit {}: {e}", e.exit_code()),
                Ok(()) => {
                    proptest::prop_assert!(size <= suite::MAX_SIZE);
                    let caps = arch::CpuCaps::default();
                    let (specs, _) = suite::plan(&side, &caps, &f, arena(mem), &Patterns::new(1, 0));
                    for s in &specs {
                        let need = suite::footprint(s);
                        proptest::prop_assert!(need >= s.total() && need <= arena(mem), "{s:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn an_unrunnable_path_is_every_check_skipped_with_the_reason() {
        let side = Side::Builtin(LinkConfig::Vanilla);
        let caps = arch::CpuCaps::default();
        let filter = Filter {
            routines: vec![Routine::Memset],
            ..Filter::default()
        };
        let pats = Patterns::new(1, 0);
        let (specs, skipped) = suite::plan(&side, &caps, &filter, u64::MAX, &pats);
        let rows = suite::skip_all(&side, &caps, &filter, &pats, "no FEAT_MOPS");
        assert!(!specs.is_empty());
        assert_eq!(rows.len(), specs.len() + skipped.len());
        assert!(rows.iter().all(|r| r.verdict == suite::Verdict::Skipped
            && r.reason.as_deref() == Some("no FEAT_MOPS")
            && r.routine == Routine::Memset));
        // A side that is no alternatives load keeps the filter and its names.
        assert_eq!(
            side_filter(&side, &filter).map(|f| f.routines),
            Some(vec![Routine::Memset])
        );
        let mut r = rows[..1].to_vec();
        let before = r[0].variant.clone();
        relabel(&side, &mut r);
        assert_eq!(r[0].variant, before);
    }
}
