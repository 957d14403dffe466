//! A/B in one guest: two sides (two variants of one blob, or two blobs
//! loaded side by side in the same VM) called in turn on the very same
//! buffer, in randomised ABBA / BAAB blocks of one batch (`CMD_BATCH`),
//! each call timed on its own by the guest counter. Drift, page placement,
//! THP luck and cache state hit both sides alike, so the per-block log
//! time ratio is a paired sample with a spread of a few percent where
//! separate sessions differ by 10% (issue 37).
//!
//! The code's own placement does not cancel within a guest (two identical
//! trees at two addresses differ by up to a few percent at 4 KB), so a
//! pair runs in several guests, each a slice of the budget, the images at
//! other addresses and main and beside swapped every other one, and the
//! interval is over guests ([`blocks::clustered`]).
//!
//! The outlier rule is one rule for both sides: a block with a call more
//! than [`OUTLIER`] times its side's median is left out whole, and so is a
//! batch that lost time to other tasks (the sample rule of the sessions).
//! With `--detect` the guests are looked at whenever their number doubles
//! (from 4), each look at alpha / 2^(k+1) (the looks spend alpha in
//! total), until the change is flagged or shown inside the margin, or the
//! budget is spent.
use crate::check::checker::{self, Patterns, Placement};
use crate::error::{Error, Result};
use crate::inference::blocks::{self, Shift};
pub use crate::model::{AbRow, AbVerdict, HostChange};
use crate::plan::{CellSpec, Plan, pass_call, placement};
use crate::routines::privilege::PrivilegeChoice;
use crate::stats::{PairedRatio, SessionRatio};
use crate::vmm::{CallResult, Command, Vm};
use crate::{Axes, Cache, PageState, Priority, host, routines, sched};
use hypclear_abi as abi;
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};
use std::time::{Duration, Instant};

/// A call more than this many times its side's median is disturbed.
pub const OUTLIER: f64 = 1.5;
/// A batch lasts about this long (one exit per batch).
const BATCH_NS: f64 = 20e6;
/// Blocks of four slots per batch at most (`abi::BATCH_SLOTS` / 4).
const MAX_BLOCKS: u64 = abi::BATCH_SLOTS / 4;
/// A one-call slot repeats its call on the same buffer until it lasts
/// this many counter ticks, so the counter's resolution and the timing
/// reads do not dominate a small call.
const MIN_SLOT_TICKS: u64 = 2000;

/// How an A/B run stops.
#[derive(Debug, Clone, Copy)]
pub struct AbOptions {
    /// `--detect`: stop once the change is flagged or shown inside
    /// +-this fraction; `None`: run the budget, one look at the end.
    pub detect: Option<f64>,
    /// Wall time per pair of cells at most.
    pub budget: Duration,
    pub alpha: f64,
}

impl AbVerdict {
    pub fn text(self, margin: Option<f64>) -> String {
        match (self, margin) {
            (AbVerdict::Slower, _) => "flagged: B slower (R)".into(),
            (AbVerdict::Faster, _) => "flagged: B faster (I)".into(),
            (AbVerdict::Equivalent, Some(m)) => format!("equivalent within +-{}%", m * 100.0),
            (AbVerdict::Equivalent, None) => "equivalent".into(),
            (AbVerdict::Unresolved, Some(_)) => "unresolved: budget spent".into(),
            (AbVerdict::Unresolved, None) => "cannot tell".into(),
        }
    }
}

/// Why two cells cannot share a guest, or which pairs can.
pub enum Pairing {
    Pairs(Vec<(usize, usize)>),
    Apart(String),
}

/// The key cells of the two sides are matched on.
fn key(a: &Axes) -> impl PartialEq + '_ {
    (a.routine, a.chunk, a.order, a.fill, a.backing, a.shape)
}

/// The (A, B) pairs of `specs`: with two sides, each cell of the first
/// against the second's cell of the same axes (by variant name where a
/// side has several); with one side, its two variants. `Apart` says why
/// not, and then the sessions pair the sides as before.
pub fn pairs(plan: &Plan, specs: &[CellSpec], privilege: &PrivilegeChoice) -> Pairing {
    if plan.shape.vcpus != 1 {
        return Pairing::Apart("A/B in one guest runs one vCPU (--vcpus 1)".into());
    }
    if plan.fills.contains(&PageState::Demand) {
        return Pairing::Apart("--fill demand drops the pages between passes".into());
    }
    let (p0, p1) = match plan.sides.as_slice() {
        [a, b] => (a, b),
        [_] => return one_side_pairs(specs),
        _ => return Pairing::Apart("A/B in one guest takes two sides".into()),
    };
    if p0.privilege(privilege.privilege) != p1.privilege(privilege.privilege)
        || p0.dc_zva != p1.dc_zva
    {
        return Pairing::Apart("the sides run at different privileges".into());
    }
    let mut out = Vec::new();
    for (i, a) in specs.iter().enumerate().filter(|(_, s)| s.side == 0) {
        let same: Vec<usize> = (0..specs.len())
            .filter(|&j| specs[j].side == 1 && key(&specs[j].axes) == key(&a.axes))
            .collect();
        let named = same
            .iter()
            .find(|&&j| specs[j].axes.variant == a.axes.variant);
        match (named, same.as_slice()) {
            (Some(&j), _) | (None, &[j]) => out.push((i, j)),
            _ => return Pairing::Apart(format!("{} has no counterpart", a.axes.label())),
        }
    }
    Pairing::Pairs(out)
}

fn one_side_pairs(specs: &[CellSpec]) -> Pairing {
    let mut out = Vec::new();
    for (i, a) in specs.iter().enumerate() {
        let later: Vec<usize> = (i + 1..specs.len())
            .filter(|&j| key(&specs[j].axes) == key(&a.axes))
            .collect();
        let earlier = (0..i).any(|j| key(&specs[j].axes) == key(&a.axes));
        match (earlier, later.as_slice()) {
            (true, _) => {}
            (false, &[j]) => out.push((i, j)),
            _ => {
                return Pairing::Apart(
                    "A/B of one side's variants takes exactly two (-f A,B)".into(),
                );
            }
        }
    }
    Pairing::Pairs(out)
}

/// One pair's guest: the VM (B's blob beside A's unless they are one
/// blob), both commands on the same placement.
struct Guest<'a> {
    vm: Vm,
    cmds: [Command; 2],
    place: Placement,
    pats: &'a Patterns,
    specs: [&'a CellSpec; 2],
    plan: &'a Plan,
    /// Both sides' host copies on this guest's buffer, where both have one.
    host: Option<host::HostPair>,
}

impl<'a> Guest<'a> {
    /// `swap`: B's blob is the main one and A's beside it (every other
    /// guest), so neither tree always sits at the same place.
    fn boot(
        plan: &'a Plan,
        specs: [&'a CellSpec; 2],
        (privilege, seed, pats, swap): (&PrivilegeChoice, u64, &'a Patterns, bool),
    ) -> Result<Guest<'a>> {
        let apart = specs[0].side != specs[1].side;
        let (main, other) = match swap && apart {
            true => (specs[1], specs[0]),
            false => (specs[0], specs[1]),
        };
        let opts = plan.session_vm((main.backing, main.side), privilege, seed)?;
        let beside = match apart {
            true => Some(plan.sides[other.side].blob()?),
            false => None,
        };
        let vm = Vm::with_beside(crate::vmm::open_kvm()?, &opts, beside.as_ref())?;
        let builtin = specs.iter().all(|s| plan.sides[s.side].is_builtin());
        let host = match plan.host_baseline && builtin {
            true => host::HostPair::new(specs, (plan, pats), vm.ram.clone())?,
            false => None,
        };
        let place = placement(plan, 0);
        let call = |s: &CellSpec| pass_call(s, plan, &place, pats.fill);
        let m = routines::command(&vm.blob, main.variant, &call(main))?;
        let o = match &vm.beside {
            Some((blob, _)) => Command {
                table: abi::TABLE_BESIDE,
                ..routines::command(blob, other.variant, &call(other))?
            },
            None => routines::command(&vm.blob, other.variant, &call(other))?,
        };
        Ok(Guest {
            vm,
            cmds: if swap && apart { [o, m] } else { [m, o] },
            place,
            pats,
            specs,
            plan,
            host,
        })
    }

    /// Both sides checked on the buffer (untimed, seeded patterns): a
    /// wrong routine never gets a number.
    fn verify(&mut self) -> Result<()> {
        let expect = checker::Expect::of(self.plan.routine.kind(), self.pats.fill);
        for (cmd, spec) in self.cmds.iter().zip(self.specs) {
            checker::prepare(&self.vm.ram, &self.place, self.pats, expect)?;
            let r = self.vm.vcpu(0)?.call(cmd, self.plan.timeout)?;
            kept_contract(&r)?;
            let out = checker::check(&self.vm.ram, &self.place, expect, self.pats)?;
            if !out.passed() {
                return Err(Error::WrongRegion {
                    cell: spec.axes.label(),
                    breakdown: out.breakdown.label(),
                    bad_bytes: out.bad_bytes,
                    first_bad: out.first_bad,
                });
            }
        }
        Ok(())
    }

    /// One batch: `order` gives each block's first side; returns the
    /// slots' ticks in order and whether the batch lost time to others.
    fn batch(&mut self, order: &[bool], per_slot: u64) -> Result<(Vec<u64>, bool)> {
        let cmds: Vec<Command> = slot_sides(order)
            .map(|s| repeated(&self.cmds[s], per_slot))
            .collect();
        let est = self.plan.shape.size as f64 * cmds.len() as f64 * per_slot as f64 / 1e8;
        let timeout = self.plan.timeout + Duration::from_secs_f64(est);
        let _rt = sched::Fifo::during(self.plan.priority == Priority::Fifo);
        let w = sched::Watch::start();
        let rs = match self.plan.cache {
            Cache::Warm => self.vm.vcpu(0)?.call_batch(&cmds, timeout)?,
            Cache::Cold => self.cold_calls(&cmds, timeout)?,
        };
        let off = w.stop();
        let mut ticks = Vec::with_capacity(rs.len());
        for r in &rs {
            kept_contract(r)?;
            ticks.push(bounded(r.ticks(), timeout, self.vm.counter_khz)?);
        }
        Ok((ticks, off.disturbed()))
    }
}

impl Guest<'_> {
    /// The host baseline's batch: `order`'s blocks, the host copies on the
    /// same buffer while the vCPU waits, each slot from the same
    /// precondition and timed by the host clock; `None` without a host
    /// baseline.
    fn host_batch(&self, order: &[bool], per_slot: u64) -> Result<Option<(Vec<f64>, bool)>> {
        let Some(h) = &self.host else {
            return Ok(None);
        };
        let _rt = sched::Fifo::during(self.plan.priority == Priority::Fifo);
        let w = sched::Watch::start();
        let ns = slot_sides(order)
            .map(|s| h.slot(s, per_slot))
            .collect::<Result<Vec<f64>>>()?;
        Ok(Some((ns, w.stop().disturbed())))
    }

    /// `--cache cold`: each slot its own command, the buffer evicted from
    /// every cache level before it (outside the timing), as every timed
    /// pass of the sessions is.
    fn cold_calls(&mut self, cmds: &[Command], timeout: Duration) -> Result<Vec<CallResult>> {
        let mut out = Vec::with_capacity(cmds.len());
        for c in cmds {
            crate::sequence::precondition(&self.vm.ram, &[self.place], false, Cache::Cold)?;
            out.push(self.vm.vcpu(0)?.call(c, timeout)?);
        }
        Ok(out)
    }
}

/// The side of every slot of `order`'s blocks (ABBA, or BAAB where a
/// block's entry is true), in the order they run.
fn slot_sides(order: &[bool]) -> impl Iterator<Item = usize> + '_ {
    order.iter().flat_map(|&b_first| {
        let (x, y) = if b_first { (1, 0) } else { (0, 1) };
        [x, y, y, x]
    })
}

/// `cmd` with its one call made `n` calls ([`host::repeated`]).
fn repeated(cmd: &Command, n: u64) -> Command {
    Command {
        args: host::repeated(cmd.args, n),
        ..*cmd
    }
}

/// A slot's ticks as the guest gave them must fit the batch's timeout:
/// more is a guest that lies about its counter.
fn bounded(ticks: u64, timeout: Duration, khz: u64) -> Result<u64> {
    let most = (timeout.as_secs_f64() * khz as f64 * 1e3) as u64;
    if ticks > most {
        return Err(Error::protocol(format!(
            "a batch slot took {ticks} ticks, more than the batch's timeout ({most} ticks)"
        )));
    }
    Ok(ticks)
}

fn kept_contract(r: &CallResult) -> Result<()> {
    match r.breach {
        Some(breach) => Err(Error::Contract { breach }),
        None => Ok(()),
    }
}

/// One guest's kept blocks and the per-side ns per call behind them.
#[derive(Default)]
struct Blocks {
    logs: Vec<f64>,
    ns: [Vec<f64>; 2],
    dropped_blocks: u64,
    dropped_batches: u64,
}

impl Blocks {
    /// Add a batch's slots (`order` as in [`Guest::batch`]) under the
    /// outlier rule.
    fn add(&mut self, order: &[bool], slots: &[f64], disturbed: bool) {
        if disturbed {
            self.dropped_batches += 1;
            return;
        }
        let sides: Vec<usize> = slot_sides(order).collect();
        let refs: [f64; 2] = [0, 1].map(|s| {
            let this: Vec<f64> = slots
                .iter()
                .zip(&sides)
                .filter(|(_, side)| **side == s)
                .map(|(t, _)| *t)
                .collect();
            match this.len() >= 8 {
                true => crate::stats::median(&this),
                false => crate::stats::median(&[self.ns[s].clone(), this].concat()),
            }
        });
        for (four, sides) in slots.chunks_exact(4).zip(sides.chunks_exact(4)) {
            let mut sum = [0f64; 2];
            let mut out = false;
            for (t, &s) in four.iter().zip(sides) {
                sum[s] += *t;
                out |= *t > OUTLIER * refs[s] || *t <= 0.0;
            }
            if out {
                self.dropped_blocks += 1;
                continue;
            }
            self.logs.push((sum[1] / sum[0]).ln());
            for (t, &s) in four.iter().zip(sides) {
                self.ns[s].push(*t);
            }
        }
    }
}

/// The level of look `k` (0-based): alpha / 2^(k+1).
pub(crate) fn look_alpha(alpha: f64, k: u32) -> f64 {
    alpha / 2f64.powi(k as i32 + 1)
}

/// What a look at `s` decides with margin `margin` (fraction), the marks
/// of `compare`: inside +-margin is equivalent (a change too small to
/// matter, even where the interval excludes 0), else an interval that
/// excludes 0 is flagged.
pub(crate) fn decide(s: &Shift, margin: Option<f64>) -> AbVerdict {
    let pct = |v: f64| blocks::throughput_pct(v);
    if let Some(m) = margin
        && pct(s.hi) > -m * 100.0
        && pct(s.lo) < m * 100.0
    {
        return AbVerdict::Equivalent;
    }
    match (s.lo > 0.0, s.hi < 0.0) {
        (true, _) => AbVerdict::Slower,
        (_, true) => AbVerdict::Faster,
        _ => AbVerdict::Unresolved,
    }
}

/// Run every pair; `seed` seeds the patterns, each VM and the block order.
pub fn run(
    plan: &Plan,
    specs: &[CellSpec],
    pairs: &[(usize, usize)],
    (privilege, seed): (&PrivilegeChoice, u64),
    opts: AbOptions,
) -> Result<(Vec<AbRow>, u64)> {
    let copy_len = match plan.routine.kind() {
        routines::Kind::Copy => plan.shape.size as usize,
        _ => 0,
    };
    let pats = Patterns::new(seed, copy_len);
    let mut rows = Vec::new();
    let mut khz = 0;
    for (n, &(a, b)) in pairs.iter().enumerate() {
        if crate::interrupt::requested() {
            break;
        }
        let pair = Pair {
            plan,
            specs: [&specs[a], &specs[b]],
            privilege,
            pats: &pats,
            seed: seed.wrapping_add(n as u64 * 1000),
            opts,
        };
        let (row, k) = pair.measure()?;
        khz = k;
        rows.push(row);
    }
    Ok((rows, khz))
}

/// Calls per slot and blocks per batch from one calibration block.
fn sizing(g: &mut Guest) -> Result<(u64, u64)> {
    let (t, _) = g.batch(&[false], 1)?;
    let per_call = t.iter().copied().min().unwrap_or(1).max(1);
    let one_call = g.cmds.iter().all(|c| c.args.count == 1);
    let per_slot = match one_call && g.plan.cache == Cache::Warm {
        true => MIN_SLOT_TICKS.div_ceil(per_call).clamp(1, 64),
        false => 1,
    };
    let block_ns = 4.0 * (per_call * per_slot) as f64 * 1e6 / g.vm.counter_khz.max(1) as f64;
    let blocks = ((BATCH_NS / block_ns) as u64).clamp(1, MAX_BLOCKS);
    Ok((per_slot, blocks))
}

/// Guests a pair is measured in at least, and at `--detect`'s first look
/// (the t interval over guests needs 3).
const MIN_GUESTS: usize = 4;

/// A guest lasts at most this share of the budget, so that where a block
/// is long (a 256 MB pass is ~10 ms, its block 50 ms) the budget still
/// holds a dozen guests: the interval is a t over guests, and with four
/// of them its quantile at --detect's first level is 4.2, with twelve 2.9.
/// At 256 MB the placement adds nothing to the spread between guests, so
/// shorter guests cost no precision (docs/method.md, power table).
const GUESTS_PER_BUDGET: u32 = 16;

/// One pair of cells and how to measure it.
struct Pair<'a> {
    plan: &'a Plan,
    specs: [&'a CellSpec; 2],
    privilege: &'a PrivilegeChoice,
    pats: &'a Patterns,
    seed: u64,
    opts: AbOptions,
}

/// A look's shift, verdict and level.
type Look = (Shift, AbVerdict, f64);

impl Pair<'_> {
    /// Guests one after another (a slice of the budget each) until the
    /// stop rule; returns the row and the counter's kHz.
    fn measure(&self) -> Result<(AbRow, u64)> {
        let start = Instant::now();
        let slice = self.opts.budget / GUESTS_PER_BUDGET;
        let mut guests: Vec<GuestRun> = Vec::new();
        let (mut look, mut next, mut khz) = (0u32, MIN_GUESTS, 0);
        let mut last: Option<Look> = None;
        loop {
            let n = guests.len();
            let per = start.elapsed() / (n.max(1) as u32);
            let spent = n >= MIN_GUESTS && start.elapsed() + per > self.opts.budget;
            if spent || crate::interrupt::requested() {
                break;
            }
            let seed = self.seed.wrapping_add(n as u64);
            let swap = n % 2 == 1;
            let mut g = Guest::boot(
                self.plan,
                self.specs,
                (self.privilege, seed, self.pats, swap),
            )?;
            khz = g.vm.counter_khz;
            guests.push(one_guest(&mut g, seed, (slice, n == 0))?);
            if let Some(m) = self.opts.detect
                && guests.len() >= next
            {
                let alpha = look_alpha(self.opts.alpha, look);
                last = blocks::clustered(&logs(&guests), alpha)
                    .map(|s| (s, decide(&s, Some(m)), alpha));
                look += 1;
                next = guests.len() * 2;
                if last.is_some_and(|l| l.1 != AbVerdict::Unresolved) {
                    break;
                }
            }
        }
        let last = match last {
            Some(l) if l.1 != AbVerdict::Unresolved => Some(l),
            _ => {
                // The final look: at the next look's level under --detect.
                let d = self.opts.detect;
                let alpha = match d {
                    Some(_) => look_alpha(self.opts.alpha, look),
                    None => self.opts.alpha,
                };
                blocks::clustered(&logs(&guests), alpha).map(|s| (s, decide(&s, d), alpha))
            }
        };
        let row = self.row((guests, last), look, start.elapsed())?;
        Ok((row, khz))
    }

    /// The row of a measured pair.
    fn row(
        &self,
        (guests, last): (Vec<GuestRun>, Option<Look>),
        looks: u32,
        wall: Duration,
    ) -> Result<AbRow> {
        let kept: usize = guests.iter().map(|g| g.blocks.logs.len()).sum();
        let dropped: u64 = guests.iter().map(|g| g.blocks.dropped_blocks).sum();
        let Some((s, verdict, alpha)) = last else {
            return Err(Error::TooFewBlocks {
                cell: self.specs[0].axes.label(),
                kept,
                of: kept as u64 + dropped,
                guests: guests.len(),
            });
        };
        let ns = |side: usize| {
            let all: Vec<f64> = guests
                .iter()
                .flat_map(|g| g.blocks.ns[side].clone())
                .collect();
            crate::stats::median(&all)
        };
        let name = |i: usize| {
            let sp = self.specs[i];
            format!("{} {}", self.plan.sides[sp.side].name, sp.axes.variant)
        };
        let guest_shifts = guests
            .iter()
            .filter_map(|g| blocks::shift(&g.blocks.logs, alpha).map(|s| s.est))
            .collect();
        let (change_pct, interval_pct) = s.throughput_pct();
        Ok(AbRow {
            axes: self.specs[0].axes.clone(),
            a: name(0),
            b: name(1),
            a_ns: ns(0),
            b_ns: ns(1),
            change_pct,
            interval_pct,
            level: 1.0 - alpha,
            mde_pct: (s.mde.exp() - 1.0) * 100.0,
            verdict,
            margin: self.opts.detect,
            blocks: kept as u64,
            dropped_blocks: dropped,
            dropped_batches: guests.iter().map(|g| g.blocks.dropped_batches).sum(),
            calls_per_slot: guests.iter().map(|g| g.per_slot).max().unwrap_or(1),
            looks: u64::from(looks),
            guests: guests.len() as u64,
            guest_shifts,
            wall_s: wall.as_secs_f64(),
            guest_host: [0, 1].map(|side| guest_host(&guests, side, self.plan.shape.size)),
            host_change: host_change(&guests, alpha),
            block_log_ratios: guests.into_iter().flat_map(|g| g.blocks.logs).collect(),
        })
    }
}

fn logs(guests: &[GuestRun]) -> Vec<Vec<f64>> {
    guests.iter().map(|g| g.blocks.logs.clone()).collect()
}

/// `side`'s guest/host over the guests: each guest's mean guest time per
/// slot over its mean host time per slot (both kept under the outlier
/// rule), paired by guest as sessions pair theirs; `None` without a host
/// baseline.
fn guest_host(guests: &[GuestRun], side: usize, size: u64) -> Option<PairedRatio> {
    let pairs: Vec<SessionRatio> = guests
        .iter()
        .enumerate()
        .filter_map(|(i, g)| {
            let bytes = (size * g.per_slot) as f64 * 1e9;
            let h = g.host.as_ref()?;
            Some(SessionRatio {
                session: i as u64,
                guest: bytes / crate::stats::mean(&g.blocks.ns[side]),
                host: bytes / crate::stats::mean(&h.ns[side]),
                ratio: 0.0,
            })
        })
        .collect();
    PairedRatio::of(&pairs, 0.05)
}

/// B against A from the host batches' blocks, clustered by guest as the
/// guest's change is; `None` without a host baseline or with fewer than 3
/// guests of enough host blocks.
fn host_change(guests: &[GuestRun], alpha: f64) -> Option<HostChange> {
    let logs: Vec<Vec<f64>> = guests
        .iter()
        .filter_map(|g| Some(g.host.as_ref()?.logs.clone()))
        .collect();
    let s = blocks::clustered(&logs, alpha)?;
    let (change_pct, interval_pct) = s.throughput_pct();
    Some(HostChange {
        change_pct,
        interval_pct,
        blocks: s.blocks as u64,
        guests: s.groups as u64,
    })
}

/// One guest's kept blocks, its host baseline's, and the calls per slot.
struct GuestRun {
    blocks: Blocks,
    host: Option<Blocks>,
    per_slot: u64,
}

/// A host batch follows every this many guest batches (the second, the
/// tenth, ...: every guest has at least two), so the host baseline costs
/// about a ninth of the A/B's time and sees the same minutes.
const HOST_EVERY: u64 = 8;

/// Blocks a guest aims for (more guests beat more blocks of one: the
/// placement varies between guests), within 200 ms and the slice.
const GUEST_BLOCKS: u32 = 64;

/// One guest: verify, size (its block is the warm-up of a slow call; a
/// fast one gets a warm-up batch too), then batches for 64 blocks' time
/// (at least 200 ms, at most `slice`), and with `after` verify again (the
/// first guest: every later one is verified before its calls, and a
/// guest costs a large buffer's patterns twice per side and check).
/// Its blocks and calls per slot.
fn one_guest(g: &mut Guest, seed: u64, (slice, after): (Duration, bool)) -> Result<GuestRun> {
    g.verify()?;
    let sized = Instant::now();
    let (per_slot, per_batch) = sizing(g)?;
    let mut block = sized.elapsed();
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xabba);
    let mut order = |n: u64| (0..n).map(|_| rng.next_u64() & 1 == 1).collect::<Vec<_>>();
    if per_batch > 1 {
        let o = order(per_batch);
        let warm = Instant::now();
        g.batch(&o, per_slot)?;
        block = warm.elapsed() / (per_batch as u32);
    }
    let least = Duration::from_millis(200);
    let slice = (block * GUEST_BLOCKS).clamp(least, slice.max(least));
    let start = Instant::now();
    let ns_per = 1e6 / g.vm.counter_khz.max(1) as f64 / per_slot as f64;
    let mut b = Blocks::default();
    let mut host = g.host.as_ref().map(|_| Blocks::default());
    // At least two batches, so a slow call still gives a few blocks.
    let mut batches = 0;
    while (batches < 2 || start.elapsed() < slice) && !crate::interrupt::requested() {
        let o = order(per_batch);
        let (t, disturbed) = g.batch(&o, per_slot)?;
        let ns: Vec<f64> = t.iter().map(|t| *t as f64 * ns_per).collect();
        b.add(&o, &ns, disturbed);
        if batches % HOST_EVERY == 1
            && let (Some(hb), Some((ns, disturbed))) = (&mut host, g.host_batch(&o, per_slot)?)
        {
            hb.add(&o, &ns, disturbed);
        }
        batches += 1;
    }
    if after {
        g.verify()?;
    }
    Ok(GuestRun {
        blocks: b,
        host,
        per_slot,
    })
}

/// KTAP: one passing test per measured pair (a measurement, not a
/// check), its change, MDE and verdict as diagnostics.
pub fn ktap(rows: &[AbRow]) -> crate::ktap::Document {
    use crate::ktap::{Document, Outcome, Test};
    let leaves = rows
        .iter()
        .map(|r| {
            let [lo, hi] = r.interval_pct;
            let name = format!("{} vs {}: {}", r.a, r.b, r.axes.label_with(false));
            let change = format!(
                "change {:+.2}% [{lo:+.2}%, {hi:+.2}%] at {:.1}%, MDE {:.2}%, {} blocks in {} \
                 guests: {}",
                r.change_pct,
                r.level * 100.0,
                r.mde_pct,
                r.blocks,
                r.guests,
                r.verdict.text(r.margin)
            );
            Test::leaf(name, Outcome::Pass)
                .with_diagnostics(std::iter::once(change).chain(guest_host_lines(r)))
        })
        .collect();
    Document::Tests(vec![Test::parent("ab", leaves)])
}

/// The A/B table.
pub fn table(rows: &[AbRow]) -> String {
    let mut t = crate::table::table(&[
        "cell",
        "A",
        "B",
        "A ns/call",
        "B ns/call",
        "change [CI]",
        "MDE",
        "blocks/guests (dropped)",
        "verdict",
        "wall",
    ]);
    for r in rows {
        let [lo, hi] = r.interval_pct;
        t.add_row(vec![
            comfy_table::Cell::new(r.axes.label_with(false)),
            comfy_table::Cell::new(&r.a),
            comfy_table::Cell::new(&r.b),
            crate::table::right(format!("{:.1}", r.a_ns)),
            crate::table::right(format!("{:.1}", r.b_ns)),
            crate::table::right(format!(
                "{:+.2}% [{lo:+.2}%, {hi:+.2}%] ({:.1}%)",
                r.change_pct,
                r.level * 100.0
            )),
            crate::table::right(format!("{:.2}%", r.mde_pct)),
            crate::table::right(format!("{}/{} ({})", r.blocks, r.guests, r.dropped_blocks)),
            comfy_table::Cell::new(r.verdict.text(r.margin)),
            crate::table::right(format!("{:.1} s", r.wall_s)),
        ]);
    }
    let mut out = t.to_string();
    for line in rows.iter().flat_map(guest_host_lines) {
        out.push('\n');
        out.push_str(&line);
    }
    out
}

/// `guest/host 0.98 [0.96, 1.00]  A: cell (12 guests paired)` for each
/// side of `r` with a host baseline, then the host copies' B against A.
fn guest_host_lines(r: &AbRow) -> impl Iterator<Item = String> + '_ {
    let sides = [&r.a, &r.b]
        .into_iter()
        .zip(&r.guest_host)
        .filter_map(move |(name, gh)| {
            let gh = gh.as_ref()?;
            Some(format!(
                "guest/host {}  {name}: {} ({} guest(s) paired)",
                gh.text(),
                r.axes.label_with(false),
                gh.sessions.len()
            ))
        });
    let host = r.host_change.as_ref().map(|h| {
        let [lo, hi] = h.interval_pct;
        format!(
            "host {} vs {}: {:+.2}% [{lo:+.2}%, {hi:+.2}%] on the same buffers ({} blocks in {} \
             guests; in the guest {:+.2}%)",
            r.a, r.b, h.change_pct, h.blocks, h.guests, r.change_pct
        )
    });
    sides.chain(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outlier_rule_drops_whole_blocks_alike_for_both_sides() {
        let mut b = Blocks::default();
        // 4 blocks: ABBA, BAAB, ABBA, ABBA; B takes 110 ticks, A 100; one
        // preempted A call in block 2.
        let order = [false, true, false, false];
        let mut slots: Vec<f64> = Vec::new();
        for (i, &bf) in order.iter().enumerate() {
            for k in 0..4 {
                let is_b = bf ^ (k == 1 || k == 2);
                let mut t = if is_b { 110.0 } else { 100.0 };
                if i == 2 && k == 0 {
                    t = 1000.0;
                }
                slots.push(t);
            }
        }
        b.add(&order, &slots, false);
        assert_eq!(b.logs.len(), 3);
        assert_eq!(b.dropped_blocks, 1);
        for l in &b.logs {
            assert!((l - (1.1f64).ln()).abs() < 1e-12);
        }
        b.add(&order, &slots, true);
        assert_eq!((b.logs.len(), b.dropped_batches), (3, 1));
    }

    #[test]
    fn blocks_run_abba_or_baab() {
        let sides: Vec<usize> = slot_sides(&[false, true]).collect();
        assert_eq!(sides, [0, 1, 1, 0, 1, 0, 0, 1]);
    }

    /// Guests whose guest calls take `g` ns and host calls `h` ns a side.
    fn runs(per_guest: &[([f64; 2], Option<[f64; 2]>)]) -> Vec<GuestRun> {
        per_guest
            .iter()
            .map(|(g, h)| {
                let blocks = |t: [f64; 2]| Blocks {
                    ns: t.map(|v| vec![v, v * 1.01, v * 0.99]),
                    ..Blocks::default()
                };
                GuestRun {
                    blocks: blocks(*g),
                    host: h.map(blocks),
                    per_slot: 2,
                }
            })
            .collect()
    }

    #[test]
    fn guest_host_pairs_each_guests_own_host_calls_side_by_side() {
        // A: guest 110 ns against host 100 (0.91); B: guest 100 against
        // host 100; one guest without host calls is left out.
        let g = runs(&[
            ([110.0, 100.0], Some([100.0, 100.0])),
            ([121.0, 110.0], Some([110.0, 110.0])),
            ([99.0, 90.0], Some([90.0, 90.0])),
            ([50.0, 50.0], None),
        ]);
        let a = guest_host(&g, 0, 4096).unwrap();
        assert!((a.estimate - 1.0 / 1.1).abs() < 1e-9, "{a:?}");
        assert_eq!(a.sessions.len(), 3);
        assert!(a.contains(a.estimate));
        let b = guest_host(&g, 1, 4096).unwrap();
        assert!((b.estimate - 1.0).abs() < 1e-9, "{b:?}");
        // Throughput is bytes per slot (size x calls) over the mean time.
        let bps = 4096.0 * 2.0 * 1e9 / 110.0;
        assert!((a.sessions[0].guest / bps - 1.0).abs() < 1e-9);
        assert!(guest_host(&runs(&[([1.0, 1.0], None)]), 0, 4096).is_none());
    }

    #[test]
    fn the_host_change_is_the_host_blocks_own() {
        // In the guest B takes 10% longer; the host copies take the same
        // time; a guest without host blocks is left out.
        let logs = |ratio: f64, k: usize| -> Vec<f64> {
            (0..8)
                .map(|i| (ratio * (1.0 + 0.002 * ((i + k) % 3) as f64)).ln())
                .collect()
        };
        let g: Vec<GuestRun> = (0..4)
            .map(|k| GuestRun {
                blocks: Blocks {
                    logs: logs(1.1, k),
                    ..Blocks::default()
                },
                host: (k < 3).then(|| Blocks {
                    logs: logs(1.0, k),
                    ..Blocks::default()
                }),
                per_slot: 1,
            })
            .collect();
        let h = host_change(&g, 0.05).unwrap();
        assert_eq!((h.blocks, h.guests), (24, 3));
        assert!(h.change_pct.abs() < 0.5, "{h:?}");
        let [lo, hi] = h.interval_pct;
        assert!(lo <= h.change_pct && h.change_pct <= hi, "{h:?}");
        assert!(host_change(&g[3..], 0.05).is_none());
    }

    #[test]
    fn looks_spend_alpha_and_decide_by_the_interval() {
        let total: f64 = (0..40).map(|k| look_alpha(0.05, k)).sum();
        assert!(total < 0.05 && total > 0.0499);
        let s = |lo: f64, hi: f64| Shift {
            est: (lo + hi) / 2.0,
            lo,
            hi,
            mde: 0.0,
            blocks: 10,
            groups: 10,
        };
        assert_eq!(decide(&s(0.001, 0.02), Some(0.01)), AbVerdict::Slower);
        assert_eq!(decide(&s(0.001, 0.005), Some(0.01)), AbVerdict::Equivalent);
        assert_eq!(decide(&s(0.001, 0.005), None), AbVerdict::Slower);
        assert_eq!(decide(&s(-0.02, -0.001), Some(0.01)), AbVerdict::Faster);
        assert_eq!(decide(&s(-0.005, 0.005), Some(0.01)), AbVerdict::Equivalent);
        assert_eq!(decide(&s(-0.005, 0.02), Some(0.01)), AbVerdict::Unresolved);
        assert_eq!(decide(&s(-0.005, 0.005), None), AbVerdict::Unresolved);
    }
}
