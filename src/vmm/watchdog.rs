//! Per-vCPU watchdog: a guest that stops making progress blocks `KVM_RUN`
//! forever (a spinning guest never exits). When a deadline passes, the
//! watchdog thread keeps signalling the vCPU thread until it is disarmed; the
//! signal makes `KVM_RUN` return `EINTR`, and the vCPU loop reports a timeout
//! together with the guest's registers.
//!
//! Arming and disarming are two atomic stores (they happen around every
//! KVM_RUN, so they must be cheap); the watchdog thread polls every
//! [`POLL`], which is the resolution of the timeout.
use std::sync::Arc;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
    /// Deadline in ns since `epoch`; 0 when disarmed.
    deadline: AtomicU64,
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
            deadline: AtomicU64::new(0),
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

    /// Start (or restart) the countdown.
    pub fn arm(&self, timeout: Duration) {
        self.shared.fired.store(false, Ordering::SeqCst);
        let d = self.shared.epoch.elapsed() + timeout;
        self.shared
            .deadline
            .store(d.as_nanos().max(1) as u64, Ordering::SeqCst);
    }

    pub fn disarm(&self) {
        self.shared.deadline.store(0, Ordering::SeqCst);
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

fn watch(s: &Shared, target: libc::pthread_t) {
    while !s.shutdown.load(Ordering::SeqCst) {
        std::thread::park_timeout(POLL);
        let d = s.deadline.load(Ordering::SeqCst);
        if d != 0 && s.epoch.elapsed().as_nanos() as u64 >= d && INSTALLED.load(Ordering::SeqCst) {
            s.fired.store(true, Ordering::SeqCst);
            // Keep kicking until disarmed: a signal may land just before the
            // thread enters KVM_RUN. SAFETY: target is alive: its owner joins
            // this thread (Drop) before it can exit.
            unsafe { libc::pthread_kill(target, kick_signal()) };
        }
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
