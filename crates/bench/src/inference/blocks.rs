//! The paired estimator of an A/B bench in one guest: one value per ABBA
//! block, the log of B's time over A's (both calls of each side summed), so
//! a drift of the machine that is linear over a block cancels inside it.
//!
//! The estimate is the Hodges-Lehmann shift (the median of the Walsh
//! averages) and its interval the distribution-free one from the
//! Wilcoxon signed-rank statistic: it holds for any symmetric
//! distribution of the block values, heavy tails included, where a t
//! interval is thrown by one preempted block. Many blocks (a small call
//! gives tens of thousands) are first averaged in consecutive groups, at
//! most [`MAX_GROUPS`]: the Walsh averages are quadratic in their number,
//! and a group mean is only more symmetric than its blocks.
use statrs::distribution::{ContinuousCDF, Normal};

/// Most values the Walsh averages are taken over (about 500k averages).
pub(crate) const MAX_GROUPS: usize = 1000;
/// Fewest blocks an interval is given for.
pub(crate) const MIN_BLOCKS: usize = 6;

/// The shift of B against A in log time, with its interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Shift {
    /// Hodges-Lehmann estimate of the log time ratio B/A.
    pub est: f64,
    /// Its 1-alpha interval (log time).
    pub lo: f64,
    pub hi: f64,
    /// The change in log time this design detects with power 0.8 at the
    /// same alpha (two-sided): (z(1-alpha/2) + z(0.8)) times the standard
    /// error of the estimate.
    pub mde: f64,
    /// Blocks used and the groups they were averaged into.
    pub blocks: usize,
    pub groups: usize,
}

impl Shift {
    /// The estimate and its interval as throughput changes of B against
    /// A, percent: a longer time is a lower throughput, so `hi` gives the
    /// interval's lower end.
    pub(crate) fn throughput_pct(&self) -> (f64, [f64; 2]) {
        (
            throughput_pct(self.est),
            [throughput_pct(self.hi), throughput_pct(self.lo)],
        )
    }
}

fn z(p: f64) -> f64 {
    Normal::standard().inverse_cdf(p)
}

/// Consecutive blocks averaged into at most `MAX_GROUPS` groups of equal
/// size; a last group shorter than half of one joins the one before it.
fn grouped(x: &[f64]) -> Vec<f64> {
    if x.len() <= MAX_GROUPS {
        return x.to_vec();
    }
    let per = x.len().div_ceil(MAX_GROUPS);
    let mut out: Vec<f64> = x.chunks(per).map(crate::stats::mean).collect();
    let tail = x.len() % per;
    if tail > 0 && tail < per / 2 && out.len() >= 2 {
        let (t, p) = (out.pop().unwrap_or(0.0), out.pop().unwrap_or(0.0));
        let w = tail as f64 / (per + tail) as f64;
        out.push(p * (1.0 - w) + t * w);
    }
    out
}

/// Hodges-Lehmann shift of `x` (log time ratios, one per block) with its
/// 1-`alpha` interval; `None` with fewer than [`MIN_BLOCKS`] finite values.
pub(crate) fn shift(x: &[f64], alpha: f64) -> Option<Shift> {
    if x.len() < MIN_BLOCKS || x.iter().any(|v| !v.is_finite()) || !(0.0..1.0).contains(&alpha) {
        return None;
    }
    let g = grouped(x);
    let n = g.len();
    let mut walsh = Vec::with_capacity(n * (n + 1) / 2);
    for i in 0..n {
        for j in i..n {
            walsh.push((g[i] + g[j]) / 2.0);
        }
    }
    walsh.sort_by(f64::total_cmp);
    let m = walsh.len();
    let est = crate::stats::median(&walsh);
    // Wilcoxon signed-rank: the interval runs from the k-th smallest to
    // the k-th largest Walsh average (normal approximation of W, exact
    // enough from n = 6 on for the 95% level used here).
    let nf = n as f64;
    let mean_w = nf * (nf + 1.0) / 4.0;
    let sd_w = (nf * (nf + 1.0) * (2.0 * nf + 1.0) / 24.0).sqrt();
    let za = z(1.0 - alpha / 2.0);
    let k = (mean_w - za * sd_w).floor().max(0.0) as usize;
    let k = k.min(m.saturating_sub(1) / 2);
    let (lo, hi) = (walsh[k], walsh[m - 1 - k]);
    // The interval's half-width is za standard errors.
    let se = (hi - lo) / (2.0 * za);
    Some(Shift {
        est,
        lo,
        hi,
        mde: (za + z(0.8)) * se,
        blocks: x.len(),
        groups: n,
    })
}

/// The shift over several guests (`rotations`: each a fresh VM, both
/// images at other addresses, main and beside swapped every other one):
/// each guest's Hodges-Lehmann shift of its blocks, their mean, and the t
/// interval over the guests (R - 1 degrees of freedom). Blocks of one
/// guest share its code placement, which can move a small call by a few
/// percent whatever the code (identical trees flagged 4 times in 5 at 4 KB
/// with one guest): the guest, not the block, is the unit of replication.
/// `None` with fewer than 3 guests of [`MIN_BLOCKS`] blocks.
pub(crate) fn clustered(rotations: &[Vec<f64>], alpha: f64) -> Option<Shift> {
    use statrs::distribution::StudentsT;
    let h: Vec<Shift> = rotations.iter().filter_map(|r| shift(r, alpha)).collect();
    if h.len() < 3 {
        return None;
    }
    let ests: Vec<f64> = h.iter().map(|s| s.est).collect();
    let r = ests.len() as f64;
    let est = crate::stats::mean(&ests);
    let se = (crate::stats::variance(&ests) / r).sqrt();
    let t = StudentsT::new(0.0, 1.0, r - 1.0)
        .ok()?
        .inverse_cdf(1.0 - alpha / 2.0);
    let t80 = StudentsT::new(0.0, 1.0, r - 1.0).ok()?.inverse_cdf(0.8);
    Some(Shift {
        est,
        lo: est - t * se,
        hi: est + t * se,
        mde: (t + t80) * se,
        blocks: h.iter().map(|s| s.blocks).sum(),
        groups: h.len(),
    })
}

/// A log time ratio as the throughput change of B against A, in percent
/// (B slower: negative).
pub(crate) fn throughput_pct(log_time: f64) -> f64 {
    ((-log_time).exp() - 1.0) * 100.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::ChaCha8Rng;
    use rand_core::{Rng, SeedableRng};

    fn uniform(r: &mut ChaCha8Rng) -> f64 {
        (r.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Symmetric noise with heavy tails: normal, with one value in 20 from
    /// a normal ten times as wide (preempted-looking blocks).
    fn noisy(r: &mut ChaCha8Rng, n: usize, shift: f64, sd: f64) -> Vec<f64> {
        (0..n)
            .map(|_| {
                let u1 = uniform(r).max(1e-300);
                let u2 = uniform(r);
                let g = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                let wide = if uniform(r) < 0.05 { 10.0 } else { 1.0 };
                shift + g * sd * wide
            })
            .collect()
    }

    #[test]
    fn the_interval_covers_the_true_shift_95_times_in_100() {
        let mut r = ChaCha8Rng::seed_from_u64(37);
        for &(n, reps) in &[(12usize, 600usize), (200, 600), (3000, 100)] {
            let mut covered = 0;
            for _ in 0..reps {
                let x = noisy(&mut r, n, -0.014, 0.05);
                let s = shift(&x, 0.05).unwrap();
                assert!(s.lo <= s.est && s.est <= s.hi);
                if s.lo <= -0.014 && -0.014 <= s.hi {
                    covered += 1;
                }
            }
            let rate = covered as f64 / reps as f64;
            // 95% nominal; a interval half as wide would cover about 70%,
            // one twice as wide about 100%.
            assert!((0.91..=0.985).contains(&rate), "n {n}: coverage {rate}");
        }
    }

    #[test]
    fn the_mde_is_what_the_interval_can_resolve() {
        let mut r = ChaCha8Rng::seed_from_u64(1);
        let x = noisy(&mut r, 400, 0.0, 0.02);
        let s = shift(&x, 0.05).unwrap();
        let half = (s.hi - s.lo) / 2.0;
        assert!((s.mde / half - (1.96 + 0.8416) / 1.96).abs() < 1e-3);
        // A true shift of one MDE is flagged (interval excludes 0) in
        // about 80% of repetitions.
        let mut flagged = 0;
        for _ in 0..300 {
            let y = noisy(&mut r, 400, s.mde, 0.02);
            let t = shift(&y, 0.05).unwrap();
            if t.lo > 0.0 {
                flagged += 1;
            }
        }
        assert!((200..=280).contains(&flagged), "{flagged} of 300");
    }

    /// Guests with their own placement offset (sd 1%) and 200 blocks
    /// each: the interval over guests covers the true shift about 95 times
    /// in 100, where one guest's pooled blocks (the offset of that guest
    /// taken for the shift) would not.
    #[test]
    fn the_interval_over_guests_covers_despite_placement() {
        let mut r = ChaCha8Rng::seed_from_u64(7);
        let (mut covered, mut pooled, reps) = (0, 0, 300);
        for _ in 0..reps {
            let guests: Vec<Vec<f64>> = (0..8)
                .map(|_| {
                    let off = noisy(&mut r, 1, 0.0, 0.01)[0].clamp(-0.05, 0.05);
                    noisy(&mut r, 200, -0.01 + off, 0.03)
                })
                .collect();
            let s = clustered(&guests, 0.05).unwrap();
            covered += usize::from(s.lo <= -0.01 && -0.01 <= s.hi);
            let one = shift(&guests[0], 0.05).unwrap();
            pooled += usize::from(one.lo <= -0.01 && -0.01 <= one.hi);
        }
        let rate = covered as f64 / reps as f64;
        assert!((0.91..=0.985).contains(&rate), "coverage {rate}");
        assert!((pooled as f64 / reps as f64) < 0.8, "one guest: {pooled}");
        assert_eq!(clustered(&[vec![0.0; 10], vec![0.0; 10]], 0.05), None);
    }

    #[test]
    fn too_few_or_broken_blocks_give_no_interval() {
        assert_eq!(shift(&[0.1; 5], 0.05), None);
        assert_eq!(shift(&[0.1, 0.2, f64::NAN, 0.1, 0.1, 0.3], 0.05), None);
        let s = shift(&[0.1; 6], 0.05).unwrap();
        assert_eq!((s.lo, s.est, s.hi), (0.1, 0.1, 0.1));
    }

    #[test]
    fn groups_keep_the_mean_and_their_bound() {
        let x: Vec<f64> = (0..2503).map(|i| i as f64).collect();
        let g = grouped(&x);
        assert!(g.len() <= MAX_GROUPS);
        let total: f64 = x.iter().sum::<f64>() / x.len() as f64;
        // Equal-sized groups but the last: the mean of the group means is
        // within a group of the blocks' mean.
        assert!((crate::stats::mean(&g) - total).abs() < 3.0);
        assert!((throughput_pct(0.0)).abs() < 1e-12 && throughput_pct(0.1) < 0.0);
    }
}
