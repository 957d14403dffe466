//! SIGINT as a request to stop: the first Ctrl-C sets a flag (and kicks
//! the vCPU out of KVM_RUN with EINTR); the hypercall loop turns it into
//! [`Error::Interrupted`], and run/verify/bench print and write what they
//! have, marked partial, and exit 130. The handler resets itself, so a
//! second Ctrl-C kills the process the default way.
use crate::error::{Error, Result};
use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Catch the first SIGINT (for commands that can save partial results).
pub fn install() -> Result<()> {
    // SAFETY: a zeroed sigaction is a valid value to fill in; the handler
    // only performs an atomic store; no SA_RESTART, so a blocking KVM_RUN
    // returns EINTR; SA_RESETHAND restores the default after one signal.
    let rc = unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigint as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESETHAND;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut())
    };
    if rc != 0 {
        return Err(Error::Internal(format!(
            "cannot install the SIGINT handler: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

/// Whether a SIGINT arrived.
pub fn requested() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Whether a KVM ioctl that failed with `errno` failed because of the
/// SIGINT: it slept interruptibly (KVM_CREATE_VM does, here) and the
/// signal cut it short with EINTR. Then the run stops as for any other
/// Ctrl-C, not as a KVM failure.
pub fn cut_short(errno: i32) -> bool {
    errno == libc::EINTR && requested()
}

/// `Err(Error::Interrupted)` once a SIGINT arrived.
pub fn check() -> Result<()> {
    if requested() {
        return Err(Error::Interrupted);
    }
    Ok(())
}
