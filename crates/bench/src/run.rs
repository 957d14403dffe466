//! Running a bench plan: sessions of fresh VMs, the cells of each run by
//! turns in the guest and on the host, checkpoints after every cell.
use crate::arch::CpuCaps;
use crate::check::checker::Patterns;
use crate::error::Result;
use crate::model::{BenchResult, Cell, HugeShare, Priority, SideInfo, summarize};
use crate::plan::{CellSpec, Plan};
use crate::routines::Kind;
use crate::routines::privilege::PrivilegeChoice;
use crate::vmm::Vm;
use crate::vmm::host::HostInfo;
use crate::vmm::memory::Backing;
use crate::{ab, guest, host, precision, report, sched, sequence, stats};

/// One cell in `session` on `vm`: the guest (verified before, and what
/// every timed run left checked after) and, for a built-in side with a
/// host baseline, the host, run by turns (host first in odd sessions),
/// into `c`.
fn run_cell(vm: &mut Vm, spec: &CellSpec, cx: (&Plan, &Patterns, u64), c: &mut Cell) -> Result<()> {
    let (plan, _, session) = cx;
    let khz = vm.counter_khz;
    // A kernel blob's routines exist only in the guest image: no host.
    let mut h = match plan.host_baseline && plan.sides[spec.side].is_builtin() {
        true => host::HostCell::new(spec, cx, (vm.ram.clone(), khz))?,
        false => None,
    };
    let mut g = guest::GuestCell::new(vm, spec, cx)?;
    let (gs, hs) = sequence::run_pair(
        plan,
        session,
        session % 2 == 1,
        || g.one(),
        h.as_mut().map(|h| move || h.one()),
    )?;
    g.check_outcome()?;
    c.verified_runs += 2;
    c.huge_share.push(HugeShare {
        session,
        guest: vm.ram.huge_share(),
        host: h.as_ref().and_then(|h| h.huge_share()),
    });
    c.guest.extend(gs.measured);
    c.guest_warmup.extend(gs.warmup);
    c.guest_steady.push(gs.steady);
    if let Some(hs) = hs {
        c.host.extend(hs.measured);
        c.host_warmup.extend(hs.warmup);
        c.host_steady.push(hs.steady);
    }
    Ok(())
}

/// Run the cells `idx` of `specs` (one backing and link configuration) on
/// `vm` in session `cx.2`, adding their samples to `cells`, and hands all
/// cells to `after_cell` after each one (the checkpoint). `Ok(false)`
/// when SIGINT stopped a guest cell.
fn run_cells(
    vm: &mut Vm,
    idx: &[usize],
    specs: &[CellSpec],
    cx: (&Plan, &Patterns, u64),
    cells: &mut [Cell],
    progress: &indicatif::ProgressBar,
    after_cell: &mut dyn FnMut(&[Cell]) -> Result<()>,
) -> Result<bool> {
    for &i in idx {
        match run_cell(vm, &specs[i], cx, &mut cells[i]) {
            Err(crate::error::Error::Vmm(crate::error::VmmError::Interrupted)) => return Ok(false),
            other => other?,
        }
        progress.inc(1);
        after_cell(cells)?;
    }
    Ok(true)
}

/// The plan with the priority this process may take (`fifo` tried on
/// this thread, then nice -10), said on stderr when refused; sets this
/// thread's niceness (the run's other threads inherit it). The niceness.
fn with_priority(plan: &Plan) -> (Plan, i32) {
    let want = plan.priority;
    let fifo = want == Priority::Fifo && sched::set_fifo(true) && sched::set_fifo(false);
    let (nice, refused) = match want {
        Priority::Normal => (sched::nice(), false),
        _ => sched::set_nice(-10),
    };
    let got = match (want, fifo, refused) {
        (Priority::Fifo, true, _) => Priority::Fifo,
        (Priority::Normal, ..) => Priority::Normal,
        (_, _, false) => Priority::Nice,
        _ => Priority::Normal,
    };
    if got != want {
        hypclear_process::errln!(
            "hypclear bench: --priority {want:?} refused (needs root or CAP_SYS_NICE); the timed \
             threads run as {got:?} at nice {nice}, where a busy machine preempts them more \
             (those runs are repeated)"
        );
    }
    (
        Plan {
            priority: got,
            ..plan.clone()
        },
        nice,
    )
}

/// Puts this thread's niceness back when the run ends, however it ends.
struct RestoreNice(i32);

impl Drop for RestoreNice {
    fn drop(&mut self) {
        sched::set_nice(self.0);
    }
}

/// `cells` with their summaries ([`summarize`]).
fn summarized(cells: &[Cell], repeats: u64) -> Vec<Cell> {
    let mut cells = cells.to_vec();
    for c in &mut cells {
        summarize(c, repeats);
    }
    cells
}

/// The `partial_reason` of a result so far (a checkpoint); the end of the
/// run replaces it with the signal or the error.
pub const IN_PROGRESS: &str = "in progress: written after each finished cell while the run went \
                               on; a file that still says so was left by a process killed without \
                               a word (SIGKILL, the OOM killer, a lost machine) or one that could \
                               not write its final result (its error message says which)";

/// The result so far: the cells summarized, with the plan and the host.
fn snapshot(
    (plan, nice): (&Plan, i32),
    privilege: &PrivilegeChoice,
    caps: &CpuCaps,
    cells: &[Cell],
    counter_khz: u64,
    (partial, sessions, elapsed): (bool, u64, std::time::Duration),
    setup: &[f64],
) -> BenchResult {
    let cells = summarized(cells, plan.repeats);
    let precision = plan
        .precision
        .map(|p| precision::outcome(&cells, p, plan.sessions, (sessions, elapsed)));
    let mut r = BenchResult {
        tool: "hypclear".into(),
        command: "bench".into(),
        host: HostInfo::collect(caps, counter_khz),
        privilege: privilege.name.into(),
        warmup: plan.warmup,
        repeats: plan.repeats,
        max_runs: plan.max_runs,
        priority: Some(plan.priority),
        nice: Some(nice),
        sessions,
        precision,
        partial,
        partial_reason: partial.then(|| IN_PROGRESS.to_string()),
        cache: Some(plan.cache),
        max_warmup: plan.max_warmup,
        session_setup_seconds: stats::mean(setup),
        sides: plan.sides.iter().map(SideInfo::of).collect(),
        kernel: plan
            .sides
            .iter()
            .find_map(|s| s.external())
            .map(|e| e.report.clone()),
        reproducibility: None,
        cells,
        explain: Vec::new(),
        ab: Vec::new(),
    };
    r.reproducibility = report::Reproducibility::of(&r, 0.02);
    r
}

/// `--ab`: every pair of `pairs` (cell indices of `specs`) measured A/B in
/// one guest ([`ab`]), as a result with no session cells.
pub fn run_ab(
    plan: &Plan,
    specs: &[CellSpec],
    pairs: &[(usize, usize)],
    (seed, privilege, caps): (u64, &PrivilegeChoice, &CpuCaps),
    opts: ab::AbOptions,
) -> Result<BenchResult> {
    let _restore = RestoreNice(sched::nice());
    let (plan, nice) = &with_priority(plan);
    let (rows, khz) = ab::run(plan, specs, pairs, (privilege, seed), opts)?;
    let partial = crate::interrupt::requested() || rows.len() < pairs.len();
    let mut r = snapshot(
        (plan, *nice),
        privilege,
        caps,
        &[],
        khz,
        (partial, 1, std::time::Duration::ZERO),
        &[],
    );
    r.ab = rows;
    Ok(r)
}

/// One session's VMs in order: (backing, side, the indices of its cells in
/// `specs`). ABBA: the sides (link configurations, kernel trees) alternate
/// their order from session to session (AB BA, or ABC CBA), so a drift
/// hits every side alike.
fn session_steps(
    plan: &Plan,
    specs: &[CellSpec],
    session: u64,
) -> Vec<(Backing, usize, Vec<usize>)> {
    let mut out = Vec::new();
    for &backing in &plan.backings {
        let mut order: Vec<usize> = (0..plan.sides.len()).collect();
        if session % 2 == 1 {
            order.reverse();
        }
        for side in order {
            let idx: Vec<usize> = (0..specs.len())
                .filter(|&i| specs[i].backing == backing && specs[i].side == side)
                .collect();
            if !idx.is_empty() {
                out.push((backing, side, idx));
            }
        }
    }
    out
}

/// What a run knows so far besides its cells: the guest counter's
/// frequency, each VM's setup time and how many sessions it started.
#[derive(Clone, Default)]
struct Gathered {
    counter_khz: u64,
    setup: Vec<f64>,
    sessions: u64,
    /// Wall time of the sessions so far.
    elapsed: std::time::Duration,
}

/// The fixed inputs of a run: the plan (at the priority it got), the
/// patterns and seed, the privilege and the CPU.
struct RunCx<'a> {
    plan: &'a Plan,
    nice: i32,
    pats: Patterns,
    seed: u64,
    privilege: &'a PrivilegeChoice,
    caps: &'a CpuCaps,
}

impl RunCx<'_> {
    /// The result of `cells` and what `g` holds, `partial` or not.
    fn result(&self, cells: &[Cell], g: &Gathered, partial: bool) -> BenchResult {
        snapshot(
            (self.plan, self.nice),
            self.privilege,
            self.caps,
            cells,
            g.counter_khz,
            (partial, g.sessions, g.elapsed),
            &g.setup,
        )
    }

    /// Session `session`: one VM per backing and side in [`session_steps`]
    /// order, each running its cells. `Ok(false)` when a stop was
    /// requested (before a VM, or by SIGINT inside a cell).
    fn session(
        &self,
        (specs, session): (&[CellSpec], u64),
        (cells, g): (&mut [Cell], &mut Gathered),
        progress: &indicatif::ProgressBar,
        checkpoint: &mut dyn FnMut(&BenchResult) -> Result<()>,
    ) -> Result<bool> {
        let plan = self.plan;
        for (backing, side, idx) in session_steps(plan, specs, session) {
            let opts = plan.session_vm(
                (backing, side),
                self.privilege,
                self.seed.wrapping_add(session),
            )?;
            if crate::interrupt::requested() {
                return Ok(false);
            }
            let t = std::time::Instant::now();
            let mut vm = Vm::new(crate::vmm::open_kvm()?, &opts)?;
            g.setup.push(t.elapsed().as_secs_f64());
            g.counter_khz = vm.counter_khz;
            let cx = (plan, &self.pats, session);
            let known = g.clone();
            let mut after_cell = |cells: &[Cell]| checkpoint(&self.result(cells, &known, true));
            if !run_cells(&mut vm, &idx, specs, cx, cells, progress, &mut after_cell)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Run the whole plan: every session boots one VM per backing and link
/// configuration and runs its cells, guest then host. `seed` seeds the
/// patterns and (plus the session) each VM's load address. After every
/// finished cell of a session `checkpoint` gets the results so far (marked
/// partial), so a run killed outright still leaves what it finished.
pub fn run(
    plan: &Plan,
    specs: &[CellSpec],
    seed: u64,
    privilege: &PrivilegeChoice,
    caps: &CpuCaps,
    progress: &indicatif::ProgressBar,
    checkpoint: &mut dyn FnMut(&BenchResult) -> Result<()>,
) -> Result<BenchResult> {
    let copy_len = if plan.routine.kind() == Kind::Copy {
        plan.shape.size as usize
    } else {
        0
    };
    // The run's threads at --nice, and back afterwards (this thread goes
    // on to print and write).
    let _restore = RestoreNice(sched::nice());
    let (plan, nice) = &with_priority(plan);
    let cx = RunCx {
        plan,
        nice: *nice,
        pats: Patterns::new(seed, copy_len),
        seed,
        privilege,
        caps,
    };
    let mut cells: Vec<Cell> = specs
        .iter()
        .map(|s| Cell::new(s.axes.clone(), vec![], vec![]))
        .collect();
    let mut g = Gathered::default();
    let start = std::time::Instant::now();
    for session in 0..plan.max_sessions() {
        if session >= plan.sessions {
            progress.inc_length(specs.len() as u64);
        }
        g.sessions = session + 1;
        let finished = cx.session((specs, session), (&mut cells, &mut g), progress, checkpoint)?;
        g.elapsed = start.elapsed();
        if !finished {
            return Ok(cx.result(&cells, &g, true));
        }
        let so_far = || summarized(&cells, plan.repeats);
        let done = (g.sessions, g.elapsed);
        if precision::stop_after(done, plan.sessions, plan.precision, &so_far) {
            break;
        }
    }
    Ok(cx.result(&cells, &g, false))
}

/// The guest RAM of the plan's VMs (`mem`: `--mem`, at least what the
/// plan needs), once the host is found to hold the run, before any VM:
/// each guest region (the host baseline runs on the guest's pages).
pub fn check_memory(plan: &Plan, mem: Option<u64>) -> Result<u64> {
    let need = plan.mem_needed();
    let mem = mem.unwrap_or(need).max(need);
    for b in &plan.backings {
        crate::vmm::memory::precheck(mem, *b)?;
    }
    // Hugetlb comes from its pool, checked above.
    if plan.backings.iter().any(|b| *b != Backing::Hugetlb) {
        crate::vmm::memory::check_host_memory(need, "bench (guest regions)")?;
    }
    Ok(mem)
}
