//! Whether the host scheduler took the CPU away from a timed pass.
//!
//! A run's time is the guest's (or host's) counter from start to end, so a
//! pass during which the host preempts the thread (another task on the same
//! core, e.g. a compile on a 2-core machine) is timed with the other task's
//! time slice in it: on the PVM host of issue 10 such runs come out at a
//! third of the speed, a discrete cluster that dominates the variance. The
//! thread's involuntary context switches (`getrusage(RUSAGE_THREAD)`)
//! before and after the pass tell that it happened, and the thread's CPU
//! time (`CLOCK_THREAD_CPUTIME_ID`, guest time included) against the wall
//! time says how much of the pass it cost: a run that lost more than
//! [`OFF_CPU_TOLERANCE`] of its time is disturbed, and repeated like a run
//! disturbed by emulation (issue 26). Dropping runs on an event outside the
//! routine does not bias the rest.

/// Involuntary context switches of the calling thread so far; `None` when
/// the kernel does not say (then no run is marked).
pub(crate) fn involuntary_switches() -> Option<u64> {
    // SAFETY: getrusage writes only into the zeroed struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage; RUSAGE_THREAD is Linux's.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) };
    (rc == 0).then(|| u64::try_from(u.ru_nivcsw).unwrap_or(0))
}

/// The share of a pass's wall time its thread may spend off the CPU (run
/// queue waits behind other tasks) and still count as undisturbed: the
/// run is then at most this much slow. A brief kernel-thread preemption
/// of a 10 ms pass here costs 0.04-0.3 ms; a time slice of another task,
/// milliseconds.
pub(crate) const OFF_CPU_TOLERANCE: f64 = 0.01;

/// This thread's CPU time in ns (guest time of a vCPU thread included);
/// `None` when the clock is unavailable.
fn thread_cpu_ns() -> Option<u64> {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only into the timespec it is given.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    (rc == 0).then(|| {
        u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_nsec).unwrap_or(0)
    })
}

/// What the scheduler did to this thread over a stretch of time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Off {
    /// Involuntary context switches.
    pub switches: u64,
    /// Wall time of the stretch, ns.
    pub wall_ns: f64,
    /// Wall time minus the thread's CPU time, ns (0 when unknown).
    pub off_cpu_ns: f64,
}

impl Off {
    pub(crate) fn add(&mut self, o: Off) {
        self.switches += o.switches;
        self.wall_ns += o.wall_ns;
        self.off_cpu_ns += o.off_cpu_ns;
    }

    /// Preempted for more than [`OFF_CPU_TOLERANCE`] of the wall time.
    pub(crate) fn disturbed(&self) -> bool {
        self.switches > 0 && self.off_cpu_ns > OFF_CPU_TOLERANCE * self.wall_ns
    }
}

/// A stopwatch of the calling thread's scheduling: start before a timed
/// pass, [`Watch::stop`] after it, on the same thread.
pub(crate) struct Watch {
    switches: Option<u64>,
    cpu: Option<u64>,
    wall: std::time::Instant,
}

impl Watch {
    pub(crate) fn start() -> Watch {
        Watch {
            switches: involuntary_switches(),
            cpu: thread_cpu_ns(),
            wall: std::time::Instant::now(),
        }
    }

    pub(crate) fn stop(&self) -> Off {
        let wall_ns = self.wall.elapsed().as_nanos() as f64;
        let cpu = match (self.cpu, thread_cpu_ns()) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64),
            _ => None,
        };
        Off {
            switches: between(self.switches, involuntary_switches()),
            wall_ns,
            // Unknown CPU time: a switch counts as the whole pass.
            off_cpu_ns: cpu.map_or(wall_ns, |c| (wall_ns - c).max(0.0)),
        }
    }
}

/// Put the calling thread in SCHED_FIFO at priority 1 (above every
/// normal task, below every other real-time one) or back in SCHED_OTHER
/// (its niceness kept); `false` when refused (needs root or
/// CAP_SYS_NICE).
pub(crate) fn set_fifo(on: bool) -> bool {
    let (policy, prio) = match on {
        true => (libc::SCHED_FIFO, 1),
        false => (libc::SCHED_OTHER, 0),
    };
    let p = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: pid 0 is the calling thread; the kernel only reads `p`.
    unsafe { libc::sched_setscheduler(0, policy, &p) == 0 }
}

/// SCHED_FIFO for the life of the guard (a timed pass), when `on`: the
/// kernel's real-time throttling (95% of each second by default) still
/// leaves the other tasks their share if a pass should hang.
pub(crate) struct Fifo(bool);

impl Fifo {
    pub(crate) fn during(on: bool) -> Fifo {
        Fifo(on && set_fifo(true))
    }
}

impl Drop for Fifo {
    fn drop(&mut self) {
        if self.0 {
            set_fifo(false);
        }
    }
}

/// The calling thread's niceness.
pub(crate) fn nice() -> i32 {
    // SAFETY: getpriority on this thread touches no memory of ours.
    unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
}

/// Set the calling thread's niceness to `nice` (threads it creates later
/// inherit it: the host baseline's pass threads, extra vCPU threads).
/// Returns the niceness in effect afterwards, and whether `nice` was
/// refused (lowering it needs root, CAP_SYS_NICE or RLIMIT_NICE).
pub(crate) fn set_nice(nice: i32) -> (i32, bool) {
    // SAFETY: setpriority/getpriority on this thread (who = 0) touch no
    // memory of ours.
    let refused = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) } != 0;
    (self::nice(), refused)
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

    #[test]
    fn a_pass_is_disturbed_by_lost_time_not_by_a_switch() {
        let off = |switches, off_cpu_ns| Off {
            switches,
            wall_ns: 10e6,
            off_cpu_ns,
        };
        // A 40 us kworker preemption of a 10 ms pass: kept.
        assert!(!off(1, 40e3).disturbed());
        // Another task's time slice: disturbed.
        assert!(off(2, 3e6).disturbed());
        // Off-CPU time without a switch is a blocking wait, not preemption.
        assert!(!off(0, 3e6).disturbed());
        let mut sum = off(1, 40e3);
        sum.add(off(1, 80e3));
        assert_eq!((sum.switches, sum.wall_ns), (2, 20e6));
        assert!(!sum.disturbed());
        sum.add(off(1, 3e6));
        assert!(sum.disturbed());
        // A busy stretch on this thread loses little.
        let w = Watch::start();
        let mut x = 0u64;
        for i in 0..1_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let o = w.stop();
        assert!(o.wall_ns > 0.0 && o.off_cpu_ns <= o.wall_ns, "{o:?}");
    }
}
