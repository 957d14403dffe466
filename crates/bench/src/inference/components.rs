//! Variance components of a two-level design (Kalibera & Jones 2013).
//!
//! Level 1 are runs (their iterations), level 2 sessions (their
//! executions). On the log scale (so the components read as relative
//! standard deviations):
//!
//! * `S1² = Σ_j Σ_k (Y_jk − Ȳ_j)² / Σ_j (n_j − 1)` (pooled within-session),
//! * `S2² = Σ_j (Ȳ_j − Ȳ)² / (n2 − 1)` (variance of session means),
//! * `T1² = S1²`, `T2² = max(S2² − S1²/n1, 0)` (the unbiased between-session
//!   component; `n1` is the mean number of runs per session).
//!
//! With `c1` the cost of one run and `c2` the cost of one extra session
//! (VM creation and warm-up), the runs per session that minimise the
//! variance of the grand mean for a given time budget are
//! `r1 = ⌈√(c2·T1² / (c1·T2²))⌉` (their Section 4).
use super::compare::{Config, Design, min_detectable_effect};
use super::{Error, Session, mean, variance};
use serde::Serialize;
use std::fmt;

/// Costs of the two levels, in any one unit (e.g. seconds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Costs {
    /// Fixed cost of one session: VM creation, warm-up, verification.
    pub session: f64,
    /// Cost of one measured run.
    pub run: f64,
}

/// The largest design [`VarianceComponents::recommend`] considers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Runs per session.
    pub runs: usize,
    /// Sessions per side.
    pub sessions: usize,
}

/// Estimated variance components of one cell (log scale).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct VarianceComponents {
    /// Sessions used.
    pub sessions: usize,
    /// Mean runs per session (`n1`).
    pub runs_per_session: f64,
    /// `T1²`: within-session (run-to-run) variance of log throughput.
    pub within: f64,
    /// `T2²`: between-session variance of log throughput, beyond what the
    /// run noise explains; clamped at 0.
    pub between: f64,
    /// `S2²`: observed variance of the log session means.
    pub session_means: f64,
    /// Geometric mean of the session means (throughput units).
    pub grand_mean: f64,
}

impl VarianceComponents {
    /// Estimate from the measured runs (warm-up already removed). Needs at
    /// least two sessions with two runs each; sessions with fewer runs are
    /// left out.
    pub(crate) fn estimate(sessions: &[Session]) -> Result<VarianceComponents, Error> {
        let used: Vec<&Session> = sessions.iter().filter(|s| s.runs.len() >= 2).collect();
        if used.len() < 2 {
            return Err(Error::TooFewSessions {
                side: "(variance components)",
                have: used.len(),
                need: 2,
            });
        }
        let mut ss_within = 0.0;
        let mut df_within = 0usize;
        let mut means = Vec::with_capacity(used.len());
        let mut runs = 0usize;
        for (i, s) in used.iter().enumerate() {
            if let Some(&value) = s.runs.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
                return Err(Error::BadSample {
                    side: "(variance components)",
                    session: i,
                    value,
                });
            }
            let logs: Vec<f64> = s.runs.iter().map(|v| v.ln()).collect();
            let m = mean(&logs);
            ss_within += logs.iter().map(|v| (v - m) * (v - m)).sum::<f64>();
            df_within += logs.len() - 1;
            means.push(m);
            runs += logs.len();
        }
        let n1 = runs as f64 / used.len() as f64;
        let within = ss_within / df_within as f64;
        let session_means = variance(&means);
        Ok(VarianceComponents {
            sessions: used.len(),
            runs_per_session: n1,
            within,
            between: (session_means - within / n1).max(0.0),
            session_means,
            grand_mean: mean(&means).exp(),
        })
    }

    /// Within-session relative standard deviation, in percent.
    pub(crate) fn within_pct(&self) -> f64 {
        self.within.sqrt() * 100.0
    }

    /// Between-session relative standard deviation, in percent.
    pub(crate) fn between_pct(&self) -> f64 {
        self.between.sqrt() * 100.0
    }

    /// Variance of one session's log mean with `runs` runs per session.
    pub(crate) fn session_mean_variance(&self, runs: usize) -> f64 {
        self.between + self.within / runs.max(1) as f64
    }

    /// Kalibera & Jones' optimal runs per session for these costs, at least
    /// 1 and at most `cap` (also the answer when `T2² = 0`: sessions then
    /// add nothing but cost).
    pub(crate) fn optimal_runs(&self, costs: Costs, cap: usize) -> usize {
        let cap = cap.max(1);
        if !(costs.run > 0.0 && costs.session >= 0.0) {
            return 1;
        }
        if self.between <= 0.0 {
            return cap;
        }
        let r = (costs.session * self.within / (costs.run * self.between))
            .sqrt()
            .ceil();
        if r.is_finite() {
            (r as usize).clamp(1, cap)
        } else {
            cap
        }
    }

    /// The design to detect a `goal.margin` change (e.g. 0.02) at
    /// `goal.alpha` with `goal.power`: optimal runs per session (capped at
    /// `limits.runs`), then the fewest sessions per side (up to
    /// `limits.sessions`) whose minimal detectable effect is within the
    /// margin. Independent sessions are assumed whatever `goal.design` says
    /// (an interleaved design can only do better).
    pub(crate) fn recommend(&self, costs: Costs, goal: &Config, limits: Limits) -> Recommendation {
        let (margin, max_sessions) = (goal.margin, limits.sessions);
        let runs = self.optimal_runs(costs, limits.runs);
        let sd = self.session_mean_variance(runs).sqrt();
        let independent = Config {
            design: Design::Independent,
            ..*goal
        };
        let mde = |n: usize| min_detectable_effect(sd, n, &independent);
        let sessions = (2..=max_sessions.max(2))
            .find(|&n| mde(n).is_some_and(|m| m <= margin * 100.0))
            .unwrap_or(max_sessions.max(2));
        Recommendation {
            runs,
            sessions,
            mde_pct: mde(sessions).unwrap_or(f64::NAN),
            margin_pct: margin * 100.0,
            reached: mde(sessions).is_some_and(|m| m <= margin * 100.0),
            cost: sessions as f64 * (costs.session + runs as f64 * costs.run),
        }
    }
}

/// The fewest sessions (2..=`max`) whose minimal detectable effect at
/// `goal` (alpha, power, design) is within `goal.margin`, for a unit
/// (log session mean, or a pair's log ratio) with standard deviation
/// `sd`; `None` when even `max` does not reach it.
pub(crate) fn sessions_to_see(sd: f64, goal: &Config, max: usize) -> Option<usize> {
    (2..=max.max(2))
        .find(|&n| min_detectable_effect(sd, n, goal).is_some_and(|m| m <= goal.margin * 100.0))
}

impl fmt::Display for VarianceComponents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "between-session {:.2}%, within-session {:.2}% (relative SD; {} sessions x {:.1} runs)",
            self.between_pct(),
            self.within_pct(),
            self.sessions,
            self.runs_per_session
        )
    }
}

/// Recommended sessions x runs for one cell.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Recommendation {
    /// Runs per session (after warm-up).
    pub runs: usize,
    /// Sessions per side.
    pub sessions: usize,
    /// Smallest change (percent) this design detects with the power asked.
    pub mde_pct: f64,
    /// The margin it was sized for, in percent.
    pub margin_pct: f64,
    /// False when even `max_sessions` cannot reach the margin.
    pub reached: bool,
    /// Cost of one side in the units of [`Costs`].
    pub cost: f64,
}

impl fmt::Display for Recommendation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "recommended {} sessions x {} runs per side: detects {:.2}% (margin {:.1}%{})",
            self.sessions,
            self.runs,
            self.mde_pct,
            self.margin_pct,
            if self.reached { "" } else { ", NOT reached" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sess(v: &[f64]) -> Session {
        Session::new(v.iter().map(|x| x.exp()).collect())
    }

    #[test]
    fn hand_computed_components() {
        // Log values: session 1: 0, 0.02 (mean 0.01); session 2: 0.1, 0.12
        // (mean 0.11). S1² = (2·0.0001 + 2·0.0001) / 2 = 0.0002;
        // S2² = var(0.01, 0.11) = 0.005; T2² = 0.005 − 0.0002/2 = 0.0049.
        let v = VarianceComponents::estimate(&[sess(&[0.0, 0.02]), sess(&[0.1, 0.12])]).unwrap();
        assert!((v.within - 0.0002).abs() < 1e-12, "{v:?}");
        assert!((v.session_means - 0.005).abs() < 1e-12, "{v:?}");
        assert!((v.between - 0.0049).abs() < 1e-12, "{v:?}");
        assert_eq!(v.runs_per_session, 2.0);
        assert!((v.grand_mean - 0.06f64.exp()).abs() < 1e-12);
        // r1 = ceil(sqrt(c2 T1² / (c1 T2²))) = ceil(sqrt(100 · 0.0002/0.0049)) = 3.
        let c = Costs {
            session: 100.0,
            run: 1.0,
        };
        assert_eq!(v.optimal_runs(c, 50), 3);
        // sd of a session mean with 3 runs: sqrt(0.0049 + 0.0002/3) = 0.0705;
        // (t_0.975 + t_0.8) · 0.0705 · sqrt(2/n) <= ln(1.1) needs n ≈ 10.
        let limits = Limits {
            runs: 50,
            sessions: 100,
        };
        let goal = |margin| Config {
            margin,
            ..Config::default()
        };
        let r = v.recommend(c, &goal(0.10), limits);
        assert!(
            r.reached && r.mde_pct <= 10.0 && (8..=12).contains(&r.sessions),
            "{r:?}"
        );
        assert!(
            r.to_string()
                .starts_with(&format!("recommended {} sessions x 3 runs", r.sessions))
        );
        // A 2% margin is out of reach of 100 sessions with 7% session noise.
        let r = v.recommend(c, &goal(0.02), limits);
        assert!(!r.reached && r.sessions == 100 && r.mde_pct > 2.0, "{r:?}");
        assert!(v.to_string().contains("between-session 7.00%"), "{v}");
    }

    #[test]
    fn no_between_variance_means_many_runs() {
        let v = VarianceComponents::estimate(&[sess(&[0.0, 0.02]), sess(&[0.02, 0.0])]).unwrap();
        assert_eq!(v.between, 0.0);
        let c = Costs {
            session: 10.0,
            run: 1.0,
        };
        assert_eq!(v.optimal_runs(c, 30), 30);
    }

    #[test]
    fn rejects_too_little_or_broken_data() {
        assert!(VarianceComponents::estimate(&[sess(&[0.0, 0.1])]).is_err());
        let bad = [Session::new(vec![1.0, 0.0]), Session::new(vec![1.0, 1.0])];
        assert!(matches!(
            VarianceComponents::estimate(&bad),
            Err(Error::BadSample { .. })
        ));
    }

    #[test]
    fn sessions_to_see_a_change() {
        let goal = |design| Config {
            margin: 0.02,
            design,
            ..Config::default()
        };
        // Paired, sd 1%: exp((t_0.975(n-1) + t_0.8(n-1)) * sd / sqrt(n)) - 1
        // is (3.182 + 0.978) * 0.01 / 2 -> 2.10% at n = 4 (above 2%) and
        // (2.776 + 0.941) * 0.01 / 2.236 -> 1.68% at n = 5: 5.
        assert_eq!(
            sessions_to_see(0.01, &goal(Design::Interleaved), 1000),
            Some(5)
        );
        // Independent sessions need more for the same sd.
        let ind = sessions_to_see(0.01, &goal(Design::Independent), 1000).unwrap();
        assert!(ind > 5, "{ind}");
        // Out of reach.
        assert_eq!(sessions_to_see(0.5, &goal(Design::Interleaved), 10), None);
        assert_eq!(
            sessions_to_see(0.0, &goal(Design::Interleaved), 10),
            Some(2)
        );
    }
}
