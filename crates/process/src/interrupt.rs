//! A request to stop: the first SIGINT, SIGTERM or SIGHUP (Ctrl-C, `kill`,
//! `timeout`, a CI runner's cancel, a closed terminal), or a closed
//! standard output, records why (and the signal kicks the vCPU out of
//! KVM_RUN with EINTR); the hypercall loop turns it into
//! [`Error::Interrupted`], and run/verify/bench print and write what they
//! have, marked partial, and exit 128 + the signal (130, 143, 129; 141 for
//! the closed output). A second signal ends the process the default way.

/// Stopped by a signal (or a closed stdout) before the work was done.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("interrupted ({})", name())]
pub struct Interrupted;

/// A signal handler that could not be installed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct InstallError(String);
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// Why the run stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    Sigint,
    Sigterm,
    Sighup,
    /// Standard output was closed (EPIPE): the reader is gone.
    Pipe,
}

/// The signals caught, in the order of [`Stop`].
const SIGNALS: [(libc::c_int, Stop); 3] = [
    (libc::SIGINT, Stop::Sigint),
    (libc::SIGTERM, Stop::Sigterm),
    (libc::SIGHUP, Stop::Sighup),
];

impl Stop {
    /// As the messages and the JSON's `partial_reason` name it.
    pub fn name(self) -> &'static str {
        match self {
            Stop::Sigint => "SIGINT",
            Stop::Sigterm => "SIGTERM",
            Stop::Sighup => "SIGHUP",
            Stop::Pipe => "EPIPE: standard output closed",
        }
    }

    fn signal(self) -> libc::c_int {
        match self {
            Stop::Sigint => libc::SIGINT,
            Stop::Sigterm => libc::SIGTERM,
            Stop::Sighup => libc::SIGHUP,
            Stop::Pipe => libc::SIGPIPE,
        }
    }

    /// What the process says when [`GRACE`] ran out after this request.
    fn grace_message(self) -> &'static str {
        macro_rules! ran_out {
            ($name:literal) => {
                concat!(
                    "hypclear: still running 5 s after ",
                    $name,
                    ", blocked (a full pipe, a stalled file system?): ending now; results not \
                     yet written are lost\n"
                )
            };
        }
        match self {
            Stop::Sigint => ran_out!("SIGINT"),
            Stop::Sigterm => ran_out!("SIGTERM"),
            Stop::Sighup => ran_out!("SIGHUP"),
            Stop::Pipe => ran_out!("EPIPE: standard output closed"),
        }
    }

    /// Exit status, as a shell reports a process ended by the signal.
    pub fn exit_code(self) -> i32 {
        128 + self.signal()
    }

    fn from_signal(sig: libc::c_int) -> Option<Stop> {
        SIGNALS
            .iter()
            .chain(std::iter::once(&(libc::SIGPIPE, Stop::Pipe)))
            .find(|(s, _)| *s == sig)
            .map(|(_, stop)| *stop)
    }
}

/// The signal number of the first stop request (0: none).
static STOP: AtomicI32 = AtomicI32::new(0);

/// Catch SIGINT, SIGTERM and SIGHUP (for commands that can save partial
/// results), and SIGALRM for the [`GRACE`] that follows one. Idempotent.
pub fn install() -> Result<(), InstallError> {
    static INSTALLED: std::sync::OnceLock<std::result::Result<(), String>> =
        std::sync::OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            for (sig, _) in SIGNALS {
                let action = move || {
                    // The first request is kept; a second signal (of any
                    // kind) ends the process as if it had not been caught.
                    if STOP
                        .compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst)
                        .is_ok()
                    {
                        start_grace();
                    } else {
                        let _ = signal_hook::low_level::emulate_default_handler(sig);
                    }
                };
                // SAFETY: the action is async-signal-safe: an atomic
                // compare-exchange, alarm(2), and emulate_default_handler
                // (made for use in handlers). signal-hook installs with
                // SA_RESTART, which does not restart KVM_RUN: it returns
                // EINTR.
                unsafe { signal_hook::low_level::register(sig, action) }
                    .map_err(|e| format!("cannot install the handler of signal {sig}: {e}"))?;
            }
            // SAFETY: the action only writes a static message and calls
            // _exit, both async-signal-safe.
            unsafe { signal_hook::low_level::register(libc::SIGALRM, grace_ran_out) }
                .map_err(|e| format!("cannot start the stop watcher: {e}"))?;
            GRACE_HANDLED.store(true, Ordering::SeqCst);
            Ok(())
        })
        .clone()
        .map_err(InstallError)
}

/// How long a stopped run has to save its results and end. A call the
/// signal does not cut short (SA_RESTART restarts an open or a write to a
/// full pipe) would otherwise keep the process for ever after Ctrl-C.
pub const GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Start the [`GRACE`]: SIGALRM after it, which [`grace_ran_out`] turns
/// into the end of the process. A timer, not a watcher thread: starting a
/// thread cost 0.07 ms before every run's first hypercall here. Only where
/// [`install`] caught SIGALRM (a command that saves partial results):
/// elsewhere SIGALRM's default action would kill the process.
fn start_grace() {
    if GRACE_HANDLED.load(Ordering::SeqCst) {
        // SAFETY: alarm has no preconditions and is async-signal-safe.
        unsafe { libc::alarm(GRACE.as_secs() as libc::c_uint) };
    }
}

/// Whether [`grace_ran_out`] handles SIGALRM.
static GRACE_HANDLED: AtomicBool = AtomicBool::new(false);

/// The grace after a stop request ran out: say so and end the process
/// with the request's status (from a signal handler: a static message,
/// write and _exit). A SIGALRM without a request is ignored.
fn grace_ran_out() {
    let Some(stop) = stopped() else {
        return;
    };
    let msg = stop.grace_message().as_bytes();
    // SAFETY: write and _exit are async-signal-safe; `msg` is static.
    unsafe {
        libc::write(libc::STDERR_FILENO, msg.as_ptr().cast(), msg.len());
        libc::_exit(stop.exit_code());
    }
}

/// Record a stop request that is not a signal (a closed standard output);
/// an earlier request is kept.
pub fn request(stop: Stop) {
    if STOP
        .compare_exchange(0, stop.signal(), Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
    {
        start_grace();
    }
}

/// The first stop request, if any.
pub fn stopped() -> Option<Stop> {
    Stop::from_signal(STOP.load(Ordering::SeqCst))
}

/// Whether a stop was requested.
pub fn requested() -> bool {
    stopped().is_some()
}

/// What stopped the run, for messages ("SIGTERM"); "SIGINT" before any
/// request, as [`Interrupted`] was only ever made by one.
pub fn name() -> &'static str {
    stopped().unwrap_or(Stop::Sigint).name()
}

/// Exit status of an interrupted run (130 before any request).
pub fn exit_code() -> i32 {
    stopped().unwrap_or(Stop::Sigint).exit_code()
}

/// Whether a KVM ioctl that failed with `errno` failed because of the
/// stop request: it slept interruptibly (KVM_CREATE_VM does, here) and the
/// signal cut it short with EINTR. Then the run stops as for any other
/// request, not as a KVM failure.
pub fn cut_short(errno: i32) -> bool {
    errno == libc::EINTR && requested()
}

/// `Err(Interrupted)` once a stop was requested.
pub fn check() -> Result<(), Interrupted> {
    if requested() {
        return Err(Interrupted);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 38: a SIGINT while blocked in a restarted call (the open of a
    /// FIFO without a reader) never ended hypclear. The test runs itself
    /// as a child that is stopped while blocked for ever.
    #[test]
    fn a_stop_ends_the_process_even_when_it_is_blocked() {
        if std::env::var_os("HYPCLEAR_GRACE_CHILD").is_some() {
            install().unwrap();
            // SAFETY: raising a signal whose handler is installed above.
            unsafe { libc::raise(libc::SIGINT) };
            let (r, _w) = std::io::pipe().unwrap();
            let _ = std::io::Read::read(&mut &r, &mut [0u8; 1]); // blocks for ever
            unreachable!("the read returned");
        }
        let t = std::time::Instant::now();
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "interrupt::tests::a_stop_ends_the_process_even_when_it_is_blocked",
            ])
            .env("HYPCLEAR_GRACE_CHILD", "1")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // A grace that never runs out is a failure here, not a hung test.
        while child.try_wait().unwrap().is_none() {
            if t.elapsed() > GRACE + std::time::Duration::from_secs(5) {
                let _ = child.kill();
                panic!("still blocked {:?} after SIGINT", t.elapsed());
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "{err}");
        assert!(err.contains("after SIGINT, blocked"), "{err}");
    }

    #[test]
    fn each_stop_exits_as_a_shell_reports_its_signal() {
        let codes: Vec<i32> = [Stop::Sigint, Stop::Sigterm, Stop::Sighup, Stop::Pipe]
            .into_iter()
            .map(Stop::exit_code)
            .collect();
        assert_eq!(codes, [130, 143, 129, 141]);
        for (sig, stop) in SIGNALS {
            assert_eq!(Stop::from_signal(sig), Some(stop));
        }
        assert_eq!(Stop::from_signal(0), None);
    }

    #[test]
    fn the_grace_message_names_the_request_and_the_grace() {
        for stop in [Stop::Sigint, Stop::Sigterm, Stop::Sighup, Stop::Pipe] {
            let m = stop.grace_message();
            let after = format!("still running {} s after {},", GRACE.as_secs(), stop.name());
            assert!(m.contains(&after), "{m}");
            assert!(m.ends_with('\n'), "{m}");
        }
    }
}
