//! Per-vCPU watchdog: a guest that stops making progress blocks `KVM_RUN`
//! forever (a spinning guest never exits). When a deadline passes, a POSIX
//! timer of the vCPU thread's keeps signalling that thread, every [`POLL`],
//! until it is disarmed; the signal makes `KVM_RUN` return `EINTR`, and the
//! vCPU loop reports a timeout together with the guest's registers.
//!
//! The vCPU loop arms it once per wait (boot, command, exit), so it measures
//! progress, not exits. Arming and disarming are one `timer_settime` each
//! (about 1.5 µs here); there is no watchdog thread to start (one cost
//! 0.1 ms on the way to every VM's first hypercall) or to wake.
//!
//! Soundness: the timer signals its thread by thread ID (`SIGEV_THREAD_ID`).
//! The kernel holds a reference to that thread, not the number, so a timer
//! that outlives its thread signals nobody; the vCPU loop disarms it before
//! it leaves the wait anyway, and a vCPU used from another thread gets a new
//! watchdog (see `Vcpu::run`).
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often the timer signals the thread once the deadline has passed (a
/// signal may land just before the thread enters KVM_RUN: the next one
/// comes `POLL` later).
pub(crate) const POLL: Duration = Duration::from_millis(20);

/// Signal used to kick a vCPU thread out of KVM_RUN.
fn kick_signal() -> libc::c_int {
    vmm_sys_util::signal::SIGRTMIN()
}

extern "C" fn on_kick(_: libc::c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {}

static INSTALL: Once = Once::new();
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// A POSIX timer id: a process-wide handle, valid from any thread until
/// `timer_delete`.
struct Timer(libc::timer_t);

// SAFETY: a timer id names a process-wide kernel object; timer_settime and
// timer_delete may be called from any thread of the process.
unsafe impl Send for Timer {}

pub struct Watchdog {
    /// None when no timer could be made (the run then has no watchdog,
    /// as announced on stderr).
    timer: Option<Timer>,
    /// The deadline of the last `arm`.
    deadline: Option<Instant>,
    /// Whether the deadline had passed when the timer was disarmed.
    fired_at_disarm: bool,
}

impl Watchdog {
    /// A watchdog for the calling thread (the one that will call KVM_RUN).
    pub fn for_current_thread() -> Watchdog {
        INSTALL.call_once(|| {
            // If installing fails the default action of a real-time signal
            // would kill the process, so never arm a timer in that case.
            match vmm_sys_util::signal::register_signal_handler(kick_signal(), on_kick) {
                Ok(()) => INSTALLED.store(true, Ordering::SeqCst),
                Err(e) => crate::errln!("hypclear: warning: no watchdog (signal handler: {e})"),
            }
        });
        let timer = if INSTALLED.load(Ordering::SeqCst) {
            create_timer()
                .map_err(|e| crate::errln!("hypclear: warning: no watchdog (timer_create: {e})"))
                .ok()
        } else {
            None
        };
        Watchdog {
            timer,
            deadline: None,
            fired_at_disarm: false,
        }
    }

    /// Start (or restart) the countdown. A deadline that does not fit
    /// (centuries away) saturates: it never fires.
    pub fn arm(&mut self, timeout: Duration) {
        self.deadline = Instant::now().checked_add(timeout);
        self.fired_at_disarm = false;
        let Some(t) = &self.timer else { return };
        let Some(value) = timespec(timeout) else {
            // Too far away for the kernel's time type: never fires.
            set_timer(t, zero(), zero());
            return;
        };
        set_timer(t, value, timespec(POLL).unwrap_or(value));
    }

    /// Stop the countdown; when this returns, the timer sends no more
    /// signals (one already sent may still be delivered: the vCPU loop
    /// treats an interrupted KVM_RUN before the deadline as spurious).
    pub fn disarm(&mut self) {
        if let Some(t) = &self.timer {
            set_timer(t, zero(), zero());
        }
        self.fired_at_disarm = self.passed();
        self.deadline = None;
    }

    /// Whether the deadline of the last `arm` has passed (while armed), or
    /// had passed when it was disarmed.
    pub fn fired(&self) -> bool {
        self.fired_at_disarm || self.passed()
    }

    fn passed(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Some(t) = self.timer.take() {
            // SAFETY: `t` came from timer_create and is deleted only here.
            unsafe { libc::timer_delete(t.0) };
        }
    }
}

/// A CLOCK_MONOTONIC timer that signals the calling thread.
fn create_timer() -> std::io::Result<Timer> {
    // SAFETY: a zeroed sigevent is a valid value to fill in.
    let mut ev: libc::sigevent = unsafe { std::mem::zeroed() };
    ev.sigev_notify = libc::SIGEV_THREAD_ID;
    ev.sigev_signo = kick_signal();
    // SAFETY: gettid has no preconditions.
    ev.sigev_notify_thread_id = unsafe { libc::gettid() };
    let mut id: libc::timer_t = std::ptr::null_mut();
    // SAFETY: `ev` and `id` are valid for the call; the thread named is
    // the calling one, which exists.
    if unsafe { libc::timer_create(libc::CLOCK_MONOTONIC, &mut ev, &mut id) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Timer(id))
}

fn set_timer(t: &Timer, value: libc::timespec, interval: libc::timespec) {
    let spec = libc::itimerspec {
        it_interval: interval,
        it_value: value,
    };
    // SAFETY: `t` is a live timer id (deleted only on drop); `spec` is valid.
    // It cannot fail for a live id and a normalized value.
    unsafe { libc::timer_settime(t.0, 0, &spec, std::ptr::null_mut()) };
}

fn zero() -> libc::timespec {
    libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    }
}

/// `d` as a timespec (at least 1 ns: zero would disarm), if it fits.
fn timespec(d: Duration) -> Option<libc::timespec> {
    let d = d.max(Duration::from_nanos(1));
    Some(libc::timespec {
        tv_sec: libc::time_t::try_from(d.as_secs()).ok()?,
        tv_nsec: libc::c_long::from(d.subsec_nanos()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wait up to `ms` in poll(2); true when a signal cut it short.
    fn interrupted_wait(ms: i32) -> bool {
        // SAFETY: no file descriptors: a plain interruptible sleep.
        let rc = unsafe { libc::poll(std::ptr::null_mut(), 0, ms) };
        rc == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
    }

    #[test]
    fn signals_the_thread_after_the_deadline_and_not_after_disarm() {
        let mut w = Watchdog::for_current_thread();
        assert!(w.timer.is_some(), "no timer could be made");
        w.arm(Duration::from_secs(3600));
        assert!(!interrupted_wait(3 * POLL.as_millis() as i32));
        assert!(!w.fired());
        let armed = Instant::now();
        w.arm(Duration::from_millis(30));
        // Blocked in a syscall, as in KVM_RUN: the signal ends the wait
        // (10 s would be a hang).
        assert!(interrupted_wait(10_000));
        assert!(armed.elapsed() >= Duration::from_millis(30));
        assert!(w.fired());
        // It keeps signalling until disarmed.
        assert!(interrupted_wait(10_000));
        w.disarm();
        assert!(w.fired(), "fired stays true after disarm");
        // A kick sent just before the disarm may still be pending once.
        let _ = interrupted_wait(0);
        assert!(!interrupted_wait(3 * POLL.as_millis() as i32));
        w.arm(Duration::from_secs(3600));
        assert!(!w.fired(), "a new arm starts a new countdown");
        w.disarm();
    }

    #[test]
    fn a_deadline_past_the_time_type_never_fires() {
        let mut w = Watchdog::for_current_thread();
        w.arm(Duration::MAX);
        assert!(!interrupted_wait(3 * POLL.as_millis() as i32));
        assert!(!w.fired());
        w.disarm();
    }
}
