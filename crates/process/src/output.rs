//! Every write to stdout and stderr goes through here and is checked. The
//! first failure of a stream is kept and that stream gets no more writes;
//! [`exit_status`] turns it into the process's exit status with one message:
//! a full or failing device (ENOSPC, EIO) is exit 1, a closed pipe (EPIPE)
//! a quiet 141, as for a filter killed by SIGPIPE. EPIPE is also a stop
//! request on stdout (see `vmm::interrupt`): nobody reads the rest, so
//! run, verify and bench stop and write their partial JSON. SIGPIPE stays ignored (the
//! Rust runtime's default) so that a closed pipe is an error here, not a
//! kill that loses the results.
use std::io::Write;
use std::sync::Mutex;

/// One of the two output streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "standard output",
            Stream::Stderr => "standard error",
        }
    }
}

/// The first failed write of each stream (stdout, stderr).
static FAILED: Mutex<[Option<std::io::Error>; 2]> = Mutex::new([None, None]);

fn failed() -> std::sync::MutexGuard<'static, [Option<std::io::Error>; 2]> {
    // A panic while holding it cannot leave it inconsistent: plain data.
    FAILED.lock().unwrap_or_else(|p| p.into_inner())
}

/// Write `bytes` to `stream` and flush; a failure is recorded (see the
/// module documentation), never a panic.
pub fn write(stream: Stream, bytes: &[u8]) {
    let slot = stream as usize;
    if failed()[slot].is_some() {
        return;
    }
    let r = match stream {
        Stream::Stdout => {
            let mut o = std::io::stdout().lock();
            o.write_all(bytes).and_then(|()| o.flush())
        }
        Stream::Stderr => std::io::stderr().lock().write_all(bytes),
    };
    if let Err(e) = r {
        record(stream, e);
    }
}

/// Record a failed write to `stream` made elsewhere (clap's help text).
pub fn record(stream: Stream, e: std::io::Error) {
    if stream == Stream::Stdout && e.kind() == std::io::ErrorKind::BrokenPipe {
        crate::interrupt::request(crate::interrupt::Stop::Pipe);
    }
    failed()[stream as usize].get_or_insert(e);
}

/// The exit status of a command that ended with `code`, given the output
/// failures: one message for a failed stream (none for a closed pipe),
/// and never 0 when output was lost.
pub fn exit_status(code: i32) -> i32 {
    let [out, err] = std::mem::take(&mut *failed());
    let mut code = code;
    for (stream, e) in [(Stream::Stdout, out), (Stream::Stderr, err)] {
        let Some(e) = e else { continue };
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            // The first stop request decides (an earlier signal keeps its status).
            crate::interrupt::request(crate::interrupt::Stop::Pipe);
            if code == 0 || code == crate::exit::EXIT_FAILED {
                code = crate::interrupt::exit_code();
            }
            continue;
        }
        if stream == Stream::Stdout {
            write(
                Stream::Stderr,
                format!(
                    "hypclear: error: cannot write {}: {e}; the output is incomplete \
                     (free space on the device, or redirect the output elsewhere)\n",
                    stream.name()
                )
                .as_bytes(),
            );
        }
        if code == 0 {
            code = crate::exit::EXIT_FAILED;
        }
    }
    code
}

/// `eprintln!` through [`write`]: checked, never a panic.
#[macro_export]
macro_rules! errln {
    ($($t:tt)*) => {
        $crate::output::write(
            $crate::output::Stream::Stderr,
            format!("{}\n", format_args!($($t)*)).as_bytes(),
        )
    };
}

/// Write to stdout, checked (see [`write`]): a full or failing
/// stdout is exit 1 with one message at the end, a closed pipe a quiet
/// stop; never a panic.
pub fn out(args: std::fmt::Arguments<'_>) {
    print_bytes(std::fmt::format(args).as_bytes());
}

/// `println!` through [`out`].
#[macro_export]
macro_rules! outln {
    ($($t:tt)*) => {
        $crate::output::out(format_args!("{}\n", format_args!($($t)*)))
    };
}

/// `print!` through [`out`].
#[macro_export]
macro_rules! out {
    ($($t:tt)*) => {
        $crate::output::out(format_args!($($t)*))
    };
}

/// Bytes on stdout, checked (see [`out`]).
pub fn print_bytes(bytes: &[u8]) {
    write(Stream::Stdout, bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_stream_makes_the_status_nonzero_and_a_closed_pipe_141() {
        failed()[Stream::Stdout as usize] = Some(std::io::Error::from_raw_os_error(libc::ENOSPC));
        assert_eq!(exit_status(0), 1);
        assert_eq!(exit_status(0), 0, "taken once");
        failed()[Stream::Stderr as usize] = Some(std::io::Error::from_raw_os_error(libc::EIO));
        assert_eq!(exit_status(2), 2, "a usage error keeps its status");
        failed()[Stream::Stdout as usize] = Some(std::io::Error::from_raw_os_error(libc::EPIPE));
        // No other stop is requested in the unit tests: SIGPIPE's status.
        assert_eq!(exit_status(0), 141);
    }
}
