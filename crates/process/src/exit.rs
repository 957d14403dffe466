//! Exit statuses and the failure categories that decide them (kselftest
//! style: 0 pass, 1 fail, 2 usage/environment, 4 skip in KTAP mode, 130
//! SIGINT, 143 SIGTERM, 129 SIGHUP, 141 closed stdout). A leaf module:
//! every error type, the architectures' too, names its category here
//! without depending on the crate's error type.

/// Exit status for usage and environment errors (clap uses 2 as well).
pub const EXIT_USAGE: i32 = 2;
/// Exit status after SIGINT (128 + 2, as shells report it); SIGTERM and
/// SIGHUP give theirs (see `vmm::interrupt::Stop::exit_code`).
pub const EXIT_INTERRUPTED: i32 = 130;
/// Exit status when any check failed or the guest misbehaved.
pub const EXIT_FAILED: i32 = 1;

/// What kind of failure an error is; the category decides the exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// A bad command line: exit 2.
    Usage,
    /// KVM, CPU, host memory or files that cannot serve the run: exit 2.
    Environment,
    /// The run failed in the VMM: a KVM ioctl, a guest memory access, an
    /// unusable or unloadable blob, I/O: exit 1.
    Run,
    /// The guest misbehaved: exit 1.
    Guest,
    /// A routine produced wrong memory: exit 1.
    Verification,
    /// A fault of hypclear itself: exit 2 (as such faults always had).
    Internal,
    /// SIGINT: exit 130.
    Interrupted,
}

impl Category {
    pub fn exit_code(self) -> i32 {
        match self {
            Category::Interrupted => EXIT_INTERRUPTED,
            Category::Usage | Category::Environment | Category::Internal => EXIT_USAGE,
            Category::Run | Category::Guest | Category::Verification => EXIT_FAILED,
        }
    }
}

/// Every crate's error enum: its category, and from it the exit status
/// and the reason a partial result gives, the same way for all of them.
pub trait Failure: std::fmt::Display {
    fn category(&self) -> Category;

    /// Process exit status (an interruption's by its signal).
    fn exit_code(&self) -> i32 {
        match self.category() {
            Category::Interrupted => crate::interrupt::exit_code(),
            c => c.exit_code(),
        }
    }

    /// Why the work it stopped is partial, as the JSON's `partial_reason`
    /// and KTAP's `# interrupted:` line say it: the signal's name for a
    /// stop request ("SIGTERM"), else the message.
    fn partial_reason(&self) -> String {
        match self.category() {
            Category::Interrupted => crate::interrupt::name().to_string(),
            _ => self.to_string(),
        }
    }
}
