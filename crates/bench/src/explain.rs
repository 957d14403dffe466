//! `bench --explain`: for every cell whose guest/host lies outside the
//! band (0.95-1.05), the cell again under variants that each change one
//! setting that can make guest and host differ — the backing page size,
//! the first-touch faults (`--prefault`), the cache precondition, the
//! guest privilege (x86: CPL0 is emulated on PVM) — with the base
//! settings measured again beside them, sessions interleaved (the order
//! reversed every other session), and which variant moves the ratio.
use crate::arch::{CpuCaps, Privilege};
use crate::error::{Error, Result};
pub use crate::model::{Effect, Explanation, Row, Settings, Variant};
use crate::plan::{CellSpec, Plan, Variants};
use crate::routines::privilege::PrivilegeChoice;
use crate::stats::PairedRatio;
use crate::vmm::memory::Backing;
use crate::{Cache, Cell, HugeShares};

impl Variant {
    /// "backing thp", "prefault on", "cache warm", "cpl kernel".
    pub fn label(self) -> String {
        match self {
            Variant::Backing(b) => format!("backing {b}"),
            Variant::Prefault(p) => format!("prefault {}", if p { "on" } else { "off" }),
            Variant::Cache(c) => format!("cache {}", cache_name(c)),
            Variant::Cpl(p) => format!("privilege {}", crate::arch::privilege_name(p)),
        }
    }
}

fn cache_name(c: Cache) -> &'static str {
    match c {
        Cache::Cold => "cold",
        Cache::Warm => "warm",
    }
}

impl Settings {
    /// These settings with `v` applied.
    pub fn with(self, v: Variant) -> Settings {
        match v {
            Variant::Backing(backing) => Settings { backing, ..self },
            Variant::Prefault(prefault) => Settings { prefault, ..self },
            Variant::Cache(cache) => Settings { cache, ..self },
            Variant::Cpl(privilege) => Settings { privilege, ..self },
        }
    }

    /// "anon, no prefault, cold cache, CPL3".
    pub fn label(self) -> String {
        format!(
            "{}, {}, {} cache, {}",
            self.backing,
            if self.prefault {
                "prefault"
            } else {
                "no prefault"
            },
            cache_name(self.cache),
            crate::arch::privilege_name(self.privilege)
        )
    }
}

/// The variants that isolate one cause each from `base`: every other
/// backing, the other prefault and cache settings, and (when `cpl`) the
/// other privilege.
pub fn variants(base: Settings, cpl: bool) -> Vec<Variant> {
    let mut out: Vec<Variant> = [Backing::Anon, Backing::Thp, Backing::Hugetlb]
        .into_iter()
        .filter(|b| *b != base.backing)
        .map(Variant::Backing)
        .collect();
    out.push(Variant::Prefault(!base.prefault));
    out.push(Variant::Cache(match base.cache {
        Cache::Cold => Cache::Warm,
        Cache::Warm => Cache::Cold,
    }));
    // The CPL variant is x86's (arm64's privilege is the DC ZVA side; EL2
    // has no user-level twin).
    let other = match base.privilege {
        Privilege::Kernel => Some(Privilege::User),
        Privilege::User => Some(Privilege::Kernel),
        Privilege::Hyp => None,
    };
    if let (true, Some(p)) = (cpl, other) {
        out.push(Variant::Cpl(p));
    }
    out
}

/// Which cells `--explain` measures again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum Scope {
    /// Those whose guest/host lies outside the band.
    #[default]
    Gaps,
    /// Every cell with a guest/host, in the band or not (what each
    /// setting does to a ratio that needs no explaining).
    All,
}

/// When a ratio needs explaining and when a variant explains it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExplainOptions {
    pub scope: Scope,
    /// guest/host inside `[lo, hi]` needs no explanation.
    pub band: (f64, f64),
    /// Smallest change of guest/host (fraction of the base) that counts
    /// as moving it, beside the intervals' separation.
    pub min_delta: f64,
}

impl Default for ExplainOptions {
    fn default() -> ExplainOptions {
        ExplainOptions {
            scope: Scope::Gaps,
            band: (0.95, 1.05),
            min_delta: 0.02,
        }
    }
}

impl ExplainOptions {
    /// Whether `ratio` lies outside the band (a gap to explain).
    pub fn is_gap(&self, ratio: f64) -> bool {
        ratio < self.band.0 || ratio > self.band.1
    }

    /// Whether a cell whose guest/host is `ratio` is measured again.
    pub fn wants(&self, ratio: f64) -> bool {
        self.scope == Scope::All || self.is_gap(ratio)
    }
}

impl Effect {
    pub fn text(self) -> &'static str {
        match self {
            Effect::MovesIt => "moves it",
            Effect::NoEffect => "no effect",
            Effect::CannotTell => "cannot tell",
            Effect::NotMeasured => "not measured",
        }
    }
}

/// The verdict on a variant's ratio `v` against the base's: it moves the
/// ratio when the two intervals are disjoint (each estimate outside the
/// other's interval is not enough: on a loaded host that held for
/// [0.50, 1.18] against [0.79, 1.78]) and the change is not negligible.
pub fn verdict(base: &PairedRatio, v: Option<&PairedRatio>, o: &ExplainOptions) -> Effect {
    let Some(v) = v else {
        return Effect::NotMeasured;
    };
    let (Some([blo, bhi]), Some([vlo, vhi])) = (base.interval, v.interval) else {
        return Effect::CannotTell;
    };
    let disjoint = vlo > bhi || vhi < blo;
    if disjoint && (v.estimate / base.estimate - 1.0).abs() >= o.min_delta {
        Effect::MovesIt
    } else {
        Effect::NoEffect
    }
}

/// Mean of the `pf_*` KVM counters over the used guest runs of `c`.
fn faults_per_run(c: &Cell) -> Option<f64> {
    let used = c.guest_used();
    let per: Vec<f64> = used
        .iter()
        .filter(|s| s.kvm_stats.keys().any(|k| k.starts_with("pf_")))
        .map(|s| {
            s.kvm_stats
                .iter()
                .filter(|(k, _)| k.starts_with("pf_"))
                .map(|(_, v)| *v as f64)
                .sum()
        })
        .collect();
    (!per.is_empty()).then(|| crate::stats::mean(&per))
}

/// One setting measured: the variant (`None`: the base), its settings and
/// its cell, or why it could not run.
pub type Measured = (Option<Variant>, Settings, std::result::Result<Cell, String>);

/// The rows of an explanation from the cells measured under each
/// setting (`cells[0]` the base): ratios, deltas and verdicts.
pub fn rows(measured: Vec<Measured>, o: &ExplainOptions) -> Vec<Row> {
    let ratio =
        |c: &std::result::Result<Cell, String>| c.as_ref().ok().and_then(Cell::paired_ratio);
    let base = measured.first().and_then(|(_, _, c)| ratio(c));
    measured
        .into_iter()
        .map(|(variant, settings, cell)| {
            let r = ratio(&cell);
            let delta_pct = match (&base, &r) {
                (Some(b), Some(r)) if variant.is_some() => {
                    Some((r.estimate / b.estimate - 1.0) * 100.0)
                }
                _ => None,
            };
            let verdict = match (&base, variant) {
                (Some(b), Some(_)) => verdict(b, r.as_ref(), o),
                (None, Some(_)) => Effect::NotMeasured,
                (_, None) if r.is_none() => Effect::NotMeasured,
                (_, None) => Effect::NoEffect,
            };
            Row {
                variant,
                settings,
                kvm_faults_per_run: cell.as_ref().ok().and_then(faults_per_run),
                huge_share: cell.as_ref().map(HugeShares::of).unwrap_or_default(),
                note: cell.as_ref().err().cloned(),
                guest_host: r,
                delta_pct,
                verdict,
            }
        })
        .collect()
}

/// What the measuring needs beside the plan.
pub struct ExplainRun<'a> {
    pub plan: &'a Plan,
    pub seed: u64,
    /// The privilege the bench ran at, and the other one (x86 `--cpl`
    /// variant; `None`: no such variant).
    pub privilege: &'a PrivilegeChoice,
    pub other_privilege: Option<&'a PrivilegeChoice>,
    pub caps: &'a CpuCaps,
    pub opts: ExplainOptions,
}

impl ExplainRun<'_> {
    /// The settings cell `spec` ran with in the bench.
    fn base(&self, spec: &CellSpec) -> Settings {
        Settings {
            backing: spec.backing,
            prefault: self.plan.prefault,
            cache: self.plan.cache,
            privilege: self.plan.sides[spec.side].privilege(self.privilege.privilege),
        }
    }

    /// A one-session plan of cell `spec` alone, under `s`.
    fn plan_for(&self, spec: &CellSpec, s: Settings) -> Plan {
        let mut side = self.plan.sides[spec.side].clone();
        side.dc_zva = None;
        Plan {
            chunks: vec![spec.axes.chunk],
            variants: Variants::Named(vec![spec.variant.name.to_string()]),
            orders: vec![spec.axes.order],
            fills: vec![spec.axes.fill],
            backings: vec![s.backing],
            sides: vec![side],
            sessions: 1,
            precision: None,
            cache: s.cache,
            prefault: s.prefault,
            host_baseline: true,
            ..self.plan.clone()
        }
    }

    /// One session of cell `spec` under `s`, its samples relabelled as
    /// session `session`; `Err` says why it cannot run here.
    fn session(
        &self,
        spec: &CellSpec,
        s: Settings,
        session: u64,
    ) -> Result<std::result::Result<Cell, String>> {
        let plan = self.plan_for(spec, s);
        let need = plan.mem_needed();
        if let Err(e) = crate::vmm::memory::precheck(2 * need, s.backing) {
            return Ok(Err(e.to_string()));
        }
        let privilege = match s.privilege == self.privilege.privilege {
            true => self.privilege,
            false => match self.other_privilege {
                Some(p) => p,
                None => return Ok(Err("no other privilege here".into())),
            },
        };
        let (specs, _) = plan.expand(self.caps)?;
        let seed = self.seed.wrapping_add(session);
        let hidden = indicatif::ProgressBar::hidden();
        let r = match crate::run(
            &plan,
            &specs,
            seed,
            privilege,
            self.caps,
            &hidden,
            &mut |_| Ok(()),
        ) {
            Ok(r) => r,
            Err(e @ crate::error::Error::Vmm(crate::error::VmmError::Interrupted)) => {
                return Err(e);
            }
            // A variant that fails here (CPL0 on PVM: rep stos emulated
            // past the watchdog) is a finding, not the end of the others.
            Err(e) => return Ok(Err(first_line(&e.to_string()))),
        };
        let mut cell =
            r.cells.into_iter().next().ok_or_else(|| {
                crate::error::Error::internal("explain: a one-cell plan ran no cell")
            })?;
        for x in cell.guest.iter_mut().chain(cell.host.iter_mut()) {
            x.session = session;
        }
        for h in &mut cell.huge_share {
            h.session = session;
        }
        Ok(Ok(cell))
    }

    /// Cell `spec` under the base settings and each variant, sessions
    /// interleaved (order reversed every other session, as bench's sides).
    pub fn measure(&self, spec: &CellSpec, cpl: bool) -> Result<Vec<Measured>> {
        let base = self.base(spec);
        let mut all: Vec<Measured> = std::iter::once(None)
            .chain(variants(base, cpl).into_iter().map(Some))
            .map(|v| {
                let s = v.map_or(base, |v| base.with(v));
                (v, s, Ok(Cell::new(spec.axes.clone(), vec![], vec![])))
            })
            .collect();
        for session in 0..self.plan.sessions {
            let mut order: Vec<usize> = (0..all.len()).collect();
            if session % 2 == 1 {
                order.reverse();
            }
            for i in order {
                if crate::interrupt::requested() {
                    return Err(crate::error::VmmError::Interrupted.into());
                }
                let (_, s, acc) = &mut all[i];
                let Ok(cell) = acc else { continue };
                match self.session(spec, *s, session)? {
                    Ok(c) => {
                        cell.guest.extend(c.guest);
                        cell.host.extend(c.host);
                        cell.huge_share.extend(c.huge_share);
                    }
                    Err(why) => *acc = Err(why),
                }
            }
        }
        // The sample rule of the bench itself: a variant short of its
        // undisturbed runs has no ratio to compare.
        for (_, _, acc) in &mut all {
            if let Ok(cell) = acc {
                crate::summarize(cell, self.plan.repeats);
                if !cell.state.is_measured() {
                    *acc = Err(cell.state.text());
                }
            }
        }
        Ok(all)
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}

/// The explanation of cell `cell` (spec `spec`), measured by `run`.
pub fn explain_cell(
    run: &ExplainRun,
    spec: &CellSpec,
    cell: &Cell,
    side: &str,
    cpl: bool,
) -> Result<Option<Explanation>> {
    let Some(bench) = cell.guest_host.clone().filter(|_| cell.state.is_measured()) else {
        return Ok(None);
    };
    if !run.opts.wants(bench.estimate) {
        return Ok(None);
    }
    let rows = rows(run.measure(spec, cpl)?, &run.opts);
    Ok(Some(Explanation {
        cell: cell.axes.label(),
        side: side.to_string(),
        bench_guest_host: bench,
        moved_by: rows
            .iter()
            .filter(|r| r.verdict == Effect::MovesIt)
            .filter_map(|r| r.variant.map(Variant::label))
            .collect(),
        rows,
    }))
}

/// Whether the guest privilege is a cause `--explain` tests: where DC
/// ZVA exists (arm64) the privilege is the DC ZVA side of its own;
/// elsewhere (x86, where PVM emulates CPL0) it is a cause to test.
pub fn privilege_is_a_cause() -> bool {
    crate::arch::dc_zva_privilege(crate::arch::DcZva::On).is_none()
}

/// The other privilege the cells are measured under when the privilege
/// is a cause to test (see [`privilege_is_a_cause`]), chosen as `--cpl`
/// would choose it; `None`: nothing to measure.
pub fn other_privilege(p: Privilege) -> Result<Option<PrivilegeChoice>> {
    use crate::routines::privilege::{self, CplChoice, ElChoice, Request};
    let cpl = match (privilege_is_a_cause(), p) {
        (false, _) => None,
        (true, Privilege::User) => Some(CplChoice::Kernel),
        (true, Privilege::Kernel) => Some(CplChoice::User),
        (true, Privilege::Hyp) => None,
    };
    cpl.map(|cpl| {
        privilege::choose(Request {
            cpl,
            el: ElChoice::Auto,
        })
    })
    .transpose()
    .map_err(Error::from)
}

/// Every cell of `cells` (the results of `specs`) with a guest/host gap
/// explained ([`explain_cell`]); `each` gets every explanation as it is
/// made, so what was explained so far is out when a later cell fails.
pub fn explain_all(
    run: &ExplainRun,
    specs: &[CellSpec],
    cells: &[Cell],
    each: &mut dyn FnMut(&Explanation),
) -> Result<Vec<Explanation>> {
    let cpl = privilege_is_a_cause();
    let mut found = Vec::new();
    for (spec, cell) in specs.iter().zip(cells) {
        let side = run.plan.sides[spec.side].name();
        if let Some(e) = explain_cell(run, spec, cell, &side, cpl)? {
            each(&e);
            found.push(e);
        }
    }
    Ok(found)
}

/// The line when no cell of `cells` has a gap to explain.
pub fn nothing_to_explain(cells: &[Cell], o: &ExplainOptions) -> String {
    let (lo, hi) = o.band;
    let unpaired = cells
        .iter()
        .filter(|c| c.guest_host.is_none() || !c.state.is_measured())
        .count();
    format!(
        "explain: nothing to explain: {} cell(s) with guest/host within {lo:.2}-{hi:.2}, {unpaired} \
         without a guest/host (no host baseline, or unmeasurable under load: see flags)",
        cells.len() - unpaired
    )
}

/// The text of one explanation: a heading, the table, the conclusion.
pub fn lines(e: &Explanation, o: &ExplainOptions) -> Vec<String> {
    use comfy_table::{Table, presets};
    let mut t = Table::new();
    t.load_style(presets::UTF8_FULL_CONDENSED);
    t.set_header(vec![
        "variant",
        "settings",
        "guest/host [95% CI]",
        "delta vs base",
        "KVM faults/run",
        "huge pages g/h",
        "verdict",
    ]);
    for r in &e.rows {
        t.add_row(vec![
            r.variant.map_or("base (again)".into(), Variant::label),
            r.settings.label(),
            r.guest_host.as_ref().map_or("-".into(), PairedRatio::text),
            r.delta_pct.map_or("-".into(), crate::units::format_pct),
            r.kvm_faults_per_run
                .map_or("-".into(), |f| format!("{f:.0}")),
            r.huge_share.text(),
            match r.variant {
                None => "-".into(),
                Some(_) => r.verdict.text().to_string(),
            },
        ]);
    }
    let (lo, hi) = o.band;
    let place = match o.is_gap(e.bench_guest_host.estimate) {
        true => "outside",
        false => "inside (--explain=all)",
    };
    let mut out = vec![format!(
        "explain {} [{}]: guest/host {} is {place} {lo:.2}-{hi:.2}; the cell again with one \
         setting changed, the base beside it, sessions interleaved:",
        e.cell,
        e.side,
        e.bench_guest_host.text(),
    )];
    out.extend(t.to_string().lines().map(String::from));
    for r in &e.rows {
        if let Some(n) = &r.note {
            let what = r.variant.map_or("base (again)".into(), Variant::label);
            out.push(format!("  {what}: not measured: {n}"));
        }
    }
    out.push(match e.moved_by.as_slice() {
        [] => "  no single variant moves it (each within the other's interval, or < 2%)".into(),
        v => format!("  moved by: {}", v.join(", ")),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::SessionRatio;

    fn base() -> Settings {
        Settings {
            backing: Backing::Anon,
            prefault: false,
            cache: Cache::Cold,
            privilege: Privilege::User,
        }
    }

    #[test]
    fn variants_change_one_setting_each() {
        let v = variants(base(), true);
        assert_eq!(
            v,
            [
                Variant::Backing(Backing::Thp),
                Variant::Backing(Backing::Hugetlb),
                Variant::Prefault(true),
                Variant::Cache(Cache::Warm),
                Variant::Cpl(Privilege::Kernel),
            ]
        );
        for x in &v {
            let s = base().with(*x);
            let changed = [
                s.backing != base().backing,
                s.prefault != base().prefault,
                s.cache != base().cache,
                s.privilege != base().privilege,
            ];
            assert_eq!(changed.iter().filter(|c| **c).count(), 1, "{x:?}");
        }
        // Without the privilege variant (arm64: EL0 is the DC ZVA side).
        let thp = Settings {
            backing: Backing::Thp,
            ..base()
        };
        let v = variants(thp, false);
        assert!(v.contains(&Variant::Backing(Backing::Anon)));
        assert!(!v.contains(&Variant::Backing(Backing::Thp)));
        assert!(!v.iter().any(|x| matches!(x, Variant::Cpl(_))));
    }

    fn ratio(r: &[f64]) -> PairedRatio {
        let s: Vec<SessionRatio> = r
            .iter()
            .enumerate()
            .map(|(i, x)| SessionRatio {
                session: i as u64,
                guest: *x,
                host: 1.0,
                ratio: *x,
            })
            .collect();
        PairedRatio::of(&s, 0.05).unwrap()
    }

    #[test]
    fn the_verdict_needs_separate_intervals_and_a_real_change() {
        let o = ExplainOptions::default();
        let anon = ratio(&[0.78, 0.80, 0.79, 0.81]);
        // thp vs anon on this host: 0.97 against 0.80.
        let thp = ratio(&[0.96, 0.98, 0.97, 0.97]);
        assert_eq!(verdict(&anon, Some(&thp), &o), Effect::MovesIt);
        // Overlapping intervals: no effect.
        let same = ratio(&[0.79, 0.80, 0.81, 0.78]);
        assert_eq!(verdict(&anon, Some(&same), &o), Effect::NoEffect);
        // Separate but below the 2% minimum.
        let tight = ratio(&[0.800, 0.8001, 0.8002, 0.8001]);
        let tight2 = ratio(&[0.810, 0.8101, 0.8102, 0.8101]);
        assert_eq!(verdict(&tight, Some(&tight2), &o), Effect::NoEffect);
        assert_eq!(verdict(&anon, None, &o), Effect::NotMeasured);
        // Each estimate outside the other's interval, the intervals
        // overlapping (seen on a loaded host): no effect.
        let wide = ratio(&[0.74, 0.80, 0.77, 0.83]);
        let wider = ratio(&[0.86, 0.92, 0.89, 0.95]);
        assert!(!wide.contains(wider.estimate) && !wider.contains(wide.estimate));
        assert_eq!(verdict(&wide, Some(&wider), &o), Effect::NoEffect);
        // One session: no interval, no verdict either way.
        assert_eq!(
            verdict(&anon, Some(&ratio(&[0.97])), &o),
            Effect::CannotTell
        );
        assert!(o.is_gap(0.80) && o.is_gap(1.30) && !o.is_gap(0.97));
    }
}
