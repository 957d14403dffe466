//! Session-level comparison of two sides of one cell.
//!
//! Every session becomes one number, `ln(mean of its runs)`; the change of B
//! against A is the difference of the mean log session means, shown as
//! `exp(Δ) − 1` in percent with a `1 − alpha` confidence interval.
//!
//! Tests (see [`Method`]): the default for interleaved (ABAB) sessions is
//! the paired t-test on the per-pair log ratios `ln(B_i) − ln(A_i)`; for
//! separate sessions Welch's t-test on the log session means. Both hold
//! their false-positive rate in the simulations of `bench::inference::sim` (a
//! session effect and a warm-up trend); the run-level test of
//! `stats::classify` does not (it treats runs as independent). The exact
//! permutation test and the hierarchical bootstrap are available; the
//! bootstrap is anti-conservative with few sessions.
//!
//! Sessions of one invocation share that invocation's machine state, so two
//! separate invocations differ by more than their sessions show (a third
//! level): set [`Config::invocation_var`] (estimated by
//! `components::invocation_component`) or interleave the sides. Pairs of
//! an interleaved invocation share it and need no correction.
//!
//! Verdict (see [`Verdict`]): `(=)` when the interval lies inside
//! ±margin; otherwise `(R)`/`(I)` when the Benjamini–Hochberg q value across
//! the rows is below alpha and the interval excludes 0; otherwise nothing.
use super::{Error, Session, log_session_means, mean, pct, variance};
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};
use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// How the sessions of the two sides relate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Design {
    /// Separate invocations (or any sessions not paired in time).
    Independent,
    /// One invocation interleaving the sides: session i of A and session i
    /// of B ran next to each other (ABAB or, better, ABBA).
    Interleaved,
}

/// The test behind a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Method {
    /// Paired t-test on per-pair log ratios (df = pairs − 1).
    PairedT,
    /// Welch's t-test on log session means.
    WelchSessions,
    /// Exact (or Monte Carlo) permutation test on log session means:
    /// relabelling sessions (independent) or flipping pair signs
    /// (interleaved); interval by test inversion.
    Permutation,
    /// Hierarchical bootstrap: resample sessions, then runs within them;
    /// percentile interval. Anti-conservative with few sessions.
    HierarchicalBootstrap,
}

impl Method {
    /// Name printed next to the results ("which test ran").
    pub fn name(self) -> &'static str {
        match self {
            Method::PairedT => "paired t on per-session-pair log ratios",
            Method::WelchSessions => "Welch t on log session means",
            Method::Permutation => "permutation test on log session means",
            Method::HierarchicalBootstrap => "hierarchical bootstrap (sessions, runs)",
        }
    }

    /// The method that holds its false-positive rate for a design.
    pub fn default_for(design: Design) -> Method {
        match design {
            Design::Interleaved => Method::PairedT,
            Design::Independent => Method::WelchSessions,
        }
    }
}

/// Parameters of a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Config {
    /// Significance level (and 1 − confidence of the interval).
    pub alpha: f64,
    /// Equivalence margin as a fraction (0.02 = ±2%).
    pub margin: f64,
    pub design: Design,
    /// `None`: [`Method::default_for`] the design.
    pub method: Option<Method>,
    /// Power the minimal detectable effect is computed for.
    pub power: f64,
    /// Seed of the resampling methods.
    pub seed: u64,
    /// Resamples of the bootstrap / Monte Carlo permutation test.
    pub resamples: usize,
    /// Third level for separate invocations: the variance of a side's mean
    /// log throughput between invocations (machine drift between runs of
    /// the binary), added to both sides of a Welch comparison of
    /// `Design::Independent` sessions. 0 pretends invocations do not
    /// drift; estimate it with `components::invocation_component` from
    /// repeated identical invocations. Ignored by the paired test (pairs
    /// share the invocation) and by the resampling methods.
    pub invocation_var: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            alpha: 0.05,
            margin: 0.02,
            design: Design::Interleaved,
            method: None,
            power: 0.8,
            seed: 0x6879_7063,
            resamples: 2000,
            invocation_var: 0.0,
        }
    }
}

impl Config {
    fn validate(&self) -> Result<(), Error> {
        let ok = self.alpha > 0.0
            && self.alpha < 0.5
            && self.margin >= 0.0
            && self.margin < 1.0
            && self.power > 0.0
            && self.power < 1.0
            && self.resamples >= 100
            && self.invocation_var >= 0.0
            && self.invocation_var.is_finite();
        if ok {
            Ok(())
        } else {
            Err(Error::Parameter(format!(
                "comparison parameters out of range: alpha {} (0..0.5), margin {} (0..1), \
                 power {} (0..1), resamples {} (>= 100), invocation variance {} (>= 0)",
                self.alpha, self.margin, self.power, self.resamples, self.invocation_var
            )))
        }
    }
}

/// The outcome for one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Verdict {
    /// The interval lies inside ±margin: shown equivalent, `(=)`.
    Equivalent,
    /// B is slower, shown after FDR control, `(R)`.
    Regression,
    /// B is faster, shown after FDR control, `(I)`.
    Improvement,
    /// The data cannot tell: no mark.
    Inconclusive,
}

impl Verdict {
    pub fn mark(self) -> &'static str {
        match self {
            Verdict::Equivalent => "(=)",
            Verdict::Regression => "(R)",
            Verdict::Improvement => "(I)",
            Verdict::Inconclusive => "",
        }
    }

    /// The verdict for an interval (percent), a q value and a margin
    /// (fraction). Equivalence wins over a significant but smaller-than-
    /// margin change: the mark answers "does it matter", `significant`
    /// in [`Comparison`] says whether it is distinguishable from 0.
    pub fn decide(ci_pct: (f64, f64), q: f64, alpha: f64, margin: f64) -> Verdict {
        let m = margin * 100.0;
        let (lo, hi) = ci_pct;
        if lo > -m && hi < m {
            Verdict::Equivalent
        } else if q < alpha && lo > 0.0 {
            Verdict::Improvement
        } else if q < alpha && hi < 0.0 {
            Verdict::Regression
        } else {
            Verdict::Inconclusive
        }
    }
}

/// One row's comparison of side B against side A.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Comparison {
    pub method: Method,
    /// Sessions (or pairs) used on each side.
    pub sessions: (usize, usize),
    /// Estimated change of B against A, percent (`exp(Δ) − 1`).
    pub change_pct: f64,
    /// `1 − alpha` confidence interval of the change, percent.
    pub ci_pct: (f64, f64),
    /// Two-sided p-value of "no change".
    pub p: f64,
    /// Benjamini–Hochberg q value across the rows ([`decide_rows`]); the
    /// p-value itself for a single comparison.
    pub q: f64,
    /// Smallest change (percent, ±) this design detects with the
    /// configured power at alpha; NaN when it cannot be estimated.
    pub mde_pct: f64,
    /// q < alpha and the interval excludes 0.
    pub significant: bool,
    pub verdict: Verdict,
}

impl Comparison {
    /// `"+0.40% [-1.20%, +2.00%]"`.
    pub fn change_text(&self) -> String {
        use crate::units::format_pct;
        format!(
            "{} [{}, {}]",
            format_pct(self.change_pct),
            format_pct(self.ci_pct.0),
            format_pct(self.ci_pct.1)
        )
    }

    /// `"-3.10% [-4.00%, -2.20%] (R)"`: the change, its interval and the
    /// mark (nothing for an inconclusive row).
    pub fn cell_text(&self) -> String {
        format!("{} {}", self.change_text(), self.verdict.mark())
            .trim_end()
            .to_string()
    }

    fn finish(&mut self, alpha: f64, margin: f64) {
        let (lo, hi) = self.ci_pct;
        self.significant = self.q < alpha && (lo > 0.0 || hi < 0.0);
        self.verdict = Verdict::decide(self.ci_pct, self.q, alpha, margin);
    }
}

/// Student's t quantile; `None` for a degenerate df.
fn t_quantile(p: f64, df: f64) -> Option<f64> {
    if !(df > 0.0 && df.is_finite()) {
        return None;
    }
    StudentsT::new(0.0, 1.0, df).ok().map(|t| t.inverse_cdf(p))
}

/// Two-sided t p-value and interval of a difference with standard error
/// `se` and `df`.
fn t_result(diff: f64, se: f64, df: f64, alpha: f64) -> Option<(f64, (f64, f64))> {
    if se == 0.0 {
        let p = if diff == 0.0 { 1.0 } else { 0.0 };
        return Some((p, (diff, diff)));
    }
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    let t = diff / se;
    let p = (2.0 * dist.sf(t.abs())).clamp(0.0, 1.0);
    let h = dist.inverse_cdf(1.0 - alpha / 2.0) * se;
    Some((p, (diff - h, diff + h)))
}

/// Smallest change (percent) detectable with `power` at two-sided `alpha`:
/// `(t_{1−α/2} + t_{power}) · se`, with `se = sd·√(2/n)`, df = 2n − 2 for
/// independent sessions (`sd` = SD of a log session mean, `n` per side) and
/// `se = sd/√n`, df = n − 1 for pairs (`sd` = SD of a pair's log ratio).
/// `None` for fewer than 2 sessions or a non-finite `sd`.
pub fn min_detectable_effect(
    sd: f64,
    n: usize,
    design: Design,
    alpha: f64,
    power: f64,
) -> Option<f64> {
    if n < 2 || !sd.is_finite() || sd < 0.0 {
        return None;
    }
    let nf = n as f64;
    let (se, df) = match design {
        Design::Independent => (sd * (2.0 / nf).sqrt(), 2.0 * nf - 2.0),
        Design::Interleaved => (sd / nf.sqrt(), nf - 1.0),
    };
    let k = t_quantile(1.0 - alpha / 2.0, df)? + t_quantile(power, df)?;
    Some(pct(k * se))
}

// Over 80 lines: one statistical procedure (align pairs, per-design
// estimate, interval, MDE, verdict) whose steps share the design's
// intermediate values; the helpers above hold the formulas.
/// Compare side `b` against side `a` (throughput, higher is better).
///
/// Needs at least 2 sessions per side (2 pairs when interleaved). Every run
/// must be positive and finite (drop disturbed runs before, not NaNs).
pub fn compare(a: &[Session], b: &[Session], cfg: &Config) -> Result<Comparison, Error> {
    cfg.validate()?;
    let paired = cfg.design == Design::Interleaved;
    if paired && a.len() != b.len() {
        return Err(Error::Unpaired {
            a: a.len(),
            b: b.len(),
        });
    }
    // Pairs stay aligned: a pair is dropped when either session has no
    // runs left (e.g. all disturbed); unpaired sides drop empty sessions.
    let (a, b): (Vec<Session>, Vec<Session>) = if paired {
        a.iter()
            .zip(b)
            .filter(|(x, y)| !x.runs.is_empty() && !y.runs.is_empty())
            .map(|(x, y)| (x.clone(), y.clone()))
            .unzip()
    } else {
        (a.to_vec(), b.to_vec())
    };
    let (a, b) = (&a[..], &b[..]);
    let la = log_session_means("A", a)?;
    let lb = log_session_means("B", b)?;
    for (side, l) in [("A", &la), ("B", &lb)] {
        if l.len() < 2 {
            return Err(Error::TooFewSessions {
                side,
                have: l.len(),
                need: 2,
            });
        }
    }
    let method = cfg.method.unwrap_or(Method::default_for(cfg.design));
    let d: Vec<f64> = la.iter().zip(&lb).map(|(x, y)| y - x).collect();
    let diff = if paired {
        mean(&d)
    } else {
        mean(&lb) - mean(&la)
    };
    let (va, vb) = (variance(&la), variance(&lb));
    let (na, nb) = (la.len() as f64, lb.len() as f64);
    let inv = if paired { 0.0 } else { cfg.invocation_var };
    // MDE: SD of the unit the design tests (the invocation variance folded
    // in so that 2·sd²/n = 2·σ²/n + 2·inv).
    let (sd, n) = if paired {
        (variance(&d).sqrt(), d.len())
    } else {
        let n = la.len().min(lb.len());
        (((va + vb) / 2.0 + n as f64 * inv).sqrt(), n)
    };
    let mde = min_detectable_effect(sd, n, cfg.design, cfg.alpha, cfg.power);
    let degenerate =
        || Error::Parameter("the t distribution is undefined for these samples (df <= 0)".into());
    let (p, ci) = match method {
        Method::PairedT => {
            if !paired {
                return Err(Error::Parameter(
                    "the paired t-test needs interleaved sessions (Design::Interleaved)".into(),
                ));
            }
            let se = (variance(&d) / na).sqrt();
            t_result(diff, se, na - 1.0, cfg.alpha).ok_or_else(degenerate)?
        }
        Method::WelchSessions => {
            let (sa, sb) = (va / na, vb / nb);
            // The invocation term is a known variance: no degrees of
            // freedom of its own in Welch–Satterthwaite.
            let se2 = sa + sb + 2.0 * inv;
            let df = if sa + sb > 0.0 {
                let (ra, rb) = (sa / se2, sb / se2);
                1.0 / (ra * ra / (na - 1.0) + rb * rb / (nb - 1.0))
            } else {
                na + nb - 2.0
            };
            t_result(diff, se2.sqrt(), df, cfg.alpha).ok_or_else(degenerate)?
        }
        Method::Permutation => permutation(&la, &lb, paired, diff, cfg),
        Method::HierarchicalBootstrap => bootstrap(a, b, paired, cfg),
    };
    let mut c = Comparison {
        method,
        sessions: (la.len(), lb.len()),
        change_pct: pct(diff),
        ci_pct: (pct(ci.0), pct(ci.1)),
        p,
        q: p,
        mde_pct: mde.unwrap_or(f64::NAN),
        significant: false,
        verdict: Verdict::Inconclusive,
    };
    c.finish(cfg.alpha, cfg.margin);
    Ok(c)
}

/// Uniform index below `n` (multiply-shift; bias < n / 2^64).
fn index(rng: &mut ChaCha8Rng, n: usize) -> usize {
    ((rng.next_u64() as u128 * n as u128) >> 64) as usize
}

/// The permutation distribution of the statistic, shifted by `delta`
/// (B − delta against A): every relabelling / sign flip when there are at
/// most `cfg.resamples` of them, else `cfg.resamples` random ones (seeded).
fn perm_p(la: &[f64], lb: &[f64], paired: bool, delta: f64, cfg: &Config) -> f64 {
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let eps = 1e-12;
    if paired {
        let d: Vec<f64> = la.iter().zip(lb).map(|(x, y)| y - x - delta).collect();
        let obs = mean(&d).abs();
        let n = d.len();
        let exact = n < 63 && (1usize << n) <= cfg.resamples;
        let total = if exact { 1usize << n } else { cfg.resamples };
        let mut hits = 0usize;
        for i in 0..total {
            let mask = if exact { i as u64 } else { rng.next_u64() };
            let s: f64 = d
                .iter()
                .enumerate()
                .map(|(j, v)| if mask >> (j % 64) & 1 == 1 { -v } else { *v })
                .sum();
            if (s / n as f64).abs() >= obs - eps {
                hits += 1;
            }
        }
        // Monte Carlo: count the observed labelling too (Phipson & Smyth).
        if exact {
            hits as f64 / total as f64
        } else {
            (hits + 1) as f64 / (total + 1) as f64
        }
    } else {
        let pooled: Vec<f64> = la
            .iter()
            .copied()
            .chain(lb.iter().map(|v| v - delta))
            .collect();
        let (na, n) = (la.len(), pooled.len());
        let sum: f64 = pooled.iter().sum();
        let stat = |sa: f64| ((sum - sa) / (n - na) as f64 - sa / na as f64).abs();
        let obs = stat(la.iter().sum());
        let combos = binomial(n, na);
        let mut hits = 0usize;
        if combos <= cfg.resamples as f64 {
            // Enumerate every subset of size na (Gosper's hack) for n < 64.
            let mut total = 0usize;
            let mut m: u64 = (1u64 << na) - 1;
            while m < (1u64 << n) {
                let sa: f64 = (0..n).filter(|j| m >> j & 1 == 1).map(|j| pooled[j]).sum();
                if stat(sa) >= obs - eps {
                    hits += 1;
                }
                total += 1;
                let c = m & m.wrapping_neg();
                let r = m + c;
                m = (((r ^ m) >> 2) / c) | r;
            }
            hits as f64 / total as f64
        } else {
            let mut idx: Vec<usize> = (0..n).collect();
            for _ in 0..cfg.resamples {
                // Partial Fisher–Yates: the first na are side A.
                for i in 0..na {
                    let j = i + index(&mut rng, n - i);
                    idx.swap(i, j);
                }
                let sa: f64 = idx[..na].iter().map(|&j| pooled[j]).sum();
                if stat(sa) >= obs - eps {
                    hits += 1;
                }
            }
            (hits + 1) as f64 / (cfg.resamples + 1) as f64
        }
    }
}

fn binomial(n: usize, k: usize) -> f64 {
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

/// Permutation p-value and the interval by test inversion: the shifts
/// `delta` whose p-value is at least alpha (bisection from the estimate).
fn permutation(la: &[f64], lb: &[f64], paired: bool, diff: f64, cfg: &Config) -> (f64, (f64, f64)) {
    let p = perm_p(la, lb, paired, 0.0, cfg);
    // A generous bracket: the estimate ± 20 Welch standard errors (plus a
    // floor so identical data still bracket).
    let se = (variance(la) / la.len() as f64 + variance(lb) / lb.len() as f64)
        .sqrt()
        .max(1e-9);
    let accepted = |delta: f64| perm_p(la, lb, paired, delta, cfg) >= cfg.alpha;
    let edge = |far: f64| {
        // `diff` is accepted (p = 1 at the estimate), `far` is not unless
        // the test can never reject (too few sessions): then the bracket.
        if accepted(far) {
            return far;
        }
        let (mut inside, mut outside) = (diff, far);
        for _ in 0..40 {
            let mid = (inside + outside) / 2.0;
            if accepted(mid) {
                inside = mid;
            } else {
                outside = mid;
            }
        }
        inside
    };
    (p, (edge(diff - 20.0 * se), edge(diff + 20.0 * se)))
}

/// Hierarchical bootstrap: resample sessions (or pairs) with replacement,
/// then runs within each drawn session; the statistic is the difference of
/// mean log session means. Percentile interval; p = twice the smaller tail
/// beyond 0, counting the observed value (so never 0).
fn bootstrap(a: &[Session], b: &[Session], paired: bool, cfg: &Config) -> (f64, (f64, f64)) {
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let a: Vec<&Session> = a.iter().filter(|s| !s.runs.is_empty()).collect();
    let b: Vec<&Session> = b.iter().filter(|s| !s.runs.is_empty()).collect();
    let draw_session = |rng: &mut ChaCha8Rng, s: &Session| -> f64 {
        let n = s.runs.len();
        let sum: f64 = (0..n).map(|_| s.runs[index(rng, n)]).sum();
        (sum / n as f64).ln()
    };
    let mut stats = Vec::with_capacity(cfg.resamples);
    for _ in 0..cfg.resamples {
        let stat = if paired {
            let n = a.len();
            let mut acc = 0.0;
            for _ in 0..n {
                let i = index(&mut rng, n);
                acc += draw_session(&mut rng, b[i]) - draw_session(&mut rng, a[i]);
            }
            acc / n as f64
        } else {
            let side = |rng: &mut ChaCha8Rng, s: &[&Session]| {
                let n = s.len();
                (0..n)
                    .map(|_| {
                        let i = index(rng, n);
                        draw_session(rng, s[i])
                    })
                    .sum::<f64>()
                    / n as f64
            };
            side(&mut rng, &b) - side(&mut rng, &a)
        };
        stats.push(stat);
    }
    stats.sort_by(f64::total_cmp);
    let q = |f: f64| {
        let i = (f * (stats.len() - 1) as f64).round() as usize;
        stats[i.min(stats.len() - 1)]
    };
    let below = stats.iter().filter(|v| **v <= 0.0).count();
    let above = stats.iter().filter(|v| **v >= 0.0).count();
    let p = (2.0 * (below.min(above) + 1) as f64 / (stats.len() + 1) as f64).min(1.0);
    (p, (q(cfg.alpha / 2.0), q(1.0 - cfg.alpha / 2.0)))
}

/// Benjamini–Hochberg q values (step-up adjusted p-values) in input order.
/// NaN p-values stay NaN and do not count towards the number of tests.
pub fn benjamini_hochberg(p: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..p.len()).filter(|&i| !p[i].is_nan()).collect();
    order.sort_by(|&i, &j| p[i].total_cmp(&p[j]));
    let m = order.len() as f64;
    let mut q = vec![f64::NAN; p.len()];
    let mut running = 1.0f64;
    for (rank, &i) in order.iter().enumerate().rev() {
        running = running.min(p[i] * m / (rank + 1) as f64);
        q[i] = running.clamp(0.0, 1.0);
    }
    q
}

/// Final verdicts for the rows of one compare: q values by
/// Benjamini–Hochberg over the rows' p-values, then [`Verdict::decide`].
pub fn decide_rows(rows: &mut [Comparison], alpha: f64, margin: f64) {
    let q = benjamini_hochberg(&rows.iter().map(|r| r.p).collect::<Vec<_>>());
    for (r, q) in rows.iter_mut().zip(q) {
        r.q = q;
        r.finish(alpha, margin);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sessions(means: &[f64]) -> Vec<Session> {
        means.iter().map(|m| Session::new(vec![*m, *m])).collect()
    }

    #[test]
    fn welch_on_sessions_matches_stats_welch() {
        let a = sessions(&[100.0, 102.0, 99.0, 101.0]);
        let b = sessions(&[97.0, 98.5, 96.0, 99.0]);
        let cfg = Config {
            design: Design::Independent,
            ..Config::default()
        };
        let c = compare(&a, &b, &cfg).unwrap();
        let la: Vec<f64> = [100.0f64, 102.0, 99.0, 101.0]
            .iter()
            .map(|v| v.ln())
            .collect();
        let lb: Vec<f64> = [97.0f64, 98.5, 96.0, 99.0].iter().map(|v| v.ln()).collect();
        let w = crate::stats::welch_t_test(&lb, &la).unwrap();
        assert!((c.p - w.p_two_sided).abs() < 1e-12, "{c:?} {w:?}");
        assert_eq!(c.method, Method::WelchSessions);
        assert!(c.change_pct < 0.0 && c.ci_pct.0 < c.change_pct && c.change_pct < c.ci_pct.1);
    }

    #[test]
    fn paired_t_hand_computed() {
        // Log ratios d = ln(1.01), ln(1.03), ln(1.02): mean ≈ 0.019802,
        // sd ≈ 0.009756; t = mean / (sd/√3) ≈ 3.5156, df 2 → p ≈ 0.0723.
        let a = sessions(&[100.0, 200.0, 50.0]);
        let b = sessions(&[101.0, 206.0, 51.0]);
        let c = compare(&a, &b, &Config::default()).unwrap();
        let d: Vec<f64> = [1.01f64, 1.03, 1.02].iter().map(|v| v.ln()).collect();
        let t = mean(&d) / (variance(&d) / 3.0).sqrt();
        // Two-sided t(2) tail: p = 1 − |t|/√(2 + t²).
        let p = 1.0 - t.abs() / (2.0 + t * t).sqrt();
        assert!((c.p - p).abs() < 1e-9, "{} vs {p}", c.p);
        assert_eq!(c.method, Method::PairedT);
        assert!((c.change_pct - pct(mean(&d))).abs() < 1e-12);
    }

    #[test]
    fn permutation_is_exact_and_brackets_the_estimate() {
        // Complete separation with 4 vs 4: the two extreme splits of 70.
        let a = sessions(&[100.0, 101.0, 100.5, 99.5]);
        let b = sessions(&[110.0, 111.0, 110.5, 109.5]);
        let cfg = Config {
            design: Design::Independent,
            method: Some(Method::Permutation),
            ..Config::default()
        };
        let c = compare(&a, &b, &cfg).unwrap();
        assert!((c.p - 2.0 / 70.0).abs() < 1e-12, "{c:?}");
        assert!(c.ci_pct.0 > 0.0 && c.ci_pct.0 < c.change_pct && c.change_pct < c.ci_pct.1);
        // Paired: 4 pairs give 16 sign flips; the smallest p is 2/16.
        let cfg = Config {
            method: Some(Method::Permutation),
            ..Config::default()
        };
        let c = compare(&a, &b, &cfg).unwrap();
        assert!((c.p - 2.0 / 16.0).abs() < 1e-12, "{c:?}");
        assert_eq!(c.verdict, Verdict::Inconclusive);
    }

    #[test]
    fn bootstrap_runs_and_is_seeded() {
        let a = sessions(&[100.0, 101.0, 100.5, 99.5]);
        let b = sessions(&[110.0, 111.0, 110.5, 109.5]);
        let cfg = Config {
            design: Design::Independent,
            method: Some(Method::HierarchicalBootstrap),
            ..Config::default()
        };
        let c1 = compare(&a, &b, &cfg).unwrap();
        let c2 = compare(&a, &b, &cfg).unwrap();
        assert_eq!(c1, c2);
        assert!(c1.p < 0.01 && c1.verdict == Verdict::Improvement, "{c1:?}");
    }

    #[test]
    fn benjamini_hochberg_reference() {
        // R: p.adjust(c(0.01, 0.04, 0.03, 0.2), "BH") = 0.04 0.0533 0.0533 0.2
        let q = benjamini_hochberg(&[0.01, 0.04, 0.03, 0.2]);
        let want = [0.04, 0.16 / 3.0, 0.16 / 3.0, 0.2];
        for (x, w) in q.iter().zip(want) {
            assert!((x - w).abs() < 1e-12, "{q:?}");
        }
        let q = benjamini_hochberg(&[f64::NAN, 0.5]);
        assert!(q[0].is_nan() && q[1] == 0.5);
    }

    #[test]
    fn verdict_rules() {
        assert_eq!(
            Verdict::decide((-1.0, 1.5), 0.5, 0.05, 0.02),
            Verdict::Equivalent
        );
        // Significant but inside the margin: equivalent.
        assert_eq!(
            Verdict::decide((0.2, 0.8), 0.001, 0.05, 0.02),
            Verdict::Equivalent
        );
        assert_eq!(
            Verdict::decide((-6.0, -3.0), 0.001, 0.05, 0.02),
            Verdict::Regression
        );
        assert_eq!(
            Verdict::decide((3.0, 6.0), 0.001, 0.05, 0.02),
            Verdict::Improvement
        );
        // Excludes 0 but not significant after FDR: nothing.
        assert_eq!(
            Verdict::decide((0.5, 6.0), 0.08, 0.05, 0.02),
            Verdict::Inconclusive
        );
        assert_eq!(
            Verdict::decide((-3.0, 3.0), 0.9, 0.05, 0.02),
            Verdict::Inconclusive
        );
        let mut rows = vec![
            compare(
                &sessions(&[100.0, 101.0, 99.0]),
                &sessions(&[90.0, 91.5, 89.0]),
                &Config::default(),
            )
            .unwrap(),
        ];
        decide_rows(&mut rows, 0.05, 0.02);
        assert_eq!(rows[0].verdict, Verdict::Regression);
        assert!(
            rows[0].change_text().starts_with("-9."),
            "{}",
            rows[0].change_text()
        );
        assert!(
            rows[0].cell_text().ends_with("] (R)"),
            "{}",
            rows[0].cell_text()
        );
    }

    #[test]
    fn pairs_stay_aligned_when_a_session_is_empty() {
        // Session 1 of A and session 2 of B lost all runs: only pairs 0
        // and 3 remain, with ratios 1.01 and 1.03 (not shifted partners).
        let mut a = sessions(&[100.0, 200.0, 50.0, 80.0]);
        let mut b = sessions(&[101.0, 206.0, 51.0, 82.4]);
        a[1].runs.clear();
        b[2].runs.clear();
        let c = compare(&a, &b, &Config::default()).unwrap();
        assert_eq!(c.sessions, (2, 2));
        let want = pct((1.01f64.ln() + 1.03f64.ln()) / 2.0);
        assert!((c.change_pct - want).abs() < 1e-9, "{c:?}");
    }

    #[test]
    fn input_errors() {
        let two = sessions(&[1.0, 2.0]);
        let one = sessions(&[1.0]);
        let ind = Config {
            design: Design::Independent,
            ..Config::default()
        };
        assert!(matches!(
            compare(&one, &two, &ind),
            Err(Error::TooFewSessions { side: "A", .. })
        ));
        assert!(matches!(
            compare(&one, &one, &Config::default()),
            Err(Error::TooFewSessions { side: "A", .. })
        ));
        assert!(matches!(
            compare(&two, &sessions(&[1.0, 2.0, 3.0]), &Config::default()),
            Err(Error::Unpaired { .. })
        ));
        let bad = vec![Session::new(vec![1.0, f64::NAN]), Session::new(vec![1.0])];
        assert!(matches!(
            compare(&bad, &two, &Config::default()),
            Err(Error::BadSample { .. })
        ));
        let cfg = Config {
            alpha: 0.0,
            ..Config::default()
        };
        assert!(compare(&two, &two, &cfg).is_err());
    }

    #[test]
    fn invocation_variance_widens_separate_comparisons_only() {
        let a = sessions(&[100.0, 102.0, 99.0, 101.0]);
        let b = sessions(&[97.0, 98.5, 96.0, 99.0]);
        let ind = Config {
            design: Design::Independent,
            ..Config::default()
        };
        let plain = compare(&a, &b, &ind).unwrap();
        let wide = compare(
            &a,
            &b,
            &Config {
                invocation_var: 0.02f64.powi(2),
                ..ind
            },
        )
        .unwrap();
        assert!(
            wide.p > plain.p && wide.ci_pct.0 < plain.ci_pct.0,
            "{plain:?} {wide:?}"
        );
        assert!(wide.mde_pct > plain.mde_pct);
        assert_eq!(wide.change_pct, plain.change_pct);
        let paired = Config {
            invocation_var: 0.02f64.powi(2),
            ..Config::default()
        };
        assert_eq!(
            compare(&a, &b, &paired).unwrap(),
            compare(&a, &b, &Config::default()).unwrap()
        );
        assert!(
            compare(
                &a,
                &b,
                &Config {
                    invocation_var: -1.0,
                    ..ind
                }
            )
            .is_err()
        );
    }

    #[test]
    fn mde_shrinks_with_sessions() {
        let m4 = min_detectable_effect(0.02, 4, Design::Independent, 0.05, 0.8).unwrap();
        let m16 = min_detectable_effect(0.02, 16, Design::Independent, 0.05, 0.8).unwrap();
        assert!(m16 < m4 && m16 > 0.0, "{m4} {m16}");
        assert!(min_detectable_effect(0.02, 1, Design::Interleaved, 0.05, 0.8).is_none());
    }
}
