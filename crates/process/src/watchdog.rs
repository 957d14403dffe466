//! Per-vCPU watchdog: a guest that stops making progress blocks `KVM_RUN`
//! forever (a spinning guest never exits). It counts the vCPU thread's
//! progress, not wall time, so a process stopped (SIGSTOP, a frozen cgroup)
//! or starved (an overcommitted host) for any length of time is not a hang.
//! A wait runs out when the thread has, since it was armed, either
//!
//! * run on a CPU for the timeout (its CPU clock: guest execution inside
//!   `KVM_RUN` counts, measured on PVM), or
//! * slept for the timeout (neither on a CPU, nor waiting for one, nor
//!   stopped): a guest asleep in `KVM_RUN` (arm64 WFI with an in-kernel
//!   vGIC) uses no CPU and must still be cut.
//!
//! A POSIX timer of the vCPU thread's signals it when a reading is due; the
//! signal makes `KVM_RUN` return `EINTR`, and the vCPU loop reads the
//! thread's clocks and either reports a timeout (with the guest's
//! registers) or re-arms for what is left. The first reading is due after
//! the timeout of wall time (a thread's CPU clock never runs faster than
//! the wall clock), the next ones at most a tenth of the timeout apart.
//! Once the wait has run out, the timer keeps signalling every [`POLL`]
//! until it is disarmed.
//!
//! Sleep is counted between readings only: from one reading to when the
//! next was due, less the thread's CPU time and its waits for a CPU
//! (`/proc/self/task/TID/schedstat`) meanwhile. A stopped or frozen process
//! runs none of its threads, so it reads nothing while stopped: the lateness
//! of the reading after a stop counts nothing, and the part of the stop
//! before that reading was due at most one step (a tenth of the timeout).
//! The first timeout of wall time counts no sleep (it has no reading to
//! start from), so a guest asleep in `KVM_RUN` is cut after about twice the
//! timeout. Where schedstat is missing, waits for a CPU count as sleep.
//!
//! Cost: arming is one `timer_settime` and, at most once per [`REUSE`] of
//! back-to-back waits, a CPU-clock read (about 0.6 µs here); disarming is
//! one `timer_settime`; a wait that ends within the timeout of wall time
//! reads nothing more. (A timer on the thread's CPU clock would need a
//! wall-clock one beside it for the sleeping guest: two `timer_settime`
//! each way.) There is no watchdog thread to start (one cost 0.1 ms on the
//! way to every VM's first hypercall) or to wake.
//!
//! Soundness: the timer signals its thread by thread ID (`SIGEV_THREAD_ID`).
//! The kernel holds a reference to that thread, not the number, so a timer
//! that outlives its thread signals nobody; the vCPU loop disarms it before
//! it leaves the wait anyway, and a vCPU used from another thread gets a new
//! watchdog (see `Vcpu::run`).
use std::cell::OnceCell;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often the timer signals the thread once a reading is due (a
/// signal may land just before the thread enters KVM_RUN: the next one
/// comes `POLL` later).
pub(crate) const POLL: Duration = Duration::from_millis(20);

/// Readings after the first come at least this many times per timeout: a
/// stop adds at most one such step to the sleep counted.
const STEPS: u32 = 10;

/// The shortest re-arm: a budget all but spent is not worth a signal storm.
const MIN_STEP: Duration = Duration::from_millis(1);

/// An arm within this of the last CPU-clock reading (and within a hundredth
/// of its timeout) bounds the clock from that reading instead of reading it:
/// the wait's CPU time is under-counted by at most that much, and the
/// vCPU loop's back-to-back waits (thousands a second) read the clock about
/// once per this.
const REUSE: Duration = Duration::from_millis(10);

/// What a wait ran out of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expired {
    /// The thread ran on a CPU for the whole timeout.
    Cpu { timeout: Duration },
    /// It slept for the whole timeout; `cpu` is what it ran meanwhile.
    Asleep { timeout: Duration, cpu: Duration },
}

impl std::fmt::Display for Expired {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Expired::Cpu { timeout } => {
                write!(f, "{:.1} s of vCPU CPU time", timeout.as_secs_f64())
            }
            Expired::Asleep { timeout, cpu } => write!(
                f,
                "{:.1} s of vCPU sleep and {:.1} s of its CPU time",
                timeout.as_secs_f64(),
                cpu.as_secs_f64()
            ),
        }
    }
}

/// The thread's clocks at one reading.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Reading {
    /// Wall time since the wait was armed.
    wall: Duration,
    /// CPU time since the wait was armed.
    cpu: Duration,
    /// All the time the thread has waited for a CPU (only differences
    /// count; zero where the kernel does not account it).
    waited: Duration,
}

/// What a reading decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Expired(Expired),
    /// Read again this much later.
    Next(Duration),
}

/// The accounting of one wait, kept apart from the timer and the clocks so
/// that the rule can be tested on made-up readings.
#[derive(Debug, Clone, Copy)]
struct Budget {
    timeout: Duration,
    /// When (wall time since arming) the next reading is due: nothing can
    /// run out before.
    due: Duration,
    /// The previous reading, if any.
    last: Option<Reading>,
    slept: Duration,
}

impl Budget {
    fn new(timeout: Duration) -> Budget {
        Budget {
            timeout,
            due: timeout,
            last: None,
            slept: Duration::ZERO,
        }
    }

    fn read(&mut self, now: Reading) -> Verdict {
        if now.cpu >= self.timeout {
            return Verdict::Expired(Expired::Cpu {
                timeout: self.timeout,
            });
        }
        if let Some(last) = self.last {
            // Only up to when this reading was due: past that the process
            // could not read its clocks (stopped, frozen or starved).
            let span = self.due.min(now.wall).saturating_sub(last.wall);
            let cpu = now.cpu.saturating_sub(last.cpu);
            let waited = now.waited.saturating_sub(last.waited);
            self.slept += span.saturating_sub(cpu.saturating_add(waited));
        }
        self.last = Some(now);
        if self.slept >= self.timeout {
            return Verdict::Expired(Expired::Asleep {
                timeout: self.timeout,
                cpu: now.cpu,
            });
        }
        let step = (self.timeout - now.cpu)
            .min(self.timeout / STEPS)
            .min(self.timeout - self.slept)
            .max(MIN_STEP);
        self.due = now.wall.saturating_add(step);
        Verdict::Next(step)
    }
}

/// The clocks of the thread that made the watchdog.
struct Clocks {
    /// Its CPU clock; None if there is none (wall time then counts as CPU
    /// time, which is what the watchdog measured before).
    cpu: Option<libc::clockid_t>,
    tid: libc::pid_t,
    /// Its schedstat, opened at the first reading that needs it (most
    /// waits need none); None if it cannot be opened.
    schedstat: OnceCell<Option<File>>,
    /// The last CPU-clock reading, and an instant before it.
    last: Option<(Instant, Duration)>,
}

impl Clocks {
    fn of_current_thread() -> Clocks {
        let mut id: libc::clockid_t = 0;
        // SAFETY: `id` is valid for the call; the thread is the caller.
        let cpu = (unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) } == 0)
            .then_some(id);
        Clocks {
            cpu,
            // SAFETY: gettid has no preconditions.
            tid: unsafe { libc::gettid() },
            schedstat: OnceCell::new(),
            last: None,
        }
    }

    /// At least the CPU clock at `now` (just past): when the last reading
    /// is at most `reuse` older, that reading plus the wall time since (a
    /// thread runs no faster than the wall clock), which costs no syscall;
    /// otherwise a reading.
    fn cpu_since(&mut self, now: Instant, reuse: Duration) -> Option<Duration> {
        if let Some((at, cpu)) = self.last {
            let since = now.saturating_duration_since(at);
            if since <= reuse {
                return Some(cpu.saturating_add(since));
            }
        }
        self.read_cpu(now)
    }

    /// A CPU-clock reading taken after `now`, kept for `cpu_since`.
    fn read_cpu(&mut self, now: Instant) -> Option<Duration> {
        let cpu = self.cpu()?;
        self.last = Some((now, cpu));
        Some(cpu)
    }

    /// The thread's CPU time (None without a CPU clock).
    fn cpu(&self) -> Option<Duration> {
        let mut ts = zero();
        // SAFETY: `ts` is valid for the call; a clock of a thread that has
        // exited fails (EINVAL), it does not read another's.
        let ok = unsafe { libc::clock_gettime(self.cpu?, &mut ts) } == 0;
        let secs = u64::try_from(ts.tv_sec).ok()?;
        let nanos = u32::try_from(ts.tv_nsec).ok()?;
        ok.then(|| Duration::new(secs, nanos))
    }

    /// The thread's total wait for a CPU: schedstat's second field.
    fn waited(&self) -> Option<Duration> {
        let file = self
            .schedstat
            .get_or_init(|| File::open(format!("/proc/self/task/{}/schedstat", self.tid)).ok())
            .as_ref()?;
        let mut buf = [0u8; 96];
        let n = file.read_at(&mut buf, 0).ok()?;
        let text = std::str::from_utf8(buf.get(..n)?).ok()?;
        let ns = text.split_whitespace().nth(1)?.parse().ok()?;
        Some(Duration::from_nanos(ns))
    }
}

/// One armed wait.
struct Wait {
    start: Instant,
    /// The CPU clock at `start`, or a bound above it.
    cpu: Option<Duration>,
    budget: Budget,
}

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
    clocks: Clocks,
    /// The wait armed, until it is disarmed.
    wait: Option<Wait>,
    /// What the last wait ran out of, if it did (kept after the disarm).
    expired: Option<Expired>,
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
            clocks: Clocks::of_current_thread(),
            wait: None,
            expired: None,
        }
    }

    /// Start (or restart) the countdown. A timeout that does not fit the
    /// kernel's time type (centuries) never fires.
    pub fn arm(&mut self, timeout: Duration) {
        self.expired = None;
        let start = Instant::now();
        self.wait = Some(Wait {
            start,
            cpu: self.clocks.cpu_since(start, REUSE.min(timeout / 100)),
            budget: Budget::new(timeout),
        });
        if let Some(t) = &self.timer {
            kick_in(t, timeout);
        }
    }

    /// Stop the countdown; when this returns, the timer sends no more
    /// signals (one already sent may still be delivered: the vCPU loop
    /// treats an interrupted KVM_RUN that ran nothing out as spurious).
    pub fn disarm(&mut self) {
        if let Some(t) = &self.timer {
            set_timer(t, zero(), zero());
        }
        if self.expired.is_none()
            && let Some(Verdict::Expired(e)) = self.read()
        {
            self.expired = Some(e);
        }
        self.wait = None;
    }

    /// What the armed wait has run out of (re-arming the timer for the
    /// rest when a reading finds nothing has), or what the last one had
    /// when it was disarmed. Cheap until the timeout of wall time passes.
    pub fn expired(&mut self) -> Option<Expired> {
        if self.expired.is_none() {
            match self.read()? {
                Verdict::Expired(e) => self.expired = Some(e),
                Verdict::Next(step) => {
                    if let Some(t) = &self.timer {
                        kick_in(t, step);
                    }
                }
            }
        }
        self.expired
    }

    /// Whether the armed wait has run out, or the last one had when it was
    /// disarmed.
    pub fn fired(&mut self) -> bool {
        self.expired().is_some()
    }

    /// The budget's verdict on the thread's clocks, if a reading is due.
    fn read(&mut self) -> Option<Verdict> {
        let w = self.wait.as_mut()?;
        let now = Instant::now();
        let wall = now.saturating_duration_since(w.start);
        if wall < w.budget.due {
            return None;
        }
        let cpu = match (w.cpu, self.clocks.read_cpu(now)) {
            (Some(then), Some(now)) => now.saturating_sub(then),
            _ => wall,
        };
        let waited = self.clocks.waited().unwrap_or_default();
        Some(w.budget.read(Reading { wall, cpu, waited }))
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

/// Signal the thread `after` from now, then every `POLL` until re-armed
/// or disarmed; never if `after` does not fit the kernel's time type.
fn kick_in(t: &Timer, after: Duration) {
    match timespec(after) {
        Some(value) => set_timer(t, value, timespec(POLL).unwrap_or(value)),
        None => set_timer(t, zero(), zero()),
    }
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

    const T: Duration = Duration::from_secs(5);

    fn s(secs: f64) -> Duration {
        Duration::from_secs_f64(secs)
    }

    fn at(wall: f64, cpu: f64, waited: f64) -> Reading {
        Reading {
            wall: s(wall),
            cpu: s(cpu),
            waited: s(waited),
        }
    }

    /// Read `b` whenever a reading is due while the thread's clocks go as
    /// `clocks` says for the wall time; the verdict that ends it (or None
    /// once the wall time passes `until`) and the wall time of it.
    fn run(
        b: &mut Budget,
        until: f64,
        clocks: impl Fn(f64) -> (f64, f64),
    ) -> (Option<Expired>, f64) {
        loop {
            let wall = b.due.as_secs_f64();
            if wall > until {
                return (None, wall);
            }
            let (cpu, waited) = clocks(wall);
            if let Verdict::Expired(e) = b.read(at(wall, cpu, waited)) {
                return (Some(e), wall);
            }
        }
    }

    #[test]
    fn a_spinning_thread_runs_out_at_the_timeout_of_cpu_time() {
        let mut b = Budget::new(T);
        // 0.1 s of the first 5 went to the host side of the loop's exits.
        assert_eq!(b.read(at(5.0, 4.9, 0.0)), Verdict::Next(s(0.1)));
        assert_eq!(
            b.read(at(5.1, 5.0, 0.0)),
            Verdict::Expired(Expired::Cpu { timeout: T })
        );
    }

    #[test]
    fn a_stop_of_any_length_is_not_a_hang() {
        // Stopped from 1 s to 31 s: the first reading, due at 5 s, comes
        // at 31 s; then the thread runs flat out. A command that needs
        // 4.5 s of CPU time completes; a spin is cut at 5 s of it.
        let mut b = Budget::new(T);
        assert_eq!(b.read(at(31.0, 1.0, 0.0)), Verdict::Next(s(0.5)));
        let clocks = |w: f64| (w - 30.0, 0.0);
        assert_eq!(run(&mut b, 34.5, clocks).0, None);
        assert_eq!(b.slept, Duration::ZERO);
        let (e, wall) = run(&mut b, 100.0, clocks);
        assert_eq!(e, Some(Expired::Cpu { timeout: T }));
        assert!((35.0..35.01).contains(&wall), "{wall}");
    }

    #[test]
    fn a_stop_between_readings_counts_at_most_one_step_of_sleep() {
        // Running, except for a stop of nearly a whole step (0.5 s) in
        // each step: nine such stops are not a hang.
        let mut b = Budget::new(T);
        assert_eq!(b.read(at(5.0, 4.0, 0.0)), Verdict::Next(s(0.5)));
        let mut cpu = 4.0;
        for i in 1..=9 {
            cpu += 0.01;
            let wall = 5.0 + 0.5 * f64::from(i);
            assert_eq!(b.read(at(wall, cpu, 0.0)), Verdict::Next(s(0.5)));
        }
        assert!(b.slept <= s(9.0 * 0.5), "{:?}", b.slept);
    }

    #[test]
    fn a_sleeping_thread_is_cut_after_twice_the_timeout() {
        let mut b = Budget::new(T);
        let (e, wall) = run(&mut b, 100.0, |_| (0.0, 0.0));
        let cpu = Duration::ZERO;
        assert_eq!(e, Some(Expired::Asleep { timeout: T, cpu }));
        assert!((10.0..10.01).contains(&wall), "{wall}");
    }

    #[test]
    fn a_late_reading_counts_only_the_sleep_up_to_when_it_was_due() {
        // Asleep, and every reading comes 10 s late (stopped meanwhile).
        let mut b = Budget::new(T);
        let mut wall = 15.0;
        let mut readings = 1;
        while let Verdict::Next(step) = b.read(at(wall, 0.0, 0.0)) {
            wall += step.as_secs_f64() + 10.0;
            readings += 1;
        }
        assert_eq!(readings, 11, "one for the first timeout, ten steps");
    }

    #[test]
    fn waiting_for_a_cpu_is_not_sleep() {
        // Runnable all the time, on a CPU a tenth of it: 50 s of wall time
        // for the 5 s of CPU time.
        let mut b = Budget::new(T);
        let (e, wall) = run(&mut b, 100.0, |w| (w / 10.0, w * 0.9));
        assert_eq!(e, Some(Expired::Cpu { timeout: T }));
        assert!((50.0..50.01).contains(&wall), "{wall}");
    }

    #[test]
    fn a_timeout_past_every_clock_does_not_overflow() {
        let mut b = Budget::new(Duration::MAX);
        let step = Duration::MAX / STEPS;
        assert_eq!(b.read(at(1.0, 0.5, 0.0)), Verdict::Next(step));
        assert_eq!(b.read(at(2.0, 0.5, 0.0)), Verdict::Next(step));
    }

    /// Wait up to `ms` in poll(2), asleep; true when a signal cut it short.
    fn interrupted_wait(ms: i32) -> bool {
        // SAFETY: no file descriptors: a plain interruptible sleep.
        let rc = unsafe { libc::poll(std::ptr::null_mut(), 0, ms) };
        rc == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
    }

    /// Spin on the CPU until `w` runs out (or 10 s pass: a hang).
    fn spin_until_expired(w: &mut Watchdog) -> Option<Expired> {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Some(e) = w.expired() {
                return Some(e);
            }
            std::hint::spin_loop();
        }
        None
    }

    #[test]
    fn a_spinning_thread_is_cut_on_its_cpu_time_and_signalled_until_disarm() {
        let mut w = Watchdog::for_current_thread();
        assert!(w.timer.is_some(), "no timer could be made");
        assert!(w.clocks.cpu.is_some(), "no CPU clock");
        w.arm(Duration::from_secs(3600));
        assert!(!interrupted_wait(3 * POLL.as_millis() as i32));
        assert!(!w.fired());
        let timeout = Duration::from_millis(50);
        let cpu = w.clocks.cpu();
        w.arm(timeout);
        assert_eq!(spin_until_expired(&mut w), Some(Expired::Cpu { timeout }));
        let used = w.clocks.cpu().zip(cpu).map(|(now, then)| now - then);
        assert!(used.is_some_and(|u| u >= timeout), "{used:?}");
        // Blocked in a syscall, as in KVM_RUN: it keeps signalling until
        // disarmed (10 s would be a hang).
        assert!(interrupted_wait(10_000));
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
    fn a_sleeping_thread_is_not_cut_at_the_timeout_but_after_twice_it() {
        let mut w = Watchdog::for_current_thread();
        let timeout = Duration::from_millis(100);
        let start = Instant::now();
        w.arm(timeout);
        // The first signal comes at the timeout of wall time, when the
        // thread has slept, not run.
        assert!(interrupted_wait(10_000));
        assert!(start.elapsed() >= timeout);
        assert_eq!(w.expired(), None);
        let e = loop {
            assert!(interrupted_wait(10_000), "the watchdog stopped signalling");
            if let Some(e) = w.expired() {
                break e;
            }
        };
        w.disarm();
        assert!(
            matches!(e, Expired::Asleep { timeout: t, .. } if t == timeout),
            "{e:?}"
        );
        let took = start.elapsed();
        assert!(
            took >= 2 * timeout && took < Duration::from_secs(10),
            "{took:?}"
        );
    }

    #[test]
    fn a_deadline_past_the_time_type_never_fires() {
        let mut w = Watchdog::for_current_thread();
        w.arm(Duration::MAX);
        assert!(!interrupted_wait(3 * POLL.as_millis() as i32));
        assert!(!w.fired());
        w.disarm();
    }

    #[test]
    fn an_arm_soon_after_a_reading_bounds_the_cpu_clock_from_it() {
        // A window far wider than REUSE: on a loaded host the thread may
        // be off the CPU for longer than REUSE between the readings.
        let reuse = Duration::from_secs(5);
        let mut c = Clocks::of_current_thread();
        let t0 = Instant::now();
        let read = c.cpu_since(t0, reuse).expect("no CPU clock");
        assert_eq!(c.last, Some((t0, read)));
        let spin = Instant::now();
        while spin.elapsed() < Duration::from_millis(2) {
            std::hint::spin_loop();
        }
        let before = c.cpu().expect("no CPU clock");
        let t1 = Instant::now();
        let bound = c.cpu_since(t1, reuse);
        assert_eq!(
            bound,
            Some(read + (t1 - t0)),
            "no syscall, from the reading"
        );
        assert!(bound >= Some(before), "{bound:?} < {before:?}");
        // Past `reuse`: a new reading.
        let later = t0 + 2 * reuse;
        let again = c.cpu_since(later, reuse);
        assert!(again.is_some() && c.last == again.map(|cpu| (later, cpu)));
    }

    #[test]
    fn the_schedstat_wait_is_read() {
        if !std::path::Path::new("/proc/self/schedstat").exists() {
            // A kernel without CONFIG_SCHED_INFO: waits count as sleep.
            return;
        }
        let w = Watchdog::for_current_thread();
        assert!(
            w.clocks.waited().is_some(),
            "no /proc/self/task/TID/schedstat"
        );
    }

    /// What arming and disarming cost (run with --ignored --nocapture):
    /// the vCPU loop pays one of each per wait.
    #[test]
    #[ignore]
    fn arm_disarm_cost() {
        let mut w = Watchdog::for_current_thread();
        let n = 200_000u32;
        for round in 0..3 {
            let t = Instant::now();
            for _ in 0..n {
                w.arm(Duration::from_secs(5));
                assert!(!w.fired());
                w.disarm();
            }
            let per = t.elapsed().as_nanos() / u128::from(n);
            eprintln!("round {round}: arm + fired + disarm: {per} ns");
        }
    }
}
