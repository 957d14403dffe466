//! Whether the host scheduler took the CPU away from a timed pass.
//!
//! A run's time is the guest's (or host's) counter from start to end, so a
//! pass during which the host preempts the thread (another task on the same
//! core, e.g. a compile on a 2-core machine) is timed with the other task's
//! time slice in it: on the PVM host of issue 10 such runs come out at a
//! third of the speed, a discrete cluster that dominates the variance. The
//! thread's involuntary context switches (`getrusage(RUSAGE_THREAD)`)
//! before and after the pass tell: a run with any is marked disturbed and
//! left out like a run disturbed by emulation. Dropping runs on an event
//! outside the routine does not bias the rest.

/// Involuntary context switches of the calling thread so far; `None` when
/// the kernel does not say (then no run is marked).
pub(crate) fn involuntary_switches() -> Option<u64> {
    // SAFETY: getrusage writes only into the zeroed struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage; RUSAGE_THREAD is Linux's.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) };
    (rc == 0).then(|| u64::try_from(u.ru_nivcsw).unwrap_or(0))
}

/// Switches between two readings (0 when either is unknown).
pub(crate) fn between(before: Option<u64>, after: Option<u64>) -> u64 {
    match (before, after) {
        (Some(b), Some(a)) => a.saturating_sub(b),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_this_thread_and_never_goes_back() {
        let a = involuntary_switches();
        assert!(a.is_some(), "getrusage(RUSAGE_THREAD) works on Linux");
        // Yielding is voluntary: at most preemptions by other tasks.
        std::thread::yield_now();
        let b = involuntary_switches();
        assert!(b >= a);
        assert_eq!(between(Some(3), Some(5)), 2);
        assert_eq!(between(Some(5), Some(3)), 0);
        assert_eq!(between(None, Some(3)), 0);
    }
}
