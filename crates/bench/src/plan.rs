//! What `bench` was asked to do ([`Plan`]) and its expansion into cells,
//! with every usage error found before a VM exists; where each region lies
//! in guest RAM and the call that makes one pass over it. Pure: no KVM.
use super::{Axes, Cache, Order, PageState, Shape, SideInfo};
use crate::arch;
use crate::blob::LinkConfig;
use crate::check::checker::{GUARD, Placement};
use crate::error::{Error, Result};
use crate::kernel::Side;
use crate::routines::privilege::PrivilegeChoice;
use crate::routines::{self, Call, Kind, Routine, VariantDef};
use crate::units::format_size;
use crate::vmm::memory::Backing;
use hypclear_abi as abi;
use hypclear_abi::PAGE_SIZE;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Which variants to run: `-f all` (the default) or a list of names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Variants {
    All,
    Named(Vec<String>),
}

impl Variants {
    /// From `-f NAME,...`; `all` anywhere in the list means all.
    pub fn from_names(names: &[String]) -> Variants {
        if names.iter().any(|n| n == "all") {
            Variants::All
        } else {
            Variants::Named(names.to_vec())
        }
    }

    /// Whether `v` was asked for, by its name or a former name of it.
    fn includes(&self, v: &routines::VariantDef) -> bool {
        match self {
            Variants::All => true,
            Variants::Named(n) => n.iter().any(|w| routines::is_named(v, w)),
        }
    }

    fn label(&self) -> String {
        match self {
            Variants::All => "all".into(),
            Variants::Named(n) => n.join(","),
        }
    }
}

/// One side of a bench: a blob source and, on arm64 with `--dc-zva`,
/// whether its routines may use DC ZVA. The seed's review table has four
/// columns: vanilla, patch, stnp (vanilla without DC ZVA: clear_page's
/// STNP loop) and patch_stp (the patch without it: memset's STP loop);
/// `--kernel-tree VANILLA --kernel-tree PATCH --dc-zva both` gives them as
/// four sides in that order (see [`PlanSide::expand`]).
#[derive(Debug, Clone)]
pub struct PlanSide {
    pub side: Side,
    /// `None`: as the guest privilege gives it (x86, or no `--dc-zva`).
    pub dc_zva: Option<arch::DcZva>,
    /// Column name, unique among the sides of a plan.
    pub name: String,
}

impl From<Side> for PlanSide {
    fn from(side: Side) -> PlanSide {
        PlanSide {
            name: side.name(),
            side,
            dc_zva: None,
        }
    }
}

impl From<LinkConfig> for PlanSide {
    fn from(c: LinkConfig) -> PlanSide {
        Side::from(c).into()
    }
}

impl std::ops::Deref for PlanSide {
    type Target = Side;
    fn deref(&self) -> &Side {
        &self.side
    }
}

impl PlanSide {
    /// The sides of a plan: every blob source once per DC ZVA state in
    /// `dc_zva` (empty: no such dimension), the states outermost, so two
    /// trees with `[On, Off]` come out vanilla, patch, vanilla without DC
    /// ZVA, patch without it. With both states, the sides without DC ZVA
    /// are named `<side> (no DC ZVA)`.
    pub fn expand(sides: &[Side], dc_zva: &[arch::DcZva]) -> Vec<PlanSide> {
        if dc_zva.is_empty() {
            return sides.iter().cloned().map(PlanSide::from).collect();
        }
        let mut out = Vec::new();
        for &d in dc_zva {
            for s in sides {
                let name = match d {
                    arch::DcZva::Off if dc_zva.len() > 1 => format!("{} (no DC ZVA)", s.name()),
                    _ => s.name(),
                };
                out.push(PlanSide {
                    side: s.clone(),
                    dc_zva: Some(d),
                    name,
                });
            }
        }
        out
    }

    /// The privilege this side's VMs run at: the one that gives its DC
    /// ZVA state, else `default` (EL2 allows DC ZVA too: `--el 2` keeps
    /// the sides with it at EL2).
    pub fn privilege(&self, default: arch::Privilege) -> arch::Privilege {
        match (self.dc_zva, default) {
            (Some(arch::DcZva::On), arch::Privilege::Hyp) => default,
            _ => self
                .dc_zva
                .and_then(arch::dc_zva_privilege)
                .unwrap_or(default),
        }
    }

    /// The name (shadows [`Side::name`]: it carries the DC ZVA state).
    pub fn name(&self) -> String {
        self.name.clone()
    }

    /// What the side is, in one line, with its DC ZVA state when set.
    pub fn describe(&self) -> String {
        match self.dc_zva {
            Some(arch::DcZva::On) => format!("{}, DC ZVA allowed (EL1)", self.side.describe()),
            Some(arch::DcZva::Off) => {
                format!("{}, DC ZVA prohibited (EL0, DZP=1)", self.side.describe())
            }
            None => self.side.describe(),
        }
    }

    /// The CPU as this side's guest sees it (no `dczva` without DC ZVA).
    pub fn caps(&self, caps: &arch::CpuCaps) -> arch::CpuCaps {
        match self.dc_zva {
            Some(d) => caps.with_dc_zva(d),
            None => caps.clone(),
        }
    }
}

/// Everything `bench` was asked to do.
#[derive(Debug, Clone)]
pub struct Plan {
    pub routine: Routine,
    /// Bytes per pass, passes per run, vCPUs (every cell's too).
    pub shape: Shape,
    pub chunks: Vec<u64>,
    pub variants: Variants,
    pub orders: Vec<Order>,
    pub fills: Vec<PageState>,
    pub backings: Vec<Backing>,
    /// The blob sources (and their DC ZVA states), interleaved by session.
    pub sides: Vec<PlanSide>,
    pub warmup: u64,
    /// Cap of the adaptive warm-up; 0: exactly `warmup` runs.
    pub max_warmup: u64,
    pub repeats: u64,
    /// Measured runs per session and side at most: disturbed runs are
    /// repeated up to this ([`SampleRule`]).
    pub max_runs: u64,
    /// Sessions at least (exactly, without `precision`).
    pub sessions: u64,
    /// `--precision`: sessions added until every interval is this tight.
    pub precision: Option<crate::precision::Precision>,
    /// How the timed threads are scheduled (`--priority`).
    pub priority: super::Priority,
    /// The precondition of every timed pass.
    pub cache: Cache,
    pub host_baseline: bool,
    pub prefault: bool,
    pub timeout: Duration,
}

/// A cell with what is needed to run it.
#[derive(Debug, Clone)]
pub struct CellSpec {
    pub axes: Axes,
    /// The routine the cell runs (clear_page with a larger -k runs clear_pages).
    pub routine: Routine,
    /// Index into [`Plan::sides`].
    pub side: usize,
    pub config: LinkConfig,
    pub backing: Backing,
    pub variant: &'static VariantDef,
}

impl Plan {
    /// Check the plan: every usage error (axes, variant names, `--mem`
    /// when given) is found here, before KVM is touched.
    pub fn validate(&self, mem: Option<u64>) -> Result<()> {
        if self.shape.vcpus == 0 || self.shape.vcpus > abi::MAX_VCPUS {
            return Err(Error::Vcpus {
                vcpus: self.shape.vcpus,
                max: abi::MAX_VCPUS,
            });
        }
        let plan = self;
        plan.cells(None)?;
        let need = plan.mem_needed();
        if need > arch::MAX_RAM {
            return Err(Error::BeyondRam {
                size: self.shape.size,
                vcpus: self.shape.vcpus,
                need,
                max: arch::MAX_RAM,
            });
        }
        if let Some(m) = mem
            && m < need
        {
            return Err(Error::MemTooSmall {
                mem: m,
                size: self.shape.size,
                vcpus: self.shape.vcpus,
                need,
            });
        }
        Ok(())
    }

    /// The cells to run on a CPU with `caps`, and notes (skipped variants,
    /// clear_page extents).
    pub fn expand(&self, caps: &arch::CpuCaps) -> Result<(Vec<CellSpec>, Vec<String>)> {
        self.cells(Some(caps))
    }

    /// Sessions at most: `--max-sessions` under `--precision`, else
    /// exactly `sessions`.
    pub fn max_sessions(&self) -> u64 {
        self.precision
            .map_or(self.sessions, |p| p.max_sessions.max(self.sessions))
    }

    /// Guest RAM the plan needs.
    pub fn mem_needed(&self) -> u64 {
        mem_needed(self)
    }

    /// The VM of one step of a session: `side`'s blob on `backing`, at
    /// the privilege `privilege` resolved for it.
    pub(crate) fn session_vm(
        &self,
        (backing, side): (Backing, usize),
        privilege: &PrivilegeChoice,
        seed: u64,
    ) -> Result<crate::vmm::VmOptions> {
        Ok(crate::vmm::VmOptions {
            mem: self.mem_needed(),
            backing,
            prefault: self.prefault,
            privilege: self.sides[side].privilege(privilege.privilege),
            blob: self.sides[side].blob()?,
            vcpus: self.shape.vcpus,
            seed,
            vm_type: crate::vmm::VmType::Normal,
        })
    }

    /// How many measured runs a session makes ([`SampleRule`]).
    pub(crate) fn sample_rule(&self) -> SampleRule {
        SampleRule {
            repeats: self.repeats,
            max_runs: self.max_runs,
        }
    }

    fn check_counts(&self) -> Result<()> {
        if self.shape.size > arch::MAX_RAM {
            return Err(Error::SizeTooLarge {
                size: self.shape.size,
                max: arch::MAX_RAM,
            });
        }
        if self.shape.size == 0 || !self.shape.size.is_multiple_of(PAGE_SIZE) {
            return Err(Error::SizeNotPages {
                size: self.shape.size,
            });
        }
        if self.shape.loops == 0 || self.repeats == 0 || self.sessions == 0 {
            return Err(Error::ZeroCount);
        }
        if self.max_runs < self.repeats {
            return Err(Error::MaxRuns {
                max_runs: self.max_runs,
                repeats: self.repeats,
            });
        }
        let window = crate::inference::SteadyConfig::default().window as u64;
        if self.max_warmup != 0 && self.max_warmup < window.max(self.warmup) {
            return Err(Error::MaxWarmup {
                max_warmup: self.max_warmup,
                window,
                warmup: self.warmup,
            });
        }
        Ok(())
    }

    fn check_variant_names(&self) -> Result<()> {
        let r = self.routine;
        let Variants::Named(names) = &self.variants else {
            return Ok(());
        };
        let known = |w: &str| {
            self.sides.iter().any(|c| {
                routines::variants(r, c)
                    .iter()
                    .any(|v| routines::is_named(v, w))
            })
        };
        if let (Some(want), Some(first)) = (names.iter().find(|w| !known(w)), self.sides.first()) {
            let vs = routines::variants(r, first);
            return Err(Error::UnknownVariant {
                routine: r,
                name: want.clone(),
                known: vs.iter().map(|v| v.name).collect(),
            });
        }
        Ok(())
    }

    /// The chunk one call of a cell works on, for `--order` and `-k`.
    fn cell_chunk(&self, order: Order, chunk: u64) -> Result<u64> {
        let r = self.routine;
        let chunk = match (order, r.fixed_size()) {
            (Order::Oneshot, _) => self.shape.size,
            (_, Some(f)) if r == Routine::CopyPage && chunk != f && chunk != self.shape.size => {
                return Err(Error::FixedChunk {
                    routine: r,
                    fixed: f,
                });
            }
            (_, Some(f)) if r == Routine::CopyPage => f,
            _ => chunk,
        };
        if chunk == 0 || !self.shape.size.is_multiple_of(chunk) {
            return Err(Error::NotMultiple {
                size: self.shape.size,
                chunk,
            });
        }
        if r.page_granular() && !chunk.is_multiple_of(PAGE_SIZE) {
            return Err(Error::ChunkNotPages { routine: r, chunk });
        }
        Ok(chunk)
    }

    /// Expand into cells; with `caps`, variants the CPU lacks are skipped
    /// with a note (without, every variant is kept: usage checks only).
    fn cells(&self, caps: Option<&arch::CpuCaps>) -> Result<(Vec<CellSpec>, Vec<String>)> {
        let r = self.routine;
        self.check_counts()?;
        self.check_variant_names()?;
        let mut out = Vec::new();
        let mut notes = Vec::new();
        let mut extent_noted = false;
        let mut seen = std::collections::BTreeSet::new();
        for (si, side) in self.sides.iter().enumerate() {
            let config = side.config();
            for v in routines::variants(r, side) {
                if !self.variants.includes(v) {
                    continue;
                }
                if let Some(f) = caps.and_then(|c| v.requires.filter(|f| !c.has(f))) {
                    notes.push(format!(
                        "{r} {} ({}) skipped: the CPU does not have {f}",
                        v.name,
                        side.name()
                    ));
                    continue;
                }
                for &order in &self.orders {
                    for &chunk in &self.chunks {
                        let chunk = self.cell_chunk(order, chunk)?;
                        let routine = self.extent_routine(chunk, &mut extent_noted, &mut notes);
                        let mut axes = self.axes(routine, v, config, chunk, order);
                        axes.side = si;
                        let base = CellSpec {
                            axes,
                            routine,
                            side: si,
                            config,
                            backing: Backing::Anon,
                            variant: v,
                        };
                        for spec in self.per_fill_and_backing(&base) {
                            if seen.insert(spec.axes.clone()) {
                                out.push(spec);
                            }
                        }
                    }
                }
            }
        }
        if out.is_empty() {
            return Err(Error::NothingToRun {
                routine: r,
                filter: self.variants.label(),
            });
        }
        Ok((out, notes))
    }

    /// The routine a cell of `chunk`-byte calls runs: clear_page over a
    /// larger extent is the kernel's clear_pages(addr, npages), said once
    /// in `notes`.
    fn extent_routine(&self, chunk: u64, noted: &mut bool, notes: &mut Vec<String>) -> Routine {
        let r = self.routine;
        if r == Routine::ClearPage && chunk != PAGE_SIZE {
            if !*noted {
                *noted = true;
                notes.push(format!(
                    "clear_page -k {} runs clear_pages(addr, {}) per call (the clear_pages() extent)",
                    format_size(chunk),
                    chunk / PAGE_SIZE
                ));
            }
            Routine::ClearPages
        } else {
            r
        }
    }

    fn axes(
        &self,
        routine: Routine,
        v: &VariantDef,
        config: LinkConfig,
        chunk: u64,
        order: Order,
    ) -> Axes {
        Axes {
            routine,
            variant: v.name.into(),
            side: 0,
            config,
            chunk,
            order,
            fill: PageState::Populate,
            backing: Backing::Anon,
            shape: self.shape,
        }
    }

    /// `base` once per `--fill` x `--backings`.
    fn per_fill_and_backing(&self, base: &CellSpec) -> Vec<CellSpec> {
        let mut v = Vec::new();
        for &fill in &self.fills {
            for &backing in &self.backings {
                let mut s = base.clone();
                s.axes.fill = fill;
                s.axes.backing = backing;
                s.backing = backing;
                v.push(s);
            }
        }
        v
    }
}

/// Guest RAM needed for one vCPU's region (target, guards, source);
/// saturating, so an `-s` past every RAM never wraps into one that fits.
pub(crate) fn region_stride(plan: &Plan) -> u64 {
    use crate::check::suite::{round_up, sum};
    let copy = plan.routine.kind() == Kind::Copy;
    let guards = GUARD.next_multiple_of(PAGE_SIZE).saturating_mul(2);
    let one = sum(&[plan.shape.size, guards, PAGE_SIZE]);
    let one = if copy { one.saturating_mul(2) } else { one };
    round_up(one, 2 << 20)
}

/// Guest RAM the plan needs (saturating): the regions stay below the edge
/// region, whose hole is unmapped.
pub(crate) fn mem_needed(plan: &Plan) -> u64 {
    use crate::check::suite::{round_up, sum};
    let regions = plan.shape.vcpus.saturating_mul(region_stride(plan));
    round_up(
        sum(&[
            arch::ARENA_BASE - arch::RAM_BASE,
            regions,
            arch::EDGE_REGION,
        ]),
        arch::RAM_ALIGN,
    )
    .max(arch::MIN_RAM)
}

pub(super) fn placement(plan: &Plan, vcpu: u64) -> Placement {
    let base = arch::ARENA_BASE + vcpu * region_stride(plan);
    let dst = base + GUARD.next_multiple_of(PAGE_SIZE);
    let src = (plan.routine.kind() == Kind::Copy)
        .then(|| (dst + plan.shape.size + GUARD).next_multiple_of(PAGE_SIZE) + PAGE_SIZE);
    Placement::new(dst, plan.shape.size, src, 0)
}

/// The call for one pass over a region.
pub(super) fn pass_call(spec: &CellSpec, plan: &Plan, p: &Placement, fill: u8) -> Call {
    let chunk = spec.axes.chunk;
    let count = plan.shape.size / chunk;
    let (dst, src, step) = match spec.axes.order {
        Order::Reverse => (
            p.dst + plan.shape.size - chunk,
            p.src.map(|s| s + plan.shape.size - chunk),
            -(chunk as i64),
        ),
        _ => (p.dst, p.src, chunk as i64),
    };
    Call {
        routine: spec.routine,
        dst,
        src: src.unwrap_or(0),
        fill,
        len: chunk,
        count,
        step,
    }
}

/// The sample rule, one for guest and host (issue 26): a disturbed
/// measured run is repeated until the session has `repeats` undisturbed
/// runs, or `max_runs` measured runs were made (the cell is then
/// unmeasurable under load). A run is disturbed when it lost more than
/// [`crate::sched::OFF_CPU_TOLERANCE`] of its time to other tasks, or ran
/// emulated code in a session that otherwise runs natively.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SampleRule {
    /// Undisturbed measured runs wanted per session and side (`--repeats`).
    pub repeats: u64,
    /// Measured runs per session and side at most (`--max-runs`).
    pub max_runs: u64,
}

/// `--max-runs` when not given: this many times `--repeats`. Measured here
/// (2 cores shared with 4 builds, 256 MB clear_pages erms) a third of the
/// runs were disturbed quiet and nearly all with a busy loop at normal
/// priority; 4x leaves room for 3 in 4 runs disturbed.
pub const DEFAULT_MAX_RUNS_FACTOR: u64 = 4;

impl SampleRule {
    /// Whether to make another measured run after `attempted` runs of
    /// which `undisturbed` were undisturbed.
    pub(crate) fn again(&self, attempted: u64, undisturbed: u64) -> bool {
        undisturbed < self.repeats && attempted < self.max_runs
    }

    /// Whether `s` is disturbed in a session whose runs are (`emulated`)
    /// or are not emulated throughout.
    pub(crate) fn disturbed(s: &super::Sample, emulated: bool) -> bool {
        s.lost_time || (s.emulated && !emulated)
    }
}

impl SideInfo {
    /// The record of `side`; a kernel side's paths are the built-ins that
    /// run what its alternatives took (arm64 DC ZVA is decided inside the
    /// routine on both sides alike).
    pub fn of(side: &PlanSide) -> SideInfo {
        let kernel_paths = side
            .external()
            .map(crate::kernel::external::builtin_paths)
            .unwrap_or_default();
        SideInfo {
            name: side.name(),
            kind: side.kind(),
            config: side.config(),
            label: side.describe(),
            kernel: side.external().map(|e| e.report.clone()),
            kernel_paths,
            dc_zva: side.dc_zva,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::error::Failure as _;

    /// A clear_pages plan of 16 MB, 4 KB and 2 MB chunks, both orders (the
    /// host baseline's test runs it too).
    pub(crate) fn plan() -> Plan {
        Plan {
            routine: Routine::ClearPages,
            shape: Shape {
                size: 16 << 20,
                loops: 1,
                vcpus: 1,
            },
            chunks: vec![4096, 2 << 20],
            variants: Variants::All,
            orders: vec![Order::Forward, Order::Reverse],
            fills: vec![PageState::Populate],
            backings: vec![Backing::Anon],
            sides: vec![LinkConfig::Vanilla.into()],
            warmup: 1,
            max_warmup: 20,
            repeats: 3,
            max_runs: 12,
            sessions: 4,
            precision: None,
            priority: crate::Priority::Normal,
            cache: Cache::Cold,
            host_baseline: true,
            prefault: false,
            timeout: Duration::from_secs(5),
        }
    }

    fn caps() -> arch::CpuCaps {
        arch::CpuCaps {
            model: "test".into(),
            ..Default::default()
        }
    }

    #[test]
    fn cells_cross_all_axes() {
        let p = plan();
        let (c, _) = p.expand(&caps()).unwrap();
        let n = routines::variants(Routine::ClearPages, &LinkConfig::Vanilla.into())
            .iter()
            .filter(|v| v.requires.is_none())
            .count();
        assert_eq!(c.len(), n * 2 * 2);
    }

    #[test]
    fn reverse_order_starts_at_the_last_chunk() {
        let p = plan();
        let (c, _) = p.expand(&caps()).unwrap();
        let rev = c
            .iter()
            .find(|c| c.axes.order == Order::Reverse && c.axes.chunk == 4096)
            .unwrap();
        let pl = placement(&p, 0);
        let call = pass_call(rev, &p, &pl, 0);
        assert_eq!(call.dst, pl.dst + p.shape.size - 4096);
        assert_eq!(call.step, -4096);
        assert_eq!(call.count, p.shape.size / 4096);
    }

    use proptest::prelude::*;

    proptest::proptest! {
        /// Issue 38: sizes near u64::MAX wrapped in the layout arithmetic.
        /// Over the whole u64 range of -s, -k and --mem: the plan is a
        /// usage error, or its guest RAM is exact (computed again in u128)
        /// and a usable --mem that holds every vCPU's region.
        #[test]
        fn every_size_chunk_and_mem_is_exact_or_a_usage_error(
            size in prop_oneof![
                any::<u64>(),
                (0..64u64).prop_map(|s| (u64::MAX - 4095) - s * 4096),
                (1u64..1 << 20).prop_map(|p| p * 4096),
            ],
            chunk in prop_oneof![any::<u64>(), Just(4096u64), (1..512u64).prop_map(|p| p * 4096)],
            whole in any::<bool>(),
            mem in proptest::option::of(any::<u64>()),
            copy in any::<bool>(),
            vcpus in 0..=abi::MAX_VCPUS + 1,
        ) {
            let mut p = plan();
            p.routine = if copy { Routine::Memcpy } else { Routine::Memset };
            p.shape.size = size;
            p.shape.vcpus = vcpus;
            // -k the whole -s (the default) half the time: sizes that divide.
            p.chunks = vec![if whole { size } else { chunk }];
            match p.validate(mem) {
                Err(e) if e.exit_code() == 2 => {}
                Err(e) => prop_assert!(false, "not a usage error: {e}"),
                Ok(()) => {
                    let g = GUARD.next_multiple_of(PAGE_SIZE) as u128;
                    let one = size as u128 + 2 * g + PAGE_SIZE as u128;
                    let one = if copy { 2 * one } else { one };
                    let stride = one.next_multiple_of(2 << 20);
                    let edge = arch::EDGE_REGION as u128;
                    let exact = ((arch::ARENA_BASE - arch::RAM_BASE) as u128 + vcpus as u128 * stride + edge)
                        .next_multiple_of(arch::RAM_ALIGN as u128)
                        .max(arch::MIN_RAM as u128);
                    prop_assert_eq!(p.mem_needed() as u128, exact);
                    prop_assert!(exact <= arch::MAX_RAM as u128);
                    let last = placement(&p, vcpus - 1);
                    prop_assert!(last.dst as u128 + size as u128 <= arch::RAM_BASE as u128 + exact - edge);
                }
            }
        }
    }

    #[test]
    fn bad_plans_are_usage_errors() {
        let mut p = plan();
        p.shape.size = 4097;
        assert!(matches!(p.expand(&caps()), Err(Error::SizeNotPages { .. })));
        let mut p = plan();
        p.chunks = vec![3 << 20];
        assert!(matches!(p.expand(&caps()), Err(Error::NotMultiple { .. })));
        let mut p = plan();
        p.routine = Routine::CopyPage;
        p.chunks = vec![8192];
        assert!(matches!(p.expand(&caps()), Err(Error::FixedChunk { .. })));
        let mut p = plan();
        p.variants = Variants::Named(vec!["nope".into()]);
        assert!(matches!(
            p.expand(&caps()),
            Err(Error::UnknownVariant { .. })
        ));
        let mut p = plan();
        p.max_warmup = 3;
        assert!(matches!(p.expand(&caps()), Err(Error::MaxWarmup { .. })));
        p.max_warmup = 0;
        assert!(p.expand(&caps()).is_ok());
        p.max_runs = 2;
        assert!(matches!(p.expand(&caps()), Err(Error::MaxRuns { .. })));
    }

    #[test]
    fn clear_page_extents_run_clear_pages() {
        let mut p = plan();
        p.routine = Routine::ClearPage;
        p.chunks = vec![4096, 2 << 20];
        p.orders = vec![Order::Forward];
        let (c, notes) = p.expand(&caps()).unwrap();
        assert!(
            c.iter()
                .any(|c| c.routine == Routine::ClearPage && c.axes.chunk == 4096)
        );
        assert!(
            c.iter()
                .any(|c| c.routine == Routine::ClearPages && c.axes.chunk == 2 << 20)
        );
        assert!(
            notes.iter().any(|n| n.contains("clear_pages(addr, 512)")),
            "{notes:?}"
        );
    }

    #[test]
    fn memory_covers_all_vcpu_regions() {
        let mut p = plan();
        p.shape.vcpus = 2;
        let last = placement(&p, 1);
        assert!(last.dst + last.len + GUARD <= arch::RAM_BASE + mem_needed(&p));
        // Below the edge region: 8 vCPUs of 2 MiB strides fill MIN_RAM
        // exactly without it, and 1.5 MiB would reach its hole.
        p.shape.vcpus = 8;
        p.shape.size = 3 << 19;
        let last = placement(&p, 7);
        let edge = arch::RAM_BASE + mem_needed(&p) - arch::EDGE_REGION;
        assert!(last.dst + last.len + GUARD <= edge);
    }

    /// `--dc-zva both` with two trees: the seed's column order (vanilla,
    /// patch, stnp, patch_stp), names unique, states set; one state keeps
    /// the names; no `--dc-zva` leaves the dimension out.
    #[test]
    fn dc_zva_both_doubles_the_sides_in_the_seeds_order() {
        use arch::DcZva::{Off, On};
        let two: Vec<Side> = vec![LinkConfig::Vanilla.into(), LinkConfig::Memset.into()];
        let s = PlanSide::expand(&two, &[On, Off]);
        let got: Vec<(String, Option<arch::DcZva>)> =
            s.iter().map(|p| (p.name(), p.dc_zva)).collect();
        assert_eq!(
            got,
            [
                ("vanilla".to_string(), Some(On)),
                ("memset".to_string(), Some(On)),
                ("vanilla (no DC ZVA)".to_string(), Some(Off)),
                ("memset (no DC ZVA)".to_string(), Some(Off)),
            ]
        );
        assert_eq!(s[2].config(), LinkConfig::Vanilla);
        let off = PlanSide::expand(&two, &[Off]);
        assert_eq!(off[0].name(), "vanilla");
        assert_eq!(off[0].dc_zva, Some(Off));
        let none = PlanSide::expand(&two, &[]);
        assert!(none.iter().all(|p| p.dc_zva.is_none()) && none.len() == 2);
        // Without DC ZVA a kernel path is decided as on a DZP=1 CPU.
        let caps = arch::CpuCaps {
            features: vec![("dczva".into(), true)],
            ..Default::default()
        };
        assert!(s[0].caps(&caps).has("dczva"));
        assert!(!s[2].caps(&caps).has("dczva"));
    }
}
