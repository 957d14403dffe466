//! Per-vCPU watchdog: a guest that stops making progress blocks `KVM_RUN`
//! forever (a spinning guest never exits). When a deadline passes, the
//! watchdog thread keeps signalling the vCPU thread until it is disarmed; the
//! signal makes `KVM_RUN` return `EINTR`, and the vCPU loop reports a timeout
//! together with the guest's registers.
//!
//! The vCPU loop arms it once per wait (boot, command, exit), so it measures
//! progress, not exits. The watchdog thread polls every [`POLL`], which is
//! the resolution of the timeout.
//!
//! Soundness of `pthread_kill`: the signal is sent only while holding
//! `Shared::armed` locked and armed; the vCPU thread disarms under the same
//! lock before it leaves the wait (and so before it can exit), so no signal
//! can be in flight to a thread that has exited.
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the watchdog thread looks at the deadline.
pub const POLL: Duration = Duration::from_millis(20);

/// Signal used to kick a vCPU thread out of KVM_RUN.
fn kick_signal() -> libc::c_int {
    vmm_sys_util::signal::SIGRTMIN()
}

extern "C" fn on_kick(_: libc::c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {}

static INSTALL: Once = Once::new();
static INSTALLED: AtomicBool = AtomicBool::new(false);

struct Shared {
    epoch: Instant,
    /// Deadline in ns since `epoch`; 0 when disarmed. A kick is sent only
    /// with this lock held (see the module docs).
    deadline: Mutex<u64>,
    fired: AtomicBool,
    shutdown: AtomicBool,
}

pub struct Watchdog {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// A watchdog for the calling thread (the one that will call KVM_RUN).
    pub fn for_current_thread() -> Watchdog {
        INSTALL.call_once(|| {
            // If installing fails the default action of a real-time signal
            // would kill the process, so never send one in that case.
            match vmm_sys_util::signal::register_signal_handler(kick_signal(), on_kick) {
                Ok(()) => INSTALLED.store(true, Ordering::SeqCst),
                Err(e) => eprintln!("hypclear: warning: no watchdog (signal handler: {e})"),
            }
        });
        // SAFETY: pthread_self has no preconditions.
        let target = unsafe { libc::pthread_self() };
        let shared = Arc::new(Shared {
            epoch: Instant::now(),
            deadline: Mutex::new(0),
            fired: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("hypclear-watchdog".into())
            .spawn(move || watch(&s, target))
            .ok();
        Watchdog { shared, thread }
    }

    /// Start (or restart) the countdown. A deadline that does not fit
    /// (centuries away) saturates: it never fires.
    pub fn arm(&self, timeout: Duration) {
        self.shared.fired.store(false, Ordering::SeqCst);
        let ns = self
            .shared
            .epoch
            .elapsed()
            .checked_add(timeout)
            .and_then(|d| u64::try_from(d.as_nanos()).ok())
            .unwrap_or(u64::MAX);
        *lock(&self.shared.deadline) = ns.max(1);
    }

    /// Stop the countdown; when this returns no kick is in flight.
    pub fn disarm(&self) {
        *lock(&self.shared.deadline) = 0;
    }

    /// Whether the deadline passed since the last `arm`.
    pub fn fired(&self) -> bool {
        self.shared.fired.load(Ordering::SeqCst)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

fn lock(m: &Mutex<u64>) -> std::sync::MutexGuard<'_, u64> {
    // The value is a plain number: a poisoned lock still holds a valid one.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn watch(s: &Shared, target: libc::pthread_t) {
    while !s.shutdown.load(Ordering::SeqCst) {
        std::thread::park_timeout(POLL);
        let d = lock(&s.deadline);
        let now = u64::try_from(s.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        if *d != 0 && now >= *d && INSTALLED.load(Ordering::SeqCst) {
            s.fired.store(true, Ordering::SeqCst);
            // Keep kicking until disarmed: a signal may land just before the
            // thread enters KVM_RUN.
            // SAFETY: `target` is alive: it is armed only inside the vCPU
            // thread's wait, and that thread disarms under this lock (held
            // here until after the call) before leaving the wait.
            unsafe { libc::pthread_kill(target, kick_signal()) };
        }
        drop(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fires_only_after_the_deadline_and_interrupts_a_sleep() {
        let w = Watchdog::for_current_thread();
        w.arm(Duration::from_secs(3600));
        std::thread::sleep(POLL * 3);
        assert!(!w.fired());
        w.arm(Duration::from_millis(1));
        // A long sleep is cut short by the signal (EINTR, nanosleep resumes
        // in std, so just wait until fired).
        let t = Instant::now();
        while !w.fired() && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(w.fired());
        w.disarm();
    }
}
