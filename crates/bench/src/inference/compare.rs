//! Session-level comparison of two sides of one cell.
//!
//! Every session becomes one number, `ln(mean of its runs)`; the change of B
//! against A is the difference of the mean log session means, shown as
//! `exp(Δ) − 1` in percent with a `1 − alpha` confidence interval.
//!
//! Tests (see [`Method`], one per [`Design`]): for interleaved (ABAB)
//! sessions the paired t-test on the per-pair log ratios
//! `ln(B_i) − ln(A_i)`; for separate sessions Welch's t-test on the log
//! session means (both `bench::stats`). Both hold their false-positive rate
//! in the simulations of `bench::inference::sim` (a session effect and a
//! warm-up trend); a Welch test on the runs does not (it treats runs as
//! independent).
//!
//! Sessions of one invocation share that invocation's machine state, so two
//! separate invocations differ by more than their sessions show: the host
//! rows of a separate-invocation compare show that drift
//! (`inference::drift`). Pairs of an interleaved invocation share it.
//!
//! Verdict (see [`Verdict`]): `(=)` when the interval lies inside
//! ±margin; otherwise `(R)`/`(I)` when the Benjamini–Hochberg q value across
//! the rows is below alpha and the interval excludes 0; otherwise nothing.
use super::{Error, Session, log_session_means, pct, variance};
use crate::stats::{self, TTest};
use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// How the sessions of the two sides relate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) enum Design {
    /// Separate invocations (or any sessions not paired in time).
    Independent,
    /// One invocation interleaving the sides: session i of A and session i
    /// of B ran next to each other (ABAB or, better, ABBA).
    Interleaved,
}

/// The test behind a comparison: the one that holds its false-positive
/// rate for the design ([`Method::of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) enum Method {
    /// Paired t-test on per-pair log ratios (df = pairs − 1).
    PairedT,
    /// Welch's t-test on log session means.
    WelchSessions,
}

impl Method {
    /// Name printed next to the results ("which test ran").
    pub(crate) fn name(self) -> &'static str {
        match self {
            Method::PairedT => "paired t on per-session-pair log ratios",
            Method::WelchSessions => "Welch t on log session means",
        }
    }

    /// The method of a design.
    pub(crate) fn of(design: Design) -> Method {
        match design {
            Design::Interleaved => Method::PairedT,
            Design::Independent => Method::WelchSessions,
        }
    }
}

/// Parameters of a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Config {
    /// Significance level (and 1 − confidence of the interval).
    pub alpha: f64,
    /// Equivalence margin as a fraction (0.02 = ±2%).
    pub margin: f64,
    pub design: Design,
    /// Power the minimal detectable effect is computed for.
    pub power: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            alpha: 0.05,
            margin: 0.02,
            design: Design::Interleaved,
            power: 0.8,
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
            && self.power < 1.0;
        if ok {
            Ok(())
        } else {
            Err(Error::Parameter(format!(
                "comparison parameters out of range: alpha {} (0..0.5), margin {} (0..1), \
                 power {} (0..1)",
                self.alpha, self.margin, self.power
            )))
        }
    }

    fn paired(&self) -> bool {
        self.design == Design::Interleaved
    }
}

/// The outcome for one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) enum Verdict {
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
    pub(crate) fn mark(self) -> &'static str {
        match self {
            Verdict::Equivalent => "(=)",
            Verdict::Regression => "(R)",
            Verdict::Improvement => "(I)",
            Verdict::Inconclusive => "",
        }
    }

    /// The verdict for an interval (percent) and a q value, at the alpha
    /// and margin (fraction) of `cfg`. Equivalence wins over a significant
    /// but smaller-than-margin change: the mark answers "does it matter",
    /// `significant` in [`Comparison`] says whether it is distinguishable
    /// from 0.
    pub(crate) fn decide(ci_pct: (f64, f64), q: f64, cfg: &Config) -> Verdict {
        let m = cfg.margin * 100.0;
        let (lo, hi) = ci_pct;
        if lo > -m && hi < m {
            Verdict::Equivalent
        } else if q < cfg.alpha && lo > 0.0 {
            Verdict::Improvement
        } else if q < cfg.alpha && hi < 0.0 {
            Verdict::Regression
        } else {
            Verdict::Inconclusive
        }
    }

    /// A change shown after FDR control, (R) or (I).
    pub(crate) fn moved(self) -> bool {
        matches!(self, Verdict::Regression | Verdict::Improvement)
    }
}

/// One row's comparison of side B against side A.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Comparison {
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
    pub(crate) fn change_text(&self) -> String {
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
    pub(crate) fn cell_text(&self) -> String {
        format!("{} {}", self.change_text(), self.verdict.mark())
            .trim_end()
            .to_string()
    }

    fn finish(&mut self, cfg: &Config) {
        let (lo, hi) = self.ci_pct;
        self.significant = self.q < cfg.alpha && (lo > 0.0 || hi < 0.0);
        self.verdict = Verdict::decide(self.ci_pct, self.q, cfg);
    }
}

/// Student's t quantile; `None` for a degenerate df.
fn t_quantile(p: f64, df: f64) -> Option<f64> {
    if !(df > 0.0 && df.is_finite()) {
        return None;
    }
    StudentsT::new(0.0, 1.0, df).ok().map(|t| t.inverse_cdf(p))
}

/// Smallest change (percent) detectable with `cfg.power` at two-sided
/// `cfg.alpha`: `(t_{1−α/2} + t_{power}) · se`, with `se = sd·√(2/n)`,
/// df = 2n − 2 for independent sessions (`sd` = SD of a log session mean,
/// `n` per side) and `se = sd/√n`, df = n − 1 for pairs (`sd` = SD of a
/// pair's log ratio). `None` for fewer than 2 sessions or a non-finite `sd`.
pub(crate) fn min_detectable_effect(sd: f64, n: usize, cfg: &Config) -> Option<f64> {
    if n < 2 || !sd.is_finite() || sd < 0.0 {
        return None;
    }
    let nf = n as f64;
    let (se, df) = match cfg.design {
        Design::Independent => (sd * (2.0 / nf).sqrt(), 2.0 * nf - 2.0),
        Design::Interleaved => (sd / nf.sqrt(), nf - 1.0),
    };
    let k = t_quantile(1.0 - cfg.alpha / 2.0, df)? + t_quantile(cfg.power, df)?;
    Some(pct(k * se))
}

/// The log session means of both sides, ready to test: pairs stay aligned
/// (a pair is dropped when either session has no runs left, e.g. all
/// disturbed; unpaired sides drop empty sessions), every run positive and
/// finite, at least 2 sessions per side.
fn log_means(a: &[Session], b: &[Session], paired: bool) -> Result<(Vec<f64>, Vec<f64>), Error> {
    if paired && a.len() != b.len() {
        return Err(Error::Unpaired {
            a: a.len(),
            b: b.len(),
        });
    }
    let (a, b): (Vec<Session>, Vec<Session>) = if paired {
        a.iter()
            .zip(b)
            .filter(|(x, y)| !x.runs.is_empty() && !y.runs.is_empty())
            .map(|(x, y)| (x.clone(), y.clone()))
            .unzip()
    } else {
        (a.to_vec(), b.to_vec())
    };
    let la = log_session_means("A", &a)?;
    let lb = log_session_means("B", &b)?;
    for (side, l) in [("A", &la), ("B", &lb)] {
        if l.len() < 2 {
            return Err(Error::TooFewSessions {
                side,
                have: l.len(),
                need: 2,
            });
        }
    }
    Ok((la, lb))
}

/// The design's test of B against A on the log session means, and the MDE
/// from the SD of the unit it tests (a pair's log ratio, or a log session
/// mean pooled over the sides).
fn test(la: &[f64], lb: &[f64], cfg: &Config) -> Result<(TTest, Option<f64>), Error> {
    let degenerate =
        || Error::Parameter("the t distribution is undefined for these samples (df <= 0)".into());
    if cfg.paired() {
        let d: Vec<f64> = la.iter().zip(lb).map(|(x, y)| y - x).collect();
        let mde = min_detectable_effect(variance(&d).sqrt(), d.len(), cfg);
        Ok((stats::paired_t_test(&d).ok_or_else(degenerate)?, mde))
    } else {
        let n = la.len().min(lb.len());
        let sd = ((variance(la) + variance(lb)) / 2.0).sqrt();
        let mde = min_detectable_effect(sd, n, cfg);
        Ok((stats::welch_t_test(lb, la).ok_or_else(degenerate)?, mde))
    }
}

/// Compare side `b` against side `a` (throughput, higher is better).
///
/// Needs at least 2 sessions per side (2 pairs when interleaved). Every run
/// must be positive and finite (drop disturbed runs before, not NaNs).
pub(crate) fn compare(a: &[Session], b: &[Session], cfg: &Config) -> Result<Comparison, Error> {
    cfg.validate()?;
    let (la, lb) = log_means(a, b, cfg.paired())?;
    let (tt, mde) = test(&la, &lb, cfg)?;
    let ci = tt.interval(cfg.alpha).ok_or_else(|| {
        Error::Parameter("the t distribution is undefined for these samples (df <= 0)".into())
    })?;
    let mut c = Comparison {
        method: Method::of(cfg.design),
        sessions: (la.len(), lb.len()),
        change_pct: pct(tt.diff),
        ci_pct: (pct(ci.0), pct(ci.1)),
        p: tt.p_two_sided,
        q: tt.p_two_sided,
        mde_pct: mde.unwrap_or(f64::NAN),
        significant: false,
        verdict: Verdict::Inconclusive,
    };
    c.finish(cfg);
    Ok(c)
}

/// Benjamini–Hochberg q values (step-up adjusted p-values) in input order.
/// NaN p-values stay NaN and do not count towards the number of tests.
pub(crate) fn benjamini_hochberg(p: &[f64]) -> Vec<f64> {
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
pub(crate) fn decide_rows(rows: &mut [Comparison], cfg: &Config) {
    let q = benjamini_hochberg(&rows.iter().map(|r| r.p).collect::<Vec<_>>());
    for (r, q) in rows.iter_mut().zip(q) {
        r.q = q;
        r.finish(cfg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::mean;

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
            Verdict::decide((-1.0, 1.5), 0.5, &Config::default()),
            Verdict::Equivalent
        );
        // Significant but inside the margin: equivalent.
        assert_eq!(
            Verdict::decide((0.2, 0.8), 0.001, &Config::default()),
            Verdict::Equivalent
        );
        assert_eq!(
            Verdict::decide((-6.0, -3.0), 0.001, &Config::default()),
            Verdict::Regression
        );
        assert_eq!(
            Verdict::decide((3.0, 6.0), 0.001, &Config::default()),
            Verdict::Improvement
        );
        // Excludes 0 but not significant after FDR: nothing.
        assert_eq!(
            Verdict::decide((0.5, 6.0), 0.08, &Config::default()),
            Verdict::Inconclusive
        );
        assert_eq!(
            Verdict::decide((-3.0, 3.0), 0.9, &Config::default()),
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
        decide_rows(&mut rows, &Config::default());
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
    fn mde_shrinks_with_sessions() {
        let ind = Config {
            design: Design::Independent,
            ..Config::default()
        };
        let m4 = min_detectable_effect(0.02, 4, &ind).unwrap();
        let m16 = min_detectable_effect(0.02, 16, &ind).unwrap();
        assert!(m16 < m4 && m16 > 0.0, "{m4} {m16}");
        assert!(min_detectable_effect(0.02, 1, &Config::default()).is_none());
    }
}
