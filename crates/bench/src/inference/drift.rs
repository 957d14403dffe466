//! Host drift between two separate invocations.
//!
//! The host baseline runs the same routine natively in every session, so
//! when A and B come from different invocations a change of the host rows
//! says the machine moved (frequency, thermal state, neighbours), not the
//! code. The normalized comparison tests the per-session guest/host ratio
//! instead of the guest throughput: a drift common to guest and host
//! cancels (at the price of adding the host's own noise).
use super::compare::{Comparison, Config, compare};
use super::{Error, Session};
use serde::Serialize;

/// Whether the host baseline moved, and the comparisons to show.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct HostDrift {
    /// Host rows, B against A.
    pub host: Comparison,
    /// The host moved: its change is shown ((R) or (I)), not merely
    /// possible. Then the guest rows should carry a note and the
    /// normalized comparison should be offered.
    pub moved: bool,
    /// Guest rows, B against A.
    pub guest: Comparison,
    /// Per-session guest/host ratio, B against A; `None` when the guest
    /// and host sessions do not line up (different counts per side).
    pub normalized: Option<Comparison>,
}

/// Per-session guest mean / host mean, as one-run sessions.
fn ratios(guest: &[Session], host: &[Session]) -> Option<Vec<Session>> {
    if guest.len() != host.len() {
        return None;
    }
    guest
        .iter()
        .zip(host)
        .map(|(g, h)| match (g.mean(), h.mean()) {
            (Some(g), Some(h)) if h > 0.0 => Some(Session::new(vec![g / h])),
            _ => None,
        })
        .collect()
}

/// Check the host rows of a cell and compare the guest rows both raw and
/// normalized by the host of the same session. Session `i` of a side's
/// guest and host vectors must be the same session (bench runs the host
/// baseline right after the guest cell in every session).
pub(crate) fn host_drift(
    host_a: &[Session],
    host_b: &[Session],
    guest_a: &[Session],
    guest_b: &[Session],
    cfg: &Config,
) -> Result<HostDrift, Error> {
    let host = compare(host_a, host_b, cfg)?;
    let guest = compare(guest_a, guest_b, cfg)?;
    let normalized = match (ratios(guest_a, host_a), ratios(guest_b, host_b)) {
        (Some(a), Some(b)) => Some(compare(&a, &b, cfg)?),
        _ => None,
    };
    Ok(HostDrift {
        moved: host.verdict.moved(),
        host,
        guest,
        normalized,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inference::{Design, compare::Verdict};

    fn side(means: &[f64], scale: f64) -> Vec<Session> {
        means
            .iter()
            .map(|m| Session::new(vec![m * scale, m * scale * 1.001]))
            .collect()
    }

    #[test]
    fn a_machine_wide_slowdown_is_host_drift() {
        // Session noise shared by guest and host (same session), and B's
        // machine is 6% slower for both: the guest "regression" is drift.
        let noise_a = [1.0, 1.02, 0.99, 1.01, 0.985, 1.015];
        let noise_b = [1.01, 0.995, 1.02, 0.99, 1.0, 1.005];
        let cfg = Config {
            design: Design::Independent,
            ..Config::default()
        };
        let d = host_drift(
            &side(&noise_a, 20.0),
            &side(&noise_b, 20.0 * 0.94),
            &side(&noise_a, 10.0),
            &side(&noise_b, 10.0 * 0.94),
            &cfg,
        )
        .unwrap();
        assert!(d.moved, "{d:?}");
        assert_eq!(d.guest.verdict, Verdict::Regression);
        let n = d.normalized.unwrap();
        assert!(n.change_pct.abs() < 0.01, "{n:?}");
        assert_eq!(n.verdict, Verdict::Equivalent);
    }

    #[test]
    fn a_steady_host_is_not_drift() {
        let h = [1.0, 1.002, 0.999, 1.001];
        let cfg = Config {
            design: Design::Independent,
            ..Config::default()
        };
        let d = host_drift(
            &side(&h, 20.0),
            &side(&h, 20.0),
            &side(&h, 10.0),
            &side(&h, 9.0),
            &cfg,
        )
        .unwrap();
        assert!(!d.moved);
        assert_eq!(d.guest.verdict, Verdict::Regression);
        assert!(
            host_drift(
                &side(&h, 1.0),
                &side(&h, 1.0),
                &side(&h[..3], 1.0),
                &side(&h, 1.0),
                &cfg
            )
            .unwrap()
            .normalized
            .is_none()
        );
    }
}
