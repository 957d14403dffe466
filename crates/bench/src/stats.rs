//! THE statistics of hypclear's benchmarks: one mean, one variance, one
//! median, one [`Summary`] and the t-tests every comparison uses.
//!
//! * [`Summary`] — descriptive statistics of one sample set (mean, median,
//!   sample standard deviation, min, max, coefficient of variation).
//! * [`welch_t_test`] — Welch's unequal-variance t-test with the
//!   Welch–Satterthwaite degrees of freedom and a two-sided p-value from the
//!   Student's t distribution (`statrs`); [`paired_t_test`] — the
//!   one-sample t-test of paired differences. Both return a [`TTest`],
//!   which also gives the confidence interval of the difference.
//!
//! The session-level comparison built on them (verdicts, q values) is
//! `bench::inference::compare`.
//!
//! **Non-finite input:** [`Summary::of`] and [`welch_t_test`] reject samples
//! that contain NaN or ±infinity by returning `None`. A NaN usually means a
//! broken measurement, and silently dropping or sorting it would hide that.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};
use statrs::statistics::{Data, OrderStatistics, Statistics};

/// True when every sample is a finite number (no NaN, no ±infinity).
fn all_finite(samples: &[f64]) -> bool {
    samples.iter().all(|x| x.is_finite())
}

/// THE arithmetic mean of hypclear: the sum over the count; 0 for an
/// empty slice.
pub(crate) fn mean(x: &[f64]) -> f64 {
    if x.is_empty() {
        0.0
    } else {
        x.iter().sum::<f64>() / x.len() as f64
    }
}

/// Unbiased (n-1) sample variance, two-pass around [`mean`]; 0 for fewer
/// than two values.
pub(crate) fn variance(x: &[f64]) -> f64 {
    if x.len() < 2 {
        return 0.0;
    }
    let m = mean(x);
    x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (x.len() - 1) as f64
}

/// THE median of hypclear (order statistics from statrs): the mean of the
/// two middle values when the count is even, halved before adding so two
/// huge values cannot overflow. `samples` must be finite and non-empty.
pub(crate) fn median(samples: &[f64]) -> f64 {
    let mut data = Data::new(samples.to_vec());
    let n = samples.len();
    if n % 2 == 1 {
        data.order_statistic(n / 2 + 1)
    } else {
        data.order_statistic(n / 2) / 2.0 + data.order_statistic(n / 2 + 1) / 2.0
    }
}

/// Descriptive statistics of a set of benchmark samples.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Median; the mean of the two middle values when `n` is even.
    pub median: f64,
    /// Sample standard deviation (divides by `n - 1`); 0 when `n == 1`.
    pub stddev: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Coefficient of variation, `stddev / |mean|`; 0 when `mean == 0`.
    pub cv: f64,
}

impl Summary {
    /// Summarise `samples`.
    ///
    /// Returns `None` when `samples` is empty or contains NaN or ±infinity
    /// (see the module docs). A single sample has `stddev == 0` and
    /// `cv == 0`.
    ///
    /// The coefficient of variation divides by the absolute mean so that it
    /// is never negative; for the usual positive benchmark values this is
    /// simply `stddev / mean`.
    pub(crate) fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() || !all_finite(samples) {
            return None;
        }
        let n = samples.len();
        let mean = mean(samples);
        let stddev = variance(samples).sqrt();
        let cv = if mean == 0.0 {
            0.0
        } else {
            stddev / mean.abs()
        };
        Some(Summary {
            n,
            mean,
            median: median(samples),
            stddev,
            min: Statistics::min(samples),
            max: Statistics::max(samples),
            cv,
        })
    }
}

/// Result of a two-sided t-test of a difference.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct TTest {
    /// `diff / se`; negative when the first sample has the smaller mean.
    /// ±infinity when the standard error is 0 but the difference is not.
    pub t: f64,
    /// Degrees of freedom (Welch–Satterthwaite for [`welch_t_test`]).
    pub df: f64,
    /// Two-sided p-value, `P(|T| >= |t|)` for `T ~ Student's t(df)`.
    pub p_two_sided: f64,
    /// The estimated difference (first minus second mean; the mean of the
    /// differences when paired).
    pub diff: f64,
    /// Its standard error.
    pub se: f64,
}

impl TTest {
    /// The test of `diff` with standard error `se` and `df` degrees of
    /// freedom; `None` when the t distribution is undefined (df <= 0). A
    /// zero `se` is degenerate: no difference gives `t = 0, p = 1`, any
    /// other `t = ±inf, p = 0`.
    fn of(diff: f64, se: f64, df: f64) -> Option<TTest> {
        let (t, p_two_sided) = if se == 0.0 {
            if diff == 0.0 {
                (0.0, 1.0)
            } else {
                (f64::INFINITY.copysign(diff), 0.0)
            }
        } else {
            let dist = StudentsT::new(0.0, 1.0, df).ok()?;
            let t = diff / se;
            // sf(|t|) is the upper tail computed directly, which keeps small
            // p-values accurate (1 - cdf would cancel).
            let p = if t.is_finite() {
                (2.0 * dist.sf(t.abs())).clamp(0.0, 1.0)
            } else {
                0.0
            };
            (t, p)
        };
        Some(TTest {
            t,
            df,
            p_two_sided,
            diff,
            se,
        })
    }

    /// The two-sided `1 - alpha` confidence interval of the difference
    /// (the point itself when `se` is 0).
    pub(crate) fn interval(&self, alpha: f64) -> Option<(f64, f64)> {
        if self.se == 0.0 {
            return Some((self.diff, self.diff));
        }
        let dist = StudentsT::new(0.0, 1.0, self.df).ok()?;
        let h = dist.inverse_cdf(1.0 - alpha / 2.0) * self.se;
        Some((self.diff - h, self.diff + h))
    }
}

/// Welch's unequal-variance t-test of `a` against `b`.
///
/// Returns `None` when either sample has fewer than two values or contains
/// NaN or ±infinity.
///
/// Degrees of freedom follow Welch–Satterthwaite:
/// `df = (s_a + s_b)^2 / (s_a^2/(n_a-1) + s_b^2/(n_b-1))` with
/// `s_x = var(x)/n_x`. When both samples have zero variance the statistic is
/// degenerate: equal means give `t = 0, p = 1`, different means give
/// `t = ±inf, p = 0`, and `df` is reported as `n_a + n_b - 2`.
pub(crate) fn welch_t_test(a: &[f64], b: &[f64]) -> Option<TTest> {
    if a.len() < 2 || b.len() < 2 || !all_finite(a) || !all_finite(b) {
        return None;
    }
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let sa = variance(a) / na;
    let sb = variance(b) / nb;
    let se2 = sa + sb;
    let df = if se2 == 0.0 {
        na + nb - 2.0
    } else {
        // Normalised form of Welch–Satterthwaite: identical to the textbook
        // formula but immune to underflow of s_a^2 for tiny variances.
        let (ra, rb) = (sa / se2, sb / se2);
        1.0 / (ra * ra / (na - 1.0) + rb * rb / (nb - 1.0))
    };
    // df >= min(n_a, n_b) - 1 >= 1, so this cannot fail; stay panic-free.
    TTest::of(mean(a) - mean(b), se2.sqrt(), df)
}

/// The paired t-test: a one-sample t-test of the differences `d` against
/// 0 (df = n - 1). `None` for fewer than two differences or a
/// non-finite one.
pub(crate) fn paired_t_test(d: &[f64]) -> Option<TTest> {
    if d.len() < 2 || !all_finite(d) {
        return None;
    }
    let n = d.len() as f64;
    TTest::of(mean(d), (variance(d) / n).sqrt(), n - 1.0)
}

/// One session's guest/host: the mean of its undisturbed guest runs over
/// the mean of its undisturbed host runs (the host runs right beside the
/// guest cell, in the same session).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SessionRatio {
    pub session: u64,
    /// Mean guest throughput of the session (bytes/s).
    pub guest: f64,
    /// Mean host throughput of the session (bytes/s).
    pub host: f64,
    /// `guest / host`.
    pub ratio: f64,
}

/// guest/host as a paired estimate: sessions are the unit, so every
/// session gives one ratio of its own guest and host means and a drift
/// of the machine that hits both sides of a session cancels. Summarised
/// on the log scale, as compare summarises its pairs: the estimate is
/// the geometric mean of the session ratios and the interval the paired
/// t interval of their mean log ([`paired_t_test`], df = sessions - 1),
/// both taken back with `exp`. The median of the session ratios is kept
/// beside it (with 4 sessions a distribution-free interval of a median
/// would be [min, max] at 87.5%, so the interval is the t one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairedRatio {
    /// `exp(mean ln ratio)`.
    pub estimate: f64,
    /// `[lo, hi]` at [`PairedRatio::confidence`]; `None` with fewer than
    /// 2 sessions (no spread to judge).
    pub interval: Option<[f64; 2]>,
    /// Confidence of the interval (0.95).
    pub confidence: f64,
    /// Median of the session ratios.
    pub median: f64,
    /// The session ratios, in session order.
    pub sessions: Vec<SessionRatio>,
}

/// `exp` of the mean of `logs` and of its `1 - alpha` t interval (df =
/// n - 1; `None` with fewer than 2 values): a geometric mean with its
/// interval, for ratios and throughputs alike.
pub(crate) fn geometric_mean_interval(logs: &[f64], alpha: f64) -> (f64, Option<[f64; 2]>) {
    let interval = paired_t_test(logs)
        .and_then(|t| t.interval(alpha))
        .map(|(lo, hi)| [lo.exp(), hi.exp()]);
    (mean(logs).exp(), interval)
}

impl PairedRatio {
    /// The paired ratio of `sessions` (pairs whose guest or host mean is
    /// not a positive finite number are left out) at `1 - alpha`; `None`
    /// when no pair is left.
    pub fn of(sessions: &[SessionRatio], alpha: f64) -> Option<PairedRatio> {
        let ok = |v: f64| v.is_finite() && v > 0.0;
        let sessions: Vec<SessionRatio> = sessions
            .iter()
            .filter(|s| ok(s.guest) && ok(s.host))
            .map(|s| SessionRatio {
                ratio: s.guest / s.host,
                ..*s
            })
            .collect();
        if sessions.is_empty() {
            return None;
        }
        let logs: Vec<f64> = sessions.iter().map(|s| s.ratio.ln()).collect();
        let (estimate, interval) = geometric_mean_interval(&logs, alpha);
        Some(PairedRatio {
            estimate,
            interval,
            confidence: 1.0 - alpha,
            median: median(&sessions.iter().map(|s| s.ratio).collect::<Vec<_>>()),
            sessions,
        })
    }

    /// Whether `x` lies inside the interval (the estimate itself when
    /// there is none).
    pub fn contains(&self, x: f64) -> bool {
        match self.interval {
            Some([lo, hi]) => lo <= x && x <= hi,
            None => x == self.estimate,
        }
    }

    /// `"0.97 [0.94, 1.00]"`; `"0.97 (1 session)"` without an interval.
    pub fn text(&self) -> String {
        match self.interval {
            Some([lo, hi]) => format!("{:.2} [{lo:.2}, {hi:.2}]", self.estimate),
            None => format!("{:.2} ({} session)", self.estimate, self.sessions.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(actual: f64, expected: f64, tol: f64) -> bool {
        (actual - expected).abs() <= tol
    }

    macro_rules! assert_close {
        ($actual:expr, $expected:expr, $tol:expr) => {{
            let (a, e, t): (f64, f64, f64) = ($actual, $expected, $tol);
            assert!(
                close(a, e, t),
                "{} = {a:e}, expected {e:e} (tolerance {t:e})",
                stringify!($actual)
            );
        }};
    }

    /// Data set from the task brief (often used to illustrate Welch's test).
    const A: [f64; 10] = [19.8, 20.4, 19.6, 17.8, 18.5, 18.9, 18.3, 18.9, 19.5, 22.0];
    const B: [f64; 20] = [
        28.2, 26.6, 20.1, 23.3, 25.2, 22.1, 17.7, 27.6, 20.6, 13.7, 23.2, 17.5, 20.6, 18.0, 23.9,
        21.6, 24.3, 20.4, 23.9, 13.3,
    ];

    // ---------------------------------------------------------------- Summary

    #[test]
    fn summary_of_empty_is_none() {
        assert_eq!(Summary::of(&[]), None);
    }

    #[test]
    fn summary_rejects_non_finite() {
        assert_eq!(Summary::of(&[1.0, f64::NAN, 3.0]), None);
        assert_eq!(Summary::of(&[f64::NAN]), None);
        assert_eq!(Summary::of(&[1.0, f64::INFINITY]), None);
        assert_eq!(Summary::of(&[f64::NEG_INFINITY, 1.0]), None);
    }

    #[test]
    fn summary_of_single_sample() {
        let s = Summary::of(&[42.5]).unwrap();
        assert_eq!(
            s,
            Summary {
                n: 1,
                mean: 42.5,
                median: 42.5,
                stddev: 0.0,
                min: 42.5,
                max: 42.5,
                cv: 0.0,
            }
        );
    }

    #[test]
    fn summary_of_classic_set() {
        // [2,4,4,4,5,5,7,9]: mean 40/8 = 5; squared deviations
        // 9+1+1+1+0+0+4+16 = 32; sample variance 32/7; stddev sqrt(32/7)
        // = 2.138089935299395; median (4+5)/2 = 4.5; cv = stddev/5.
        let s = Summary::of(&[9.0, 2.0, 4.0, 5.0, 4.0, 7.0, 4.0, 5.0]).unwrap();
        assert_eq!(s.n, 8);
        assert_close!(s.mean, 5.0, 1e-12);
        assert_close!(s.median, 4.5, 1e-12);
        assert_close!(s.stddev, (32.0f64 / 7.0).sqrt(), 1e-12);
        assert_close!(s.stddev, 2.138_089_935_299_395, 1e-12);
        assert_close!(s.cv, 0.427_617_987_059_879, 1e-12);
        assert_eq!(s.min, 2.0);
        assert_eq!(s.max, 9.0);
    }

    #[test]
    fn summary_median_odd_and_even() {
        assert_eq!(Summary::of(&[3.0, 1.0, 2.0]).unwrap().median, 2.0);
        assert_eq!(Summary::of(&[4.0, 1.0, 3.0, 2.0]).unwrap().median, 2.5);
        assert_eq!(Summary::of(&[1.0, 10.0]).unwrap().median, 5.5);
        // Even count with huge values must not overflow.
        let big = Summary::of(&[f64::MAX, f64::MAX]).unwrap();
        assert_eq!(big.median, f64::MAX);
    }

    #[test]
    fn summary_of_one_to_four() {
        // mean 2.5, deviations ±1.5, ±0.5 -> ss = 5, var = 5/3,
        // stddev = 1.2909944487358056, cv = 0.5163977794943222.
        let s = Summary::of(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_close!(s.mean, 2.5, 1e-12);
        assert_close!(s.median, 2.5, 1e-12);
        assert_close!(s.stddev, 1.290_994_448_735_805_6, 1e-12);
        assert_close!(s.cv, 0.516_397_779_494_322_2, 1e-12);
    }

    #[test]
    fn summary_cv_is_zero_for_zero_mean_and_non_negative_otherwise() {
        let s = Summary::of(&[-1.0, 1.0]).unwrap();
        assert_eq!(s.mean, 0.0);
        assert_eq!(s.cv, 0.0);
        assert_close!(s.stddev, 2.0f64.sqrt(), 1e-12);
        let neg = Summary::of(&[-2.0, -4.0]).unwrap();
        assert!(neg.cv > 0.0);
    }

    #[test]
    fn summary_of_constant_samples() {
        let s = Summary::of(&[7.0; 5]).unwrap();
        assert_eq!(s.stddev, 0.0);
        assert_eq!(s.cv, 0.0);
        assert_eq!(s.median, 7.0);
    }

    #[test]
    fn summary_serde_field_names() {
        // Make sure the derive compiles with the names consumers rely on.
        fn is_serde<T: Serialize + for<'de> Deserialize<'de>>() {}
        is_serde::<Summary>();
        is_serde::<TTest>();
    }

    // ----------------------------------------------------------- Welch t-test

    #[test]
    fn welch_hand_computed_small_example() {
        // a = [1,2,3,4,5]:  mean 3, sample variance 10/4 = 2.5, s_a = 2.5/5 = 0.5
        // b = [2,4,6,8,10]: mean 6, sample variance 40/4 = 10,  s_b = 10/5  = 2
        // se^2 = 0.5 + 2 = 2.5
        // t  = (3 - 6) / sqrt(2.5) = -3 / 1.5811388300841898 = -1.8973665961010275
        // df = 2.5^2 / (0.5^2/4 + 2^2/4) = 6.25 / 1.0625 = 100/17 = 5.882352941176471
        // p  (mpmath betainc, and scipy ttest_ind(equal_var=False))
        //    = 0.10753119493062724...
        let r = welch_t_test(&[1.0, 2.0, 3.0, 4.0, 5.0], &[2.0, 4.0, 6.0, 8.0, 10.0]).unwrap();
        assert_close!(r.t, -3.0 / 2.5f64.sqrt(), 1e-9);
        assert_close!(r.t, -1.897_366_596_101_027_5, 1e-9);
        assert_close!(r.df, 100.0 / 17.0, 1e-9);
        assert_close!(r.p_two_sided, 0.107_531_194_930_627_24, 1e-9);
    }

    #[test]
    fn welch_reference_data_set() {
        // Exact arithmetic (Python fractions):
        //   mean a = 1937/100 = 19.37,  var a = 1449/1000   = 1.449
        //   mean b = 2159/100 = 21.59,  var b = 161529/9500 = 17.00305263...
        //   se^2 = 1.449/10 + 17.00305263/20 = 9453/9500
        //   t  = -2.22 / sqrt(9453/9500) = -2.2255120399698532...
        //   df = 35661100/1454093 = 24.524634944257348...
        //   p  = I_{df/(df+t^2)}(df/2, 1/2) = 0.035484530830010218... (mpmath, 40 digits)
        // scipy.stats.ttest_ind(a, b, equal_var=False) prints
        //   statistic=-2.225512039969852, pvalue=0.035484530830010394, df=24.524634944257343.
        // (The often-quoted "t = -2.46, p = 0.0211" does NOT belong to this
        // data set; Student's equal-variance test gives t = -1.654, p = 0.109.)
        let r = welch_t_test(&A, &B).unwrap();
        assert_close!(r.t, -2.225_512_039_969_853_2, 1e-9);
        assert_close!(r.df, 35_661_100.0 / 1_454_093.0, 1e-9);
        assert_close!(r.p_two_sided, 0.035_484_530_830_010_22, 1e-9);
        // Three significant digits, as a sanity check of the reading above.
        assert_eq!(format!("{:.3}", r.t), "-2.226");
        assert_eq!(format!("{:.4}", r.p_two_sided), "0.0355");
    }

    #[test]
    fn welch_is_antisymmetric() {
        let ab = welch_t_test(&A, &B).unwrap();
        let ba = welch_t_test(&B, &A).unwrap();
        assert_close!(ab.t, -ba.t, 1e-12);
        assert_close!(ab.df, ba.df, 1e-9);
        assert_close!(ab.p_two_sided, ba.p_two_sided, 1e-12);
    }

    #[test]
    fn welch_needs_two_samples_each() {
        assert_eq!(welch_t_test(&[1.0], &[1.0, 2.0]), None);
        assert_eq!(welch_t_test(&[1.0, 2.0], &[1.0]), None);
        assert_eq!(welch_t_test(&[], &[]), None);
    }

    #[test]
    fn welch_rejects_non_finite() {
        assert_eq!(welch_t_test(&[1.0, f64::NAN], &[1.0, 2.0]), None);
        assert_eq!(welch_t_test(&[1.0, 2.0], &[f64::INFINITY, 2.0]), None);
    }

    #[test]
    fn welch_zero_variance_both_sides() {
        let same = welch_t_test(&[5.0, 5.0, 5.0], &[5.0, 5.0]).unwrap();
        assert_eq!(same.t, 0.0);
        assert_eq!(same.p_two_sided, 1.0);
        assert_eq!(same.df, 3.0);

        let lower = welch_t_test(&[4.0, 4.0], &[5.0, 5.0]).unwrap();
        assert_eq!(lower.t, f64::NEG_INFINITY);
        assert_eq!(lower.p_two_sided, 0.0);

        let higher = welch_t_test(&[6.0, 6.0], &[5.0, 5.0]).unwrap();
        assert_eq!(higher.t, f64::INFINITY);
        assert_eq!(higher.p_two_sided, 0.0);
    }

    #[test]
    fn welch_zero_variance_one_side() {
        // s_a = 0, so df = n_b - 1 = 2 exactly; t = (5 - 6) / sqrt(1/3).
        let r = welch_t_test(&[5.0, 5.0, 5.0], &[5.0, 6.0, 7.0]).unwrap();
        assert_close!(r.df, 2.0, 1e-12);
        assert_close!(r.t, -(3.0f64).sqrt(), 1e-12);
        // t(2) two-sided tail: p = 1 - |t|/sqrt(2 + t^2) = 1 - sqrt(3)/sqrt(5).
        assert_close!(r.p_two_sided, 1.0 - (3.0f64 / 5.0).sqrt(), 1e-9);
    }

    #[test]
    fn welch_tiny_variances_do_not_underflow_df() {
        // s_a^2 would underflow to 0 in the textbook formula.
        let a = [1.0, 1.0 + 1e-160];
        let b = [1.0, 1.0 + 1e-160];
        let r = welch_t_test(&a, &b).unwrap();
        assert!(r.df.is_finite() && r.df > 0.0, "df = {}", r.df);
        assert_eq!(r.p_two_sided, 1.0);
    }

    #[test]
    fn welch_p_is_tiny_for_well_separated_samples() {
        let r = welch_t_test(&[1.0, 1.1, 0.9, 1.05], &[10.0, 10.1, 9.9, 10.05]).unwrap();
        assert!(r.t < -100.0);
        assert!(r.p_two_sided < 1e-8 && r.p_two_sided >= 0.0);
    }

    // ------------------------------------------------------- paired ratio

    fn pair(session: u64, guest: f64, host: f64) -> SessionRatio {
        SessionRatio {
            session,
            guest,
            host,
            ratio: 0.0,
        }
    }

    #[test]
    fn paired_ratio_hand_computed() {
        // Session ratios 0.95, 1.00, 1.05 (guest and host both drift by
        // session: 40/42.1, 60/60, 50/47.6); ln: -0.051293, 0, 0.048790;
        // mean -0.000834 -> 0.99917; sd 0.050047, se 0.028895,
        // t_0.975(2) = 4.302653 -> half-width 0.124324 ->
        // [exp(-0.125158), exp(0.123489)] = [0.88236, 1.13144].
        let r = PairedRatio::of(
            &[
                pair(0, 40.0, 40.0 / 0.95),
                pair(1, 60.0, 60.0),
                pair(2, 50.0, 50.0 / 1.05),
            ],
            0.05,
        )
        .unwrap();
        assert_close!(r.estimate, 0.999_166, 1e-5);
        let [lo, hi] = r.interval.unwrap();
        assert_close!(lo, 0.882_36, 1e-4);
        assert_close!(hi, 1.131_43, 1e-4);
        assert_close!(r.median, 1.0, 1e-12);
        assert_eq!(r.sessions.len(), 3);
        assert_close!(r.sessions[0].ratio, 0.95, 1e-12);
        assert_eq!(r.text(), "1.00 [0.88, 1.13]");
        assert!(r.contains(1.1) && !r.contains(0.8));
        assert_eq!(r.confidence, 0.95);
    }

    #[test]
    fn paired_ratio_cancels_a_shared_session_drift() {
        // Guest 1.5x apart between sessions (issue 26: 45 | 65 | 42 GB/s),
        // the host with it: the ratio is exact, the interval a point.
        let r = PairedRatio::of(
            &[
                pair(0, 45.0, 50.0),
                pair(1, 65.0, 65.0 / 0.9),
                pair(2, 42.0, 42.0 / 0.9),
            ],
            0.05,
        )
        .unwrap();
        let [lo, hi] = r.interval.unwrap();
        assert_close!(r.estimate, 0.9, 1e-12);
        assert_close!(lo, 0.9, 1e-9);
        assert_close!(hi, 0.9, 1e-9);
    }

    #[test]
    fn paired_ratio_edge_cases() {
        assert_eq!(PairedRatio::of(&[], 0.05), None);
        assert_eq!(PairedRatio::of(&[pair(0, 0.0, 1.0)], 0.05), None);
        // A broken pair is left out; one pair left: no interval.
        let r = PairedRatio::of(&[pair(0, 2.0, 4.0), pair(1, f64::NAN, 1.0)], 0.05).unwrap();
        assert_eq!(r.interval, None);
        assert_eq!(r.text(), "0.50 (1 session)");
        assert!(r.contains(0.5));
    }
}
