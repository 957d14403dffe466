//! A head start on the first VM.
//!
//! Most of the kernel's part of a first hypercall is spent in three ioctls:
//! `KVM_CREATE_VM` (0.3-0.5 ms on the PVM host) and `KVM_CREATE_VCPU`
//! (0.3-0.5 ms: x86 KVM patches a static key when a vCPU without an
//! in-kernel APIC is the first of its kind on the host), which depend on no
//! option, and `KVM_SET_USER_MEMORY_REGION` (0.2-0.4 ms for 256 MB: shadow
//! paging allocates the memslot's rmap), which needs guest RAM mapped.
//! [`start`] makes the first two on another CPU while the main thread parses
//! the command line and reads the `--cpl auto` decision; the first
//! [`crate::vmm::Vm::new`] of the process claims them ([`claim`]) as soon as
//! it has mapped guest RAM, and the helper registers that RAM as the VM's
//! memslot while the main thread writes the blob and page tables into it and
//! asks KVM what the vCPU needs (`arch::warm`). The VM then only sets up
//! its vCPU.
//!
//! It is only a head start. The helper makes nothing a VM of this process
//! would not make anyway, and every VM after the first makes its own. When
//! the helper cannot make something (no `/dev/kvm`, a failed ioctl), the VM
//! makes it the usual way, with the usual errors, so what the user sees
//! does not depend on it. `HYPCLEAR_PREWARM=0` turns it off.
//!
//! Placement, measured on the PVM host whose scheduler packs threads onto
//! as few vCPUs as it can (interleaved runs, first hypercall):
//! - the helper is created on a CPU of this process's affinity mask other
//!   than the caller's (the attribute is applied before it first runs):
//!   created anywhere, it was packed onto the main thread's CPU and ran
//!   only when the main thread blocked;
//! - the main thread is pinned to its CPU until the head start is over
//!   (the first VM made or failed, or the helper gave up waiting for its
//!   claim, see [`CLAIM_WAIT`] and [`release`]), then gets the process's
//!   mask back: unpinned, it was migrated onto the helper's CPU in about
//!   half the runs, and the two took turns on one CPU (0.6-0.9 ms lost, the
//!   head start worse than none);
//! - each side waits for the other spinning, for up to [`SPIN`], before it
//!   blocks: a blocked thread's vCPU halts, and waking it took 0.1-1.5 ms
//!   here.
//!
//! With no other CPU there is nothing to overlap, and no helper is started.
//! Threads and processes inherit their creator's affinity: the main thread
//! creates none before its first VM (run, verify, selftest, info, bench),
//! and the commands that do (`--kernel-tree` runs kbuild first) get no
//! head start (`cli::Cli::may_boot_vm`).
use kvm_bindings::kvm_userspace_memory_region;
use kvm_ioctls::{Kvm, VcpuFd, VmFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError, sync_channel};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// What the helper makes: `/dev/kvm`, a VM and its vCPU 0, as
/// [`crate::vmm::Vm::new`] would make them, and the outcome of registering
/// the claimant's RAM as memslot 0 (None: it was not registered).
pub struct Shell {
    pub kvm: Kvm,
    pub vm: VmFd,
    pub vcpu0: VcpuFd,
    pub memslot: Option<Result<(), kvm_ioctls::Error>>,
}

/// The two ends of the helper's channels, for the first [`claim`].
struct Pending {
    /// The claimant's guest RAM, to register as memslot 0.
    region: SyncSender<kvm_userspace_memory_region>,
    /// The helper's answer.
    shell: Receiver<Option<Shell>>,
}

static SPARE: Mutex<Option<Pending>> = Mutex::new(None);

/// What [`start`] did, for `info`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Not asked for: the command boots no VM, or this is not the binary.
    NotAsked,
    /// `HYPCLEAR_PREWARM=0`.
    Off,
    /// No CPU other than the caller's in the affinity mask.
    OneCpu,
    /// The helper thread could not be created.
    NoThread,
    Started,
}

static STATUS: OnceLock<Status> = OnceLock::new();

/// What [`start`] did in this process.
pub fn status() -> Status {
    STATUS.get().copied().unwrap_or(Status::NotAsked)
}

impl Status {
    /// One line for `info`: `used` tells whether the VM shown was the
    /// one made ahead.
    pub fn describe(self, used: bool) -> &'static str {
        match (self, used) {
            (_, true) => {
                "the first VM was made on another CPU while the options were read \
                 (HYPCLEAR_PREWARM=0 turns it off)"
            }
            (Status::Started, false) => {
                "started, but an earlier VM of this process (the --cpl auto calibration) \
                 took it, or the helper could not make the VM"
            }
            (Status::Off, _) => "off (HYPCLEAR_PREWARM=0)",
            (Status::OneCpu, _) => "none: no other CPU in this process's affinity mask",
            (Status::NoThread, _) => "none: the helper thread could not be created",
            (Status::NotAsked, _) => "none",
        }
    }
}

/// How long [`Claim::wait`] waits for the helper before the VM makes
/// everything itself. The helper takes about a millisecond; this only
/// bounds a helper stuck in an ioctl, so that the VM's own attempt reports
/// what is wrong.
const WAIT: Duration = Duration::from_secs(10);

/// How long the helper waits for the first VM's claim before it gives the
/// main thread its CPU mask back (the first VM of run and verify claims
/// about a millisecond after `main`; a `--cpl auto` calibration claims as
/// early). It still serves a later claim.
pub const CLAIM_WAIT: Duration = Duration::from_millis(50);

/// How long a side spins before it blocks on the other (see the module
/// comment): longer than the helper's whole job.
pub const SPIN: Duration = Duration::from_millis(2);

/// Stack of the helper thread: it runs a few ioctls and an allocation.
const STACK: usize = 256 << 10;

/// Whether `HYPCLEAR_PREWARM` allows the helper (anything but `0`).
fn enabled() -> bool {
    std::env::var_os("HYPCLEAR_PREWARM").is_none_or(|v| v != "0")
}

/// Start making the first VM's KVM objects on another CPU: first thing in
/// `main`, before other threads exist. Only the first call does anything;
/// returns whether a helper was started.
pub fn start() -> bool {
    *STATUS.get_or_init(start_helper) == Status::Started
}

fn start_helper() -> Status {
    if !enabled() {
        return Status::Off;
    }
    let Ok(mut spare) = SPARE.lock() else {
        return Status::NoThread;
    };
    let Some(masks) = Masks::current() else {
        return Status::OneCpu;
    };
    let main = MAIN_PIN.get_or_init(|| Pin::main_thread(&masks)).clone();
    let (region_tx, region_rx) = sync_channel(1);
    let (shell_tx, shell_rx) = sync_channel(1);
    if !spawn_on(
        &masks.others,
        Box::new(move || make(region_rx, shell_tx, &main)),
    ) {
        release();
        return Status::NoThread;
    }
    *spare = Some(Pending {
        region: region_tx,
        shell: shell_rx,
    });
    Status::Started
}

/// The helper's work. Every failure leaves the object to the VM; whatever
/// happens, the main thread gets its CPU mask back.
fn make(region: Receiver<kvm_userspace_memory_region>, tx: SyncSender<Option<Shell>>, main: &Pin) {
    let made = (|| {
        let kvm = crate::vmm::open_kvm().ok()?;
        let vm = kvm.create_vm().ok()?;
        let vcpu0 = vm.create_vcpu(0).ok()?;
        Some((kvm, vm, vcpu0))
    })();
    let Some((kvm, vm, vcpu0)) = made else {
        main.release();
        let _ = tx.send(None);
        return;
    };
    let claimed = match recv_spinning(&region, CLAIM_WAIT) {
        Ok(r) => Some(r),
        Err(RecvTimeoutError::Disconnected) => None,
        Err(RecvTimeoutError::Timeout) => {
            // No VM yet: stop holding the main thread on its CPU, and
            // still serve a later claim.
            main.release();
            region.recv().ok()
        }
    };
    let memslot = claimed.map(|r| {
        // SAFETY: `claim`'s contract: the claimant keeps `r` mapped until
        // it has dropped this VM fd (it waits for this answer first).
        unsafe { vm.set_user_memory_region(r) }
    });
    main.release();
    // The receiver is gone only if the process no longer wants it.
    let _ = tx.send(Some(Shell {
        kvm,
        vm,
        vcpu0,
        memslot,
    }));
}

/// `rx.recv_timeout(timeout)`, spinning for the first [`SPIN`] of it (see
/// the module comment).
fn recv_spinning<T>(rx: &Receiver<T>, timeout: Duration) -> Result<T, RecvTimeoutError> {
    let start = std::time::Instant::now();
    loop {
        match rx.try_recv() {
            Ok(v) => return Ok(v),
            Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
            Err(TryRecvError::Empty) => {}
        }
        let waited = start.elapsed();
        if waited >= SPIN.min(timeout) {
            return rx.recv_timeout(timeout.saturating_sub(waited));
        }
        std::hint::spin_loop();
    }
}

/// A CPU set (plain data: the kernel's bitmap).
#[derive(Clone, Copy)]
struct CpuSet(libc::cpu_set_t);

impl CpuSet {
    /// Set `tid`'s affinity (0: the calling thread).
    fn apply(&self, tid: libc::pid_t) -> bool {
        // SAFETY: the set is a valid cpu_set_t of the size passed.
        unsafe {
            libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &self.0) == 0
        }
    }
}

/// The process's CPU mask, and the same without the caller's CPU.
struct Masks {
    all: CpuSet,
    others: CpuSet,
    current: usize,
}

impl Masks {
    /// None when the caller's CPU is the only one in the mask.
    fn current() -> Option<Masks> {
        // SAFETY: a zeroed cpu_set_t is the empty set; sched_getaffinity
        // writes at most `size_of::<cpu_set_t>()` bytes into it;
        // sched_getcpu has no preconditions; CPU_CLR and CPU_COUNT stay
        // within the set for an index below CPU_SETSIZE.
        unsafe {
            let mut all: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut all) != 0 {
                return None;
            }
            let current = usize::try_from(libc::sched_getcpu()).ok()?;
            if current >= libc::CPU_SETSIZE as usize {
                return None;
            }
            let mut others = all;
            libc::CPU_CLR(current, &mut others);
            (libc::CPU_COUNT(&others) > 0).then_some(Masks {
                all: CpuSet(all),
                others: CpuSet(others),
                current,
            })
        }
    }
}

/// The main thread held on its CPU for the head start; [`Pin::release`]
/// (from either thread; the first call does it) gives it the process's
/// mask back.
#[derive(Clone)]
struct Pin(Arc<PinInner>);

struct PinInner {
    tid: libc::pid_t,
    all: CpuSet,
    held: AtomicBool,
}

impl Pin {
    /// Pin the calling (main) thread to its current CPU. A pin that cannot
    /// be set holds nothing (the head start then runs unpinned).
    fn main_thread(masks: &Masks) -> Pin {
        // SAFETY: a zeroed cpu_set_t is the empty set; `current` is below
        // CPU_SETSIZE (checked by `Masks::current`).
        let one = unsafe {
            let mut one: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(masks.current, &mut one);
            one
        };
        let held = CpuSet(one).apply(0);
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        Pin(Arc::new(PinInner {
            tid,
            all: masks.all,
            held: AtomicBool::new(held),
        }))
    }

    fn release(&self) {
        if self.0.held.swap(false, Ordering::AcqRel) {
            // Failing leaves the main thread on one CPU of its mask: slower
            // later, never wrong.
            let _ = self.0.all.apply(self.0.tid);
        }
    }
}

/// The main thread's pin for the head start (see the module comment).
static MAIN_PIN: OnceLock<Pin> = OnceLock::new();

/// End the head start's hold on the main thread (it gets the process's
/// CPU mask back); idempotent, from any thread. [`Claim::wait`] and
/// [`Claim`]'s drop do it, the helper does it when its work is over, and
/// every [`crate::vmm::Vm::new`] does it before it returns, made or failed.
pub fn release() {
    if let Some(pin) = MAIN_PIN.get() {
        pin.release();
    }
}

/// The first VM's claim on the head start, made once its guest RAM is
/// mapped; [`Claim::wait`] yields what the helper made.
pub struct Claim {
    shell: Option<Receiver<Option<Shell>>>,
}

/// Claim the head start for a VM whose guest RAM is `region`: the helper
/// registers it as memslot 0 of the VM it made. None when no helper was
/// started or another VM claimed it.
///
/// # Safety
///
/// `region` must describe a live mapping that stays mapped until the
/// returned [`Claim`] is dropped unresolved or, once [`Claim::wait`]
/// yielded a [`Shell`], until its VM fd is dropped (a VM must not outlive
/// its memslot's mapping).
pub unsafe fn claim(region: kvm_userspace_memory_region) -> Option<Claim> {
    let pending = SPARE.lock().ok()?.take()?;
    // A helper that failed has gone; it answers None, which `wait` reads.
    let _ = pending.region.send(region);
    Some(Claim {
        shell: Some(pending.shell),
    })
}

impl Claim {
    /// What the helper made (waiting for it if it is still at work): None
    /// when it could not make the VM, so the caller makes everything. The
    /// main thread has its CPU mask back afterwards.
    pub fn wait(mut self) -> Option<Shell> {
        let shell = self.shell.take()?;
        let made = recv_spinning(&shell, WAIT).ok().flatten();
        release();
        made
    }
}

impl Drop for Claim {
    /// An unresolved claim (the VM failed before it needed the shell)
    /// waits for the helper and drops what it made, so that the VM fd is
    /// closed before the caller unmaps the memslot's memory. A helper
    /// stuck in an ioctl for longer than [`WAIT`] is abandoned: its VM has
    /// no vCPU that will ever run, so nothing reads through its memslot.
    fn drop(&mut self) {
        if let Some(rx) = self.shell.take() {
            drop(rx.recv_timeout(WAIT));
        }
        release();
    }
}

type Job = Box<dyn FnOnce() + Send>;

extern "C" fn trampoline(job: *mut libc::c_void) -> *mut libc::c_void {
    // SAFETY: `job` is the `Box<Job>` leaked by `spawn_on` for this
    // thread only; it is taken back exactly once, here.
    let job: Box<Job> = unsafe { Box::from_raw(job.cast::<Job>()) };
    // A panic must not unwind into the C frame that called us; the job's
    // sender is dropped with it, which `Claim::wait` reads as "nothing
    // made".
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
    std::ptr::null_mut()
}

/// Run `job` on a detached thread that may run only on `cpus` (applied
/// before it first runs; see the module comment), with every signal
/// blocked, so that SIGINT and the watchdog's signal keep going to the
/// threads that run vCPUs. false when the thread could not be created so
/// placed (`job` is dropped unrun).
fn spawn_on(cpus: &CpuSet, job: Job) -> bool {
    let job = Box::into_raw(Box::new(job)).cast::<libc::c_void>();
    // SAFETY: the attribute object is initialised before use and destroyed
    // after; the signal masks are valid sigset_t values, and the caller's
    // mask is restored before returning (a new thread inherits the mask it
    // was created with); `job` is handed to exactly one thread, or taken
    // back here if none was created.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_attr_init(&mut attr) != 0 {
            drop(Box::from_raw(job.cast::<Job>()));
            return false;
        }
        libc::pthread_attr_setstacksize(&mut attr, STACK);
        // An unplaced helper would be packed onto the caller's CPU: none.
        if libc::pthread_attr_setaffinity_np(
            &mut attr,
            std::mem::size_of::<libc::cpu_set_t>(),
            &cpus.0,
        ) != 0
        {
            libc::pthread_attr_destroy(&mut attr);
            drop(Box::from_raw(job.cast::<Job>()));
            return false;
        }
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let mut thread: libc::pthread_t = std::mem::zeroed();
        let rc = libc::pthread_create(&mut thread, &attr, trampoline, job);
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        libc::pthread_attr_destroy(&mut attr);
        if rc != 0 {
            drop(Box::from_raw(job.cast::<Job>()));
            return false;
        }
        libc::pthread_detach(thread);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calling thread's affinity mask.
    fn affinity() -> libc::cpu_set_t {
        // SAFETY: a zeroed cpu_set_t is the empty set; sched_getaffinity
        // writes at most its size.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            assert_eq!(
                libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
                0
            );
            set
        }
    }

    fn cpus(set: &libc::cpu_set_t) -> Vec<usize> {
        (0..libc::CPU_SETSIZE as usize)
            // SAFETY: every index is below CPU_SETSIZE.
            .filter(|&c| unsafe { libc::CPU_ISSET(c, set) })
            .collect()
    }

    fn only(cpu: usize) -> CpuSet {
        // SAFETY: a zeroed cpu_set_t is the empty set; `cpu` is below
        // CPU_SETSIZE.
        unsafe {
            let mut one: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut one);
            CpuSet(one)
        }
    }

    /// Each CPU of the affinity mask in turn: the job runs on exactly
    /// that CPU, with SIGINT blocked.
    #[test]
    fn a_job_runs_only_on_the_cpus_given_with_signals_blocked() {
        for cpu in cpus(&affinity()) {
            let (tx, rx) = sync_channel(1);
            assert!(spawn_on(
                &only(cpu),
                Box::new(move || {
                    // SAFETY: sched_getcpu has no preconditions; the mask
                    // query writes one sigset_t.
                    let seen = unsafe {
                        let mut set: libc::sigset_t = std::mem::zeroed();
                        libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut set);
                        (
                            libc::sched_getcpu(),
                            libc::sigismember(&set, libc::SIGINT) == 1,
                        )
                    };
                    let _ = tx.send(seen);
                })
            ));
            let (ran_on, sigint_blocked) = rx.recv_timeout(WAIT).expect("the job ran");
            assert_eq!(
                usize::try_from(ran_on).ok(),
                Some(cpu),
                "placed on CPU {cpu}"
            );
            assert!(sigint_blocked, "the helper must not take SIGINT");
        }
    }

    #[test]
    fn a_panicking_job_reads_as_nothing_made() {
        let (tx, rx) = sync_channel::<Option<Shell>>(1);
        assert!(spawn_on(
            &CpuSet(affinity()),
            Box::new(move || {
                let _keep = tx;
                panic!("helper panic (expected by this test)");
            })
        ));
        assert!(matches!(
            rx.recv_timeout(WAIT),
            Err(RecvTimeoutError::Disconnected)
        ));
    }

    /// The pin holds the thread on its CPU; a release from another thread
    /// gives it its whole mask back, once.
    #[test]
    fn the_pin_holds_the_main_thread_until_released_from_anywhere() {
        let before = affinity();
        let Some(masks) = Masks::current() else {
            eprintln!("SKIP: one CPU in the affinity mask");
            return;
        };
        assert!(!cpus(&masks.others.0).contains(&masks.current));
        let pin = Pin::main_thread(&masks);
        assert_eq!(cpus(&affinity()), vec![masks.current]);
        let other = pin.clone();
        std::thread::spawn(move || other.release())
            .join()
            .expect("release thread");
        assert_eq!(cpus(&affinity()), cpus(&before));
        // A second release does nothing (and the first one won).
        pin.release();
        assert_eq!(cpus(&affinity()), cpus(&before));
    }

    #[test]
    fn the_spinning_wait_gets_values_timeouts_and_hangups() {
        let (tx, rx) = sync_channel(1);
        tx.send(7).expect("send");
        assert_eq!(recv_spinning(&rx, SPIN).ok(), Some(7));
        // Nothing sent: spins for SPIN, then blocks until the timeout.
        let t = std::time::Instant::now();
        assert!(matches!(
            recv_spinning(&rx, SPIN * 3),
            Err(RecvTimeoutError::Timeout)
        ));
        assert!(t.elapsed() >= SPIN * 3);
        // A value sent after the spin is still received.
        let late = std::thread::spawn(move || {
            std::thread::sleep(SPIN * 2);
            tx.send(8).expect("send");
        });
        assert_eq!(recv_spinning(&rx, WAIT).ok(), Some(8));
        late.join().expect("sender");
        // The sender is gone.
        assert!(matches!(
            recv_spinning(&rx, WAIT),
            Err(RecvTimeoutError::Disconnected)
        ));
    }
}
