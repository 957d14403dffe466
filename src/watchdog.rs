//! Per-vCPU watchdog: a guest that stops making progress blocks `KVM_RUN`
//! forever (a spinning guest never exits). When a deadline passes, the
//! watchdog thread keeps signalling the vCPU thread until it is disarmed; the
//! signal makes `KVM_RUN` return `EINTR`, and the vCPU loop reports a timeout
//! together with the guest's registers.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, Once};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Signal used to kick a vCPU thread out of KVM_RUN.
fn kick_signal() -> libc::c_int {
    vmm_sys_util::signal::SIGRTMIN()
}

extern "C" fn on_kick(_: libc::c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {}

static INSTALL: Once = Once::new();

#[derive(Default)]
struct State {
    deadline: Option<Instant>,
    shutdown: bool,
}

pub struct Watchdog {
    shared: Arc<(Mutex<State>, Condvar)>,
    fired: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// A watchdog for the calling thread (the one that will call KVM_RUN).
    pub fn for_current_thread() -> Watchdog {
        INSTALL.call_once(|| {
            // If installing fails the default action of a real-time signal
            // would kill the process, so never send one in that case.
            if vmm_sys_util::signal::register_signal_handler(kick_signal(), on_kick).is_err() {
                eprintln!("hypclear: warning: cannot install the watchdog signal handler");
            }
        });
        // SAFETY: pthread_self has no preconditions.
        let target = unsafe { libc::pthread_self() };
        let shared = Arc::new((Mutex::new(State::default()), Condvar::new()));
        let fired = Arc::new(AtomicBool::new(false));
        let (s, f) = (shared.clone(), fired.clone());
        let thread = std::thread::Builder::new()
            .name("hypclear-watchdog".into())
            .spawn(move || watch(s, f, target))
            .ok();
        Watchdog {
            shared,
            fired,
            thread,
        }
    }

    /// Start (or restart) the countdown.
    pub fn arm(&self, timeout: Duration) {
        self.fired.store(false, Ordering::SeqCst);
        let (m, cv) = &*self.shared;
        if let Ok(mut st) = m.lock() {
            st.deadline = Some(Instant::now() + timeout);
            cv.notify_all();
        }
    }

    pub fn disarm(&self) {
        let (m, cv) = &*self.shared;
        if let Ok(mut st) = m.lock() {
            st.deadline = None;
            cv.notify_all();
        }
    }

    /// Whether the deadline passed since the last `arm`.
    pub fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        let (m, cv) = &*self.shared;
        if let Ok(mut st) = m.lock() {
            st.shutdown = true;
            st.deadline = None;
            cv.notify_all();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn watch(shared: Arc<(Mutex<State>, Condvar)>, fired: Arc<AtomicBool>, target: libc::pthread_t) {
    let (m, cv) = &*shared;
    let Ok(mut st) = m.lock() else { return };
    loop {
        if st.shutdown {
            return;
        }
        match st.deadline {
            None => {
                st = match cv.wait(st) {
                    Ok(g) => g,
                    Err(_) => return,
                }
            }
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    fired.store(true, Ordering::SeqCst);
                    // SAFETY: target is a live thread: the owner disarms and
                    // joins this thread (Drop) before it exits.
                    unsafe { libc::pthread_kill(target, kick_signal()) };
                    // Keep kicking until disarmed: the first signal may land
                    // just before the thread enters KVM_RUN.
                    st = match cv.wait_timeout(st, Duration::from_millis(20)) {
                        Ok((g, _)) => g,
                        Err(_) => return,
                    };
                } else {
                    st = match cv.wait_timeout(st, d - now) {
                        Ok((g, _)) => g,
                        Err(_) => return,
                    };
                }
            }
        }
    }
}
