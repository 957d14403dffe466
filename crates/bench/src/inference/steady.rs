//! Steady state within a session: is a run sequence still warming up?
//!
//! A window of runs is *unsettled* when it has a monotone trend that is both
//! statistically detectable (two-sided Mann–Kendall test, exact null
//! distribution up to [`EXACT_MAX_N`] runs) and practically relevant (the
//! Theil–Sen slope times the window length exceeds `tolerance` of the
//! window's median). Requiring both keeps noisy but flat sequences from
//! warming up forever and ignores tiny statistically visible drifts. Online
//! ([`WarmupController`], a window of 5), a drift beyond `max_drift` is
//! unsettled even when not significant (so short a window cannot reject a
//! ramp buried in noise).
//!
//! Mann–Kendall needs at least 5 runs to reject at 0.05 (the smallest
//! two-sided exact p-value with 4 runs is 2/24), hence the default window.
use super::Error;
use serde::Serialize;
use statrs::distribution::{ContinuousCDF, Normal};

/// Above this length the Mann–Kendall p-value uses the normal approximation.
pub(crate) const EXACT_MAX_N: usize = 60;

/// Parameters of the steady-state check.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct SteadyConfig {
    /// Runs judged together (the last `window` runs online); at least 5.
    pub window: usize,
    /// Two-sided significance level of the trend test.
    pub alpha: f64,
    /// Largest drift across the window (relative to its median) that is
    /// accepted even when the trend is significant, e.g. 0.02.
    pub tolerance: f64,
    /// Online: largest drift across the window accepted at all, significant
    /// or not: a 5-run window has little power, so a large Theil–Sen drift
    /// (a ramp hidden in noise) is not steady even when Mann–Kendall
    /// cannot reject, e.g. 0.10.
    pub max_drift: f64,
    /// Online cap: warm-up runs after which the controller gives up.
    pub max_warmup: usize,
}

impl Default for SteadyConfig {
    fn default() -> Self {
        SteadyConfig {
            window: 5,
            alpha: 0.05,
            tolerance: 0.02,
            max_drift: 0.10,
            max_warmup: 20,
        }
    }
}

impl SteadyConfig {
    fn validate(&self) -> Result<(), Error> {
        if self.window < 5 {
            return Err(Error::Parameter(format!(
                "steady-state window {} is too short: the trend test needs at least 5 runs",
                self.window
            )));
        }
        let alpha_ok = self.alpha > 0.0 && self.alpha < 1.0;
        if !(alpha_ok && self.tolerance >= 0.0 && self.max_drift >= self.tolerance) {
            return Err(Error::Parameter(format!(
                "steady-state alpha {} must be in (0, 1), tolerance {} at least 0 and \
                 max drift {} at least the tolerance",
                self.alpha, self.tolerance, self.max_drift
            )));
        }
        Ok(())
    }
}

/// Result of the Mann–Kendall trend test.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct MannKendall {
    /// `S = Σ_{i<j} sign(x_j − x_i)`: positive for a rising sequence.
    pub s: f64,
    /// Two-sided p-value.
    pub p: f64,
    /// Theil–Sen slope: median of `(x_j − x_i) / (j − i)`, per run.
    pub sen_slope: f64,
}

/// Mann–Kendall trend test of a sequence (two-sided) with the Theil–Sen
/// slope. `None` for fewer than 3 values or non-finite input.
///
/// Up to [`EXACT_MAX_N`] values the p-value is exact under the no-ties null
/// (the distribution of inversions of a random permutation; ties count 0 in
/// `S`, which only makes the test more conservative); above, the normal
/// approximation with the tie-corrected variance and a continuity
/// correction.
pub(crate) fn mann_kendall(x: &[f64]) -> Option<MannKendall> {
    let n = x.len();
    if n < 3 || x.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mut s = 0i64;
    let mut slopes = Vec::with_capacity(n * (n - 1) / 2);
    for i in 0..n {
        for j in i + 1..n {
            let d = x[j] - x[i];
            s += (d > 0.0) as i64 - (d < 0.0) as i64;
            slopes.push(d / (j - i) as f64);
        }
    }
    slopes.sort_by(f64::total_cmp);
    let m = slopes.len();
    let sen_slope = if m % 2 == 1 {
        slopes[m / 2]
    } else {
        (slopes[m / 2 - 1] + slopes[m / 2]) / 2.0
    };
    let p = if n <= EXACT_MAX_N {
        exact_p(n, s.unsigned_abs())
    } else {
        normal_p(x, s)
    };
    Some(MannKendall {
        s: s as f64,
        p,
        sen_slope,
    })
}

/// `P(|S| >= s_abs)` for `n` untied values: `S = C(n,2) − 2·inversions`.
fn exact_p(n: usize, s_abs: u64) -> f64 {
    // Distribution of the number of inversions, built one element at a
    // time: adding the m-th element adds 0..m-1 inversions uniformly.
    let mut dist = vec![1.0f64];
    for m in 2..=n {
        let mut next = vec![0.0; dist.len() + m - 1];
        let w = 1.0 / m as f64;
        // Sliding-window sum: next[i] = w * Σ_{k=0}^{m-1} dist[i-k].
        let mut acc = 0.0;
        for (i, slot) in next.iter_mut().enumerate() {
            if i < dist.len() {
                acc += dist[i];
            }
            if i >= m && i - m < dist.len() {
                acc -= dist[i - m];
            }
            *slot = acc * w;
        }
        dist = next;
    }
    let total = (n * (n - 1) / 2) as i64;
    let p: f64 = dist
        .iter()
        .enumerate()
        .filter(|(inv, _)| (total - 2 * *inv as i64).unsigned_abs() >= s_abs)
        .map(|(_, p)| p)
        .sum();
    p.clamp(0.0, 1.0)
}

/// Normal approximation with tie correction and continuity correction.
fn normal_p(x: &[f64], s: i64) -> f64 {
    let n = x.len() as f64;
    let mut sorted = x.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mut ties = 0.0;
    let mut i = 0;
    while i < sorted.len() {
        let j = i + sorted[i..].iter().take_while(|v| **v == sorted[i]).count();
        let t = (j - i) as f64;
        ties += t * (t - 1.0) * (2.0 * t + 5.0);
        i = j;
    }
    let var = (n * (n - 1.0) * (2.0 * n + 5.0) - ties) / 18.0;
    if var <= 0.0 {
        return 1.0;
    }
    let z = ((s.unsigned_abs() as f64) - 1.0).max(0.0) / var.sqrt();
    let std = Normal::standard();
    (2.0 * std.sf(z)).clamp(0.0, 1.0)
}

/// The steady-state judgement of a sequence.
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Steadiness {
    /// Runs to discard from the front as warm-up.
    pub warmup: usize,
    /// Whether the runs after `warmup` are steady. `false` also when the
    /// sequence is shorter than the window (it cannot be judged).
    pub settled: bool,
    /// Mann–Kendall p-value of the kept runs (NaN when not judged).
    pub trend_p: f64,
    /// Drift across the kept runs relative to their median
    /// (Theil–Sen slope × (len − 1) / median); NaN when not judged.
    pub drift: f64,
}

/// Judge one window: (steady, p, relative drift).
fn judge(w: &[f64], cfg: &SteadyConfig) -> Option<(bool, f64, f64)> {
    let mk = mann_kendall(w)?;
    let mut sorted = w.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let drift = if median != 0.0 {
        mk.sen_slope * (w.len() - 1) as f64 / median.abs()
    } else {
        0.0
    };
    let trending = mk.p < cfg.alpha && drift.abs() > cfg.tolerance;
    Some((!trending, mk.p, drift))
}

#[cfg(test)]
/// Robust z above which a leading run is a gross outlier (log scale,
/// median and 1.4826·MAD of the runs after it).
pub(crate) const OUTLIER_Z: f64 = 5.0;

#[cfg(test)]
/// Whether `runs[0]` is a gross outlier against `runs[1..]`: more than
/// [`OUTLIER_Z`] robust standard deviations and more than the tolerance
/// away from their median (log scale). Needs positive runs.
fn leading_outlier(runs: &[f64], cfg: &SteadyConfig) -> bool {
    if runs.iter().any(|v| *v <= 0.0) || runs.len() < 3 {
        return false;
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    };
    let mut rest: Vec<f64> = runs[1..].iter().map(|v| v.ln()).collect();
    let m = median(&mut rest);
    let mut dev: Vec<f64> = rest.iter().map(|v| (v - m).abs()).collect();
    let scale = 1.4826 * median(&mut dev);
    let d = (runs[0].ln() - m).abs();
    d > cfg.tolerance.ln_1p() && (scale == 0.0 || d > OUTLIER_Z * scale)
}

#[cfg(test)]
/// Offline: the shortest warm-up after which the rest of `runs` is steady
/// (judged as a whole, at least `cfg.window` runs), extended over leading
/// gross outliers (a cold first run). When no such warm-up exists,
/// `settled` is false and `warmup` leaves the last window.
pub(crate) fn steady_state(runs: &[f64], cfg: &SteadyConfig) -> Result<Steadiness, Error> {
    cfg.validate()?;
    if runs.iter().any(|v| !v.is_finite()) {
        return Err(Error::Parameter(
            "a run sequence contains NaN or infinity; the measurement is broken".into(),
        ));
    }
    if runs.len() < cfg.window {
        return Ok(Steadiness {
            warmup: 0,
            settled: false,
            trend_p: f64::NAN,
            drift: f64::NAN,
        });
    }
    let last = runs.len() - cfg.window;
    let mut at_last = None;
    for w in 0..=last {
        if let Some((steady, p, drift)) = judge(&runs[w..], cfg) {
            if steady {
                // A trend test barely sees one cold run in front of a noisy
                // sequence (first touch): drop leading gross outliers too.
                let mut w = w;
                while w < last && leading_outlier(&runs[w..], cfg) {
                    w += 1;
                }
                let (_, p, drift) = judge(&runs[w..], cfg).unwrap_or((true, p, drift));
                return Ok(Steadiness {
                    warmup: w,
                    settled: true,
                    trend_p: p,
                    drift,
                });
            }
            at_last = Some((p, drift));
        }
    }
    let (trend_p, drift) = at_last.unwrap_or((f64::NAN, f64::NAN));
    Ok(Steadiness {
        warmup: last,
        settled: false,
        trend_p,
        drift,
    })
}

/// What the bench loop should do after a warm-up run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) enum WarmupDecision {
    /// Not judged steady yet: run another warm-up run.
    Continue,
    /// The last `window` runs are steady: the `runs` runs so far were the
    /// warm-up; start measuring.
    Settled { runs: usize },
    /// The cap was reached without settling: start measuring anyway and
    /// flag the cell as not settled.
    Capped { runs: usize },
}

/// Online warm-up: feed it every warm-up run's throughput.
#[derive(Debug, Clone)]
pub(crate) struct WarmupController {
    cfg: SteadyConfig,
    min_warmup: usize,
    runs: Vec<f64>,
}

impl WarmupController {
    /// `min_warmup` runs are always discarded (e.g. the user's `--warmup`);
    /// the controller needs at least `cfg.window` runs before it can settle.
    pub(crate) fn new(cfg: SteadyConfig, min_warmup: usize) -> Result<WarmupController, Error> {
        cfg.validate()?;
        if cfg.max_warmup < cfg.window.max(min_warmup) {
            return Err(Error::Parameter(format!(
                "the warm-up cap {} is below the steady-state window {} or the minimum warm-up {}",
                cfg.max_warmup, cfg.window, min_warmup
            )));
        }
        Ok(WarmupController {
            cfg,
            min_warmup,
            runs: Vec::new(),
        })
    }

    /// Record one warm-up run and decide. A non-finite or non-positive
    /// value (a broken run) never settles the sequence.
    pub(crate) fn push(&mut self, throughput: f64) -> WarmupDecision {
        self.runs.push(throughput);
        let n = self.runs.len();
        let k = self.cfg.window;
        let broken = self.runs[n.saturating_sub(k)..]
            .iter()
            .any(|v| !(v.is_finite() && *v > 0.0));
        if n >= self.min_warmup
            && n >= k
            && !broken
            && judge(&self.runs[n - k..], &self.cfg)
                .is_some_and(|(steady, _, drift)| steady && drift.abs() <= self.cfg.max_drift)
        {
            return WarmupDecision::Settled { runs: n };
        }
        if n >= self.cfg.max_warmup {
            return WarmupDecision::Capped { runs: n };
        }
        WarmupDecision::Continue
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_p_matches_enumeration() {
        // n = 4: 24 permutations; S = 6 only for the identity (and -6 for
        // its reverse): P(|S| >= 6) = 2/24. S = 4: 3 permutations each side.
        assert!((exact_p(4, 6) - 2.0 / 24.0).abs() < 1e-12);
        assert!((exact_p(4, 4) - 8.0 / 24.0).abs() < 1e-12);
        assert!((exact_p(5, 10) - 2.0 / 120.0).abs() < 1e-12);
        assert!((exact_p(5, 0) - 1.0).abs() < 1e-12);
        // The distribution sums to 1 for a larger n.
        assert!((exact_p(30, 0) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn mann_kendall_signs_and_slope() {
        let up = mann_kendall(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        assert_eq!(up.s, 15.0);
        assert!(up.p < 0.01, "{up:?}");
        assert!((up.sen_slope - 1.0).abs() < 1e-12);
        let down = mann_kendall(&[6.0, 5.0, 4.0, 3.0, 2.0, 1.0]).unwrap();
        assert_eq!(down.s, -15.0);
        assert!((down.p - up.p).abs() < 1e-12);
        assert!(mann_kendall(&[1.0, 2.0]).is_none());
        assert!(mann_kendall(&[1.0, f64::NAN, 2.0]).is_none());
        // Normal approximation path: a long rising sequence.
        let long: Vec<f64> = (0..80).map(|i| i as f64).collect();
        assert!(mann_kendall(&long).unwrap().p < 1e-10);
        let flat = vec![3.0; 80];
        assert_eq!(mann_kendall(&flat).unwrap().p, 1.0);
    }

    #[test]
    fn finds_the_ramp_of_the_issue() {
        // A 64 MB memset loop from issue 10 (GB/s): the LLC slowly fills.
        let runs = [
            9.0, 9.4, 9.9, 10.9, 12.9, 16.0, 19.0, 21.0, 20.0, 25.0, 26.0, 25.0,
        ];
        let s = steady_state(&runs, &SteadyConfig::default()).unwrap();
        assert!(s.warmup >= 6, "{s:?}");
        // The clear_pages sequence never settles within 6 runs.
        let cp = [9.0, 13.1, 13.5, 16.9, 21.3, 24.5];
        let s = steady_state(&cp, &SteadyConfig::default()).unwrap();
        assert!(!s.settled, "{s:?}");
        // Flat at ~9 GB/s (256 MB): no warm-up needed.
        let flat = [9.0, 9.1, 8.9, 9.0, 9.05, 8.95, 9.02];
        let s = steady_state(&flat, &SteadyConfig::default()).unwrap();
        assert_eq!((s.warmup, s.settled), (0, true), "{s:?}");
    }

    #[test]
    fn a_cold_first_run_is_warm_up_even_in_noise() {
        // 64 MB clear_pages on this (loaded) machine, GB/s: first touch,
        // then heavy contention noise the trend test cannot see through.
        let runs = [0.8, 6.4, 4.8, 7.5, 4.8, 4.0, 5.8, 6.2, 4.9, 6.9, 5.0, 10.9];
        let s = steady_state(&runs, &SteadyConfig::default()).unwrap();
        assert_eq!((s.warmup, s.settled), (1, true), "{s:?}");
        // A merely low first run is not an outlier.
        let runs = [5.5, 6.4, 4.8, 7.5, 4.8, 4.0, 5.8, 6.2, 4.9, 6.9, 5.0, 10.9];
        let s = steady_state(&runs, &SteadyConfig::default()).unwrap();
        assert_eq!(s.warmup, 0, "{s:?}");
    }

    #[test]
    fn a_tiny_significant_drift_is_tolerated() {
        // Strictly rising by 0.1% per run: significant but within 2%.
        let runs: Vec<f64> = (0..8).map(|i| 100.0 * (1.0 + 0.001 * i as f64)).collect();
        let s = steady_state(&runs, &SteadyConfig::default()).unwrap();
        assert!(s.settled && s.warmup == 0 && s.trend_p < 0.05, "{s:?}");
    }

    #[test]
    fn controller_settles_after_the_ramp_and_caps() {
        let cfg = SteadyConfig::default();
        let mut c = WarmupController::new(cfg, 1).unwrap();
        let seq = [
            5.0, 7.0, 8.5, 9.3, 9.7, 9.9, 10.0, 10.05, 9.98, 10.02, 9.99, 10.01,
        ];
        let mut decided = None;
        for x in seq {
            match c.push(x) {
                WarmupDecision::Continue => {}
                d => {
                    decided = Some(d);
                    break;
                }
            }
        }
        match decided {
            Some(WarmupDecision::Settled { runs }) => assert!((7..=12).contains(&runs), "{runs}"),
            d => panic!("{d:?}"),
        }
        let mut c = WarmupController::new(
            SteadyConfig {
                max_warmup: 8,
                ..cfg
            },
            1,
        )
        .unwrap();
        let mut last = WarmupDecision::Continue;
        for i in 0..8 {
            last = c.push(10.0 * 1.1f64.powi(i));
        }
        assert_eq!(last, WarmupDecision::Capped { runs: 8 });
        assert!(WarmupController::new(SteadyConfig { window: 4, ..cfg }, 1).is_err());
    }

    #[test]
    fn controller_does_not_settle_on_a_noisy_ramp() {
        // Host warm-up runs measured here (GB/s): not monotone, so the
        // 5-run Mann-Kendall test cannot reject, but the drift is huge.
        let mut c = WarmupController::new(SteadyConfig::default(), 1).unwrap();
        for x in [1.5, 9.0, 6.7, 5.6] {
            assert_eq!(c.push(x), WarmupDecision::Continue);
        }
        assert_eq!(c.push(22.2), WarmupDecision::Continue);
        // Noise without a trend settles.
        let mut c = WarmupController::new(SteadyConfig::default(), 1).unwrap();
        let d: Vec<_> = [9.5, 9.4, 9.6, 9.45, 9.55].map(|x| c.push(x)).to_vec();
        assert_eq!(d[4], WarmupDecision::Settled { runs: 5 });
    }
}
