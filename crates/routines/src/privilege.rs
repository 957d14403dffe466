//! Choosing the guest privilege level.
//!
//! On PVM (a paravirtual KVM without VMX/SVM) guest code at CPL 0 is
//! emulated instruction by instruction, while CPL 3 runs natively; on VMX,
//! SVM and arm64 KVM the kernel level runs natively. `--cpl auto` measures
//! instead of guessing: it runs a short calibration at the kernel level and
//! reads the vCPU's `insn_emulation` KVM statistic. The decision is cached
//! per boot (see [`CacheKey`]): a later `--cpl auto` reuses it without a
//! calibration VM, and probes again when the boot, the kernel, the KVM
//! device (a KVM module reloaded) or hypclear changed.
use crate::blob::LinkConfig;
use crate::error::{Error, Result};
use crate::vmm::memory::Backing;
use crate::vmm::{Privilege, Vm, VmOptions};
use crate::{Call, Routine};
use serde::Serialize;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum CplChoice {
    Auto,
    #[cfg_attr(feature = "cli", value(name = "0"))]
    Kernel,
    #[cfg_attr(feature = "cli", value(name = "3"))]
    User,
}

/// `--el` (aarch64): the exception level of the routines' kernel level.
/// `Auto` picks EL2 (a non-VHE guest hypervisor, as the nVHE hyp runs)
/// where KVM offers it, else EL1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum ElChoice {
    Auto,
    #[cfg_attr(feature = "cli", value(name = "1"))]
    #[serde(rename = "1")]
    El1,
    #[cfg_attr(feature = "cli", value(name = "2"))]
    #[serde(rename = "2")]
    El2,
}

/// What the command line asks for: `--cpl` (with `--no-dc-zva` folded in)
/// and `--el` (aarch64 only; `Auto` unless given).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub cpl: CplChoice,
    pub el: ElChoice,
}

/// What was asked of EL2 and what the host offers (aarch64), for `info`
/// and the JSON.
#[derive(Debug, Clone, Serialize)]
pub struct ElDecision {
    pub requested: ElChoice,
    pub offered: bool,
    pub detail: String,
}

/// The decision and why.
#[derive(Debug, Clone, Serialize)]
pub struct PrivilegeChoice {
    pub privilege: Privilege,
    pub name: &'static str,
    pub reason: String,
    /// aarch64: the `--el` request and what KVM offers for EL2.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub el: Option<ElDecision>,
    /// Emulated instructions seen during calibration at the kernel level.
    pub calibration_insn_emulation: Option<u64>,
    /// `--cpl auto` only: where the decision came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<DecisionSource>,
}

/// Whether `--cpl auto` calibrated in this process or reused the decision
/// cached earlier in this boot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DecisionSource {
    Calibrated,
    Cached { file: String },
}

impl PrivilegeChoice {
    /// "calibrated" / "cached in FILE", for `info` and the banners.
    pub fn source_text(&self) -> String {
        match &self.source {
            None => "requested".into(),
            Some(DecisionSource::Calibrated) => "calibrated now".into(),
            Some(DecisionSource::Cached { file }) => {
                format!("cached for this boot in {file}; HYPCLEAR_CPL_CACHE=0 re-probes")
            }
        }
    }
}

/// What a cached `--cpl auto` decision depends on: the boot, the running
/// kernel, the KVM device and hypclear itself. Any change makes the cache
/// miss and the next `--cpl auto` calibrate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub(crate) struct CacheKey {
    pub boot_id: String,
    pub kernel_release: String,
    pub kvm_device: KvmDevice,
    pub hypclear: String,
}

/// The KVM device's (`/dev/kvm`'s) inode and change time. devtmpfs makes
/// the node anew each time a KVM vendor module registers it, so a module
/// reloaded (another build, other parameters such as `npt=0`, another
/// vendor module) is another device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub(crate) struct KvmDevice {
    pub ino: u64,
    pub ctime: i64,
    pub ctime_nsec: i64,
}

impl KvmDevice {
    fn current() -> Option<KvmDevice> {
        Self::of(std::path::Path::new(&crate::vmm::kvm_device_path()))
    }

    fn of(path: &std::path::Path) -> Option<KvmDevice> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).ok()?;
        Some(KvmDevice {
            ino: m.ino(),
            ctime: m.ctime(),
            ctime_nsec: m.ctime_nsec(),
        })
    }
}

impl CacheKey {
    /// The key of this boot; None when the boot cannot be identified
    /// (then nothing is cached).
    pub(crate) fn current() -> Option<CacheKey> {
        // Few calls (this runs before every `--cpl auto` VM): one open and
        // one read per file (procfs hands out these few bytes in one read)
        // and one stat; no sysfs lookups (the modules' srcversion, two to
        // five lookups, cost 25-40 us here).
        let read = |p: &str| {
            use std::io::Read;
            let mut buf = [0u8; 128];
            let n = std::fs::File::open(p).ok()?.read(&mut buf).ok()?;
            std::str::from_utf8(&buf[..n])
                .ok()
                .map(|s| s.trim().to_string())
        };
        Some(CacheKey {
            boot_id: read("/proc/sys/kernel/random/boot_id")?,
            kernel_release: read("/proc/sys/kernel/osrelease")?,
            kvm_device: KvmDevice::current()?,
            hypclear: format!(
                "{} {}",
                env!("CARGO_PKG_VERSION"),
                hypclear_guest::GIT_COMMIT
            ),
        })
    }
}

/// One cached decision, as stored on disk.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
struct CacheEntry {
    key: CacheKey,
    user: bool,
    reason: String,
    calibration_insn_emulation: Option<u64>,
    /// KVM's answers the calibration had (x86: the supported CPUID), for
    /// the next process to take instead of asking (`arch::adopt`).
    #[serde(default)]
    kvm: Option<crate::arch::KvmAnswers>,
}

/// `$XDG_CACHE_HOME/hypclear` (or `~/.cache/hypclear`); None when caching
/// is off (`HYPCLEAR_CPL_CACHE=0`) or there is no cache directory.
fn cache_dir() -> Option<std::path::PathBuf> {
    if std::env::var("HYPCLEAR_CPL_CACHE").is_ok_and(|v| v == "0") {
        return None;
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cache")))?;
    Some(base.join("hypclear"))
}

/// The cache file's name in [`cache_dir`].
const CACHE_NAME: &str = "cpl-auto.json";

/// The most a cache file holds (an entry is a few hundred bytes): anything
/// larger, a device or a symlink is not a cache file.
const CACHE_MAX: u64 = 64 << 10;

/// The cache directory, checked: 0700 and this user's
/// ([`PrivateDir`](crate::files::PrivateDir)). A directory someone else
/// owns (a shared `XDG_CACHE_HOME`) is not used, with a note, so nobody can
/// plant the decision or a symlink for it.
fn open_cache(dir: &std::path::Path) -> Option<crate::files::PrivateDir> {
    match crate::files::PrivateDir::open(dir) {
        Ok(d) => Some(d),
        Err(e @ crate::files::FileError::BadTarget { .. }) => {
            static ONCE: std::sync::Once = std::sync::Once::new();
            ONCE.call_once(|| crate::errln!("note: the --cpl auto cache is not used: {e}"));
            None
        }
        Err(_) => None,
    }
}

/// The cached decision if its key matches this boot. A missing, unreadable,
/// oversized or foreign file is a miss, never an error.
fn cached(dir: &std::path::Path, key: &CacheKey) -> Option<CacheEntry> {
    let bytes = open_cache(dir)?.read(CACHE_NAME, CACHE_MAX).ok()??;
    let entry: CacheEntry = serde_json::from_slice(&bytes).ok()?;
    (entry.key == *key).then_some(entry)
}

/// Store a decision (replacing the file in one step, never through a
/// symlink); failing to write the cache only costs the next run a
/// calibration, so it is not an error.
fn store(dir: &std::path::Path, entry: &CacheEntry) {
    // Compact: it is read before every --cpl auto VM's first hypercall.
    if let (Some(d), Ok(bytes)) = (open_cache(dir), serde_json::to_vec(entry)) {
        let _ = d.write(CACHE_NAME, &bytes);
    }
}

/// Calls made at the kernel level to detect emulation.
const CALIBRATION_CALLS: u64 = 64;

fn mk(p: Privilege, reason: String, n: Option<u64>) -> PrivilegeChoice {
    PrivilegeChoice {
        privilege: p,
        name: crate::arch::privilege_name(p),
        reason,
        calibration_insn_emulation: n,
        source: None,
        el: None,
    }
}

/// The summary's wording of a guest at EL2.
pub(crate) const EL2_NVHE: &str = "nVHE, E2H=0";

/// Decide the privilege: `--el` first on aarch64 (EL2 where asked for and
/// offered), then `--cpl` for the kernel level and EL0.
pub fn choose(req: Request) -> Result<PrivilegeChoice> {
    if !cfg!(target_arch = "aarch64") {
        return choose_cpl(req.cpl);
    }
    if req.cpl == CplChoice::User {
        if req.el == ElChoice::El2 {
            return Err(Error::El2WithEl0);
        }
        return choose_cpl(req.cpl);
    }
    if req.el == ElChoice::El1 {
        return choose_cpl(req.cpl);
    }
    let hyp = crate::arch::hyp_support(&crate::vmm::open_kvm()?);
    let decision = ElDecision {
        requested: req.el,
        offered: hyp.offered,
        detail: hyp.detail.clone(),
    };
    if hyp.offered {
        let how = match req.el {
            ElChoice::El2 => "requested (--el 2)".to_string(),
            _ => format!("--el auto: {}", hyp.detail),
        };
        let mut c = mk(Privilege::Hyp, format!("{EL2_NVHE}; {how}"), None);
        c.el = Some(decision);
        return Ok(c);
    }
    if req.el == ElChoice::El2 {
        return Err(crate::error::VmmError::Unsupported {
            what: "a guest at EL2 (--el 2)",
            detail: hyp.detail,
        }
        .into());
    }
    let mut c = choose_cpl(req.cpl)?;
    // The first clause only (the JSON and `info` carry the whole detail).
    let lacks = hyp.detail.split(": ").next().unwrap_or(&hyp.detail);
    c.reason = format!("{}; not EL2 (--el auto): {lacks}", c.reason);
    c.el = Some(decision);
    Ok(c)
}

fn choose_cpl(choice: CplChoice) -> Result<PrivilegeChoice> {
    match choice {
        CplChoice::Kernel => return Ok(mk(Privilege::Kernel, "requested".into(), None)),
        CplChoice::User => return Ok(mk(Privilege::User, "requested".into(), None)),
        CplChoice::Auto => {}
    }
    let dir = cache_dir();
    let key = CacheKey::current();
    if let (Some(dir), Some(key)) = (&dir, &key)
        && let Some(e) = cached(dir, key)
    {
        let p = if e.user {
            Privilege::User
        } else {
            Privilege::Kernel
        };
        if let Some(a) = &e.kvm {
            crate::arch::adopt(a);
        }
        let mut c = mk(p, e.reason, e.calibration_insn_emulation);
        c.source = Some(DecisionSource::Cached {
            file: dir.join(CACHE_NAME).display().to_string(),
        });
        return Ok(c);
    }
    let mut c = decide(calibrate()?);
    c.source = Some(DecisionSource::Calibrated);
    if let (Some(dir), Some(key)) = (dir, key) {
        store(
            &dir,
            &CacheEntry {
                key,
                user: c.privilege == Privilege::User,
                reason: c.reason.clone(),
                calibration_insn_emulation: c.calibration_insn_emulation,
                kvm: crate::arch::kvm_answers(),
            },
        );
    }
    Ok(c)
}

/// The decision from a calibration's emulated-instruction count.
fn decide(emulated: Option<u64>) -> PrivilegeChoice {
    match emulated {
        Some(n) if n >= CALIBRATION_CALLS => mk(
            Privilege::User,
            format!(
                "kernel-level guest code is emulated here ({n} emulated instructions \
                 for {CALIBRATION_CALLS} calibration calls; KVM flavour {})",
                crate::arch::kvm_flavour()
            ),
            Some(n),
        ),
        Some(n) => mk(
            Privilege::Kernel,
            format!(
                "kernel-level guest code runs natively ({n} emulated instructions in calibration)"
            ),
            Some(n),
        ),
        None if crate::arch::kvm_flavour() == crate::arch::KvmFlavour::Pvm => mk(
            Privilege::User,
            "no KVM stats; the kvm_pvm module emulates kernel-level guest code".into(),
            None,
        ),
        None => mk(
            Privilege::Kernel,
            "KVM has no insn_emulation statistic here (arm64, or an older kernel): \
             the kernel level is taken to run natively"
                .into(),
            None,
        ),
    }
}

/// Emulated instructions during a short kernel-level run, if KVM says.
fn calibrate() -> Result<Option<u64>> {
    let kvm2 = crate::vmm::open_kvm()?;
    // The built-in blob: what is calibrated is KVM, not the routines.
    let side = crate::kernel::Side::Builtin(LinkConfig::Memset);
    let opts = VmOptions {
        mem: crate::arch::MIN_RAM,
        backing: Backing::Anon,
        prefault: false,
        privilege: Privilege::Kernel,
        blob: side.blob()?,
        vcpus: 1,
        seed: 0,
        vm_type: hypclear_vmm::VmType::Normal,
    };
    let mut vm = Vm::new(kvm2, &opts)?;
    let v = crate::variants(Routine::Memset, &side)
        .into_iter()
        .find(|v| v.requires.is_none())
        .ok_or(Error::NoPlainVariant {
            routine: Routine::Memset,
        })?;
    let call = Call {
        routine: Routine::Memset,
        dst: crate::arch::ARENA_BASE,
        src: 0,
        fill: 0x5a,
        len: 256,
        count: CALIBRATION_CALLS,
        step: 0,
    };
    let cmd = crate::command(&vm.blob, v, &call)?;
    let timeout = Duration::from_secs(10);
    let cpu = vm.vcpu(0)?;
    cpu.start(timeout)?;
    // Warm up once (first touch of the page), then measure.
    cpu.call(&cmd, timeout)?;
    let r = cpu.call_with_stats(&cmd, timeout)?;
    Ok(r.stats.get("insn_emulation").copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> CacheKey {
        CacheKey {
            boot_id: "b".into(),
            kernel_release: "6.18".into(),
            kvm_device: KvmDevice {
                ino: 82,
                ctime: 1_764_923_883,
                ctime_nsec: 35_629_609,
            },
            hypclear: "0.1.0 x".into(),
        }
    }

    #[test]
    fn cache_hits_only_for_the_same_boot_kernel_device_and_build() {
        let dir = std::env::temp_dir().join(format!("hypclear-cpl-{}", std::process::id()));
        let file = dir.join(CACHE_NAME);
        let entry = CacheEntry {
            key: key(),
            user: true,
            reason: "emulated".into(),
            calibration_insn_emulation: Some(1067),
            kvm: None,
        };
        assert!(cached(&dir, &key()).is_none(), "no file is a miss");
        store(&dir, &entry);
        let hit = cached(&dir, &key()).expect("same key hits");
        assert!(hit.user && hit.calibration_insn_emulation == Some(1067));
        for changed in [
            CacheKey {
                boot_id: "other".into(),
                ..key()
            },
            CacheKey {
                kernel_release: "6.19".into(),
                ..key()
            },
            CacheKey {
                kvm_device: KvmDevice {
                    ino: 83,
                    ..key().kvm_device
                },
                ..key()
            },
            CacheKey {
                kvm_device: KvmDevice {
                    ctime_nsec: key().kvm_device.ctime_nsec + 1,
                    ..key().kvm_device
                },
                ..key()
            },
            CacheKey {
                hypclear: "0.2.0".into(),
                ..key()
            },
        ] {
            assert!(
                cached(&dir, &changed).is_none(),
                "{changed:?} must re-probe"
            );
        }
        std::fs::write(&file, "not json").expect("write");
        assert!(cached(&dir, &key()).is_none(), "a corrupt file is a miss");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A node made anew (a module reloaded: devtmpfs removes and creates
    /// /dev/kvm) is another device, even where the inode number is reused.
    #[test]
    fn a_device_node_made_again_is_another_device() {
        let node = std::env::temp_dir().join(format!("hypclear-kvm-node-{}", std::process::id()));
        std::fs::write(&node, "").unwrap();
        let before = KvmDevice::of(&node).expect("the node");
        assert_eq!(KvmDevice::of(&node), Some(before), "the same node");
        std::fs::remove_file(&node).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(10));
        std::fs::write(&node, "").unwrap();
        assert_ne!(KvmDevice::of(&node), Some(before));
        std::fs::remove_file(&node).unwrap();
        assert_eq!(KvmDevice::of(&node), None, "no device, no key");
    }

    /// Issue 38: a cache file planted as a symlink was written through (a
    /// predictable temporary name, `std::fs::write`), and one pointing at
    /// /dev/zero was read without end.
    #[test]
    fn the_cache_never_follows_a_planted_symlink_nor_reads_without_bound() {
        let base = std::env::temp_dir().join(format!("hypclear-cpl-plant-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let dir = base.join("hypclear");
        std::fs::create_dir_all(&dir).unwrap();
        let victim = base.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let tmp = dir.join(format!("cpl-auto.tmp{}", std::process::id()));
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();
        std::os::unix::fs::symlink(&victim, dir.join(CACHE_NAME)).unwrap();
        let entry = CacheEntry {
            key: key(),
            user: false,
            reason: "native".into(),
            calibration_insn_emulation: Some(0),
            kvm: None,
        };
        store(&dir, &entry);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(cached(&dir, &key()).is_some(), "the symlink was replaced");
        std::fs::remove_file(dir.join(CACHE_NAME)).unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.join(CACHE_NAME)).unwrap();
        let t = std::time::Instant::now();
        assert!(cached(&dir, &key()).is_none());
        assert!(t.elapsed() < std::time::Duration::from_millis(500));
        let _ = std::fs::remove_dir_all(&base);
    }

    /// A cached decision hands the calibration's KVM answers to the next
    /// process (x86: the supported CPUID, then not asked of KVM again before
    /// the first hypercall). The answers are the process's, so the hit runs
    /// in a child of this test.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn a_cache_hit_hands_over_kvms_answers() {
        let answers: crate::arch::KvmAnswers = serde_json::from_str(
            r#"{"cpuid": [[0,0,0,13,1752462657,1145913699,1769238117],[1,0,0,10555153,0,0,0]]}"#,
        )
        .expect("answers");
        if std::env::var_os("HYPCLEAR_ADOPT_CHILD").is_some() {
            let key = CacheKey::current().expect("this boot's key");
            let dir = cache_dir().expect("the cache directory");
            let entry = CacheEntry {
                key,
                user: true,
                reason: "emulated".into(),
                calibration_insn_emulation: Some(1067),
                kvm: Some(answers.clone()),
            };
            store(&dir, &entry);
            assert!(crate::arch::kvm_answers().is_none(), "nothing asked yet");
            let c = choose_cpl(CplChoice::Auto).expect("the cached decision");
            assert!(matches!(c.source, Some(DecisionSource::Cached { .. })));
            assert_eq!(crate::arch::kvm_answers(), Some(answers));
            return;
        }
        let base = std::env::temp_dir().join(format!("hypclear-adopt-{}", std::process::id()));
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "privilege::tests::a_cache_hit_hands_over_kvms_answers",
            ])
            .env("HYPCLEAR_ADOPT_CHILD", "1")
            .env("XDG_CACHE_HOME", &base)
            .env_remove("HYPCLEAR_CPL_CACHE")
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&base);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("1 passed"), "{text}");
    }

    #[test]
    fn decision_from_the_emulation_count() {
        assert_eq!(decide(Some(1067)).privilege, Privilege::User);
        assert_eq!(decide(Some(0)).privilege, Privilege::Kernel);
    }
}
