//! Guest RAM: one anonymous mapping registered with vm-memory (and, for a
//! VM, with KVM). `bench`'s host baseline runs on it too, at the guest's
//! placement, so guest and host runs touch the very same pages.
//!
//! `--backing anon` uses 4 KiB pages (THP explicitly off), `thp` asks for
//! transparent huge pages with `MADV_HUGEPAGE`, `hugetlb` maps 2 MiB pages
//! from the hugetlb pool. `--prefault` populates the host side up front
//! (`MAP_POPULATE`), so only the guest's own first touch remains.
pub use crate::backing::Backing;
use crate::error::{Error, Result};
use vm_memory::{
    Bytes, GuestAddress, GuestMemoryMmap, GuestRegionMmap, MmapRegion, mmap::MmapRegionBuilder,
};

/// Whether the host refuses transparent huge pages outright
/// (`/sys/kernel/mm/transparent_hugepage/enabled` reads `[never]`): then
/// the thp backing gets 4 KiB pages, as anon does. `false` when the file
/// is missing or unreadable (no claim either way).
pub fn thp_refused() -> bool {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .is_ok_and(|s| s.contains("[never]"))
}

/// What `smaps` (the text of /proc/self/smaps) says of `[start, start +
/// len)`, in kB: resident (`Rss`, plus hugetlb's `Private_Hugetlb` and
/// `Shared_Hugetlb`, which Rss leaves out) and of that on huge pages
/// (THP's `AnonHugePages` plus the hugetlb fields), over every mapping
/// that overlaps the range (the kernel splits and merges them), a mapping
/// reaching outside it counted pro rata. `None` when none overlaps.
fn smaps_residency(smaps: &str, start: u64, len: u64) -> Option<Residency> {
    let end = start.saturating_add(len);
    let mut total: Option<Residency> = None;
    let mut cur: Option<f64> = None; // overlap share of the current mapping
    for l in smaps.lines() {
        let first = l.split_whitespace().next().unwrap_or("");
        if let Some((lo, hi)) = first.split_once('-')
            && let (Ok(lo), Ok(hi)) = (u64::from_str_radix(lo, 16), u64::from_str_radix(hi, 16))
        {
            let overlap = hi.min(end).saturating_sub(lo.max(start));
            cur = (overlap > 0 && hi > lo).then(|| overlap as f64 / (hi - lo) as f64);
            if cur.is_some() {
                total.get_or_insert_default();
            }
            continue;
        }
        let (Some(share), Some(t)) = (cur, total.as_mut()) else {
            continue;
        };
        let Some(kb) = l
            .split_whitespace()
            .nth(1)
            .and_then(|v| v.parse::<f64>().ok())
        else {
            continue;
        };
        let kb = kb * share;
        match first {
            "Rss:" => t.resident_kb += kb,
            "AnonHugePages:" => t.huge_kb += kb,
            "Private_Hugetlb:" | "Shared_Hugetlb:" => {
                t.resident_kb += kb;
                t.huge_kb += kb;
            }
            _ => {}
        }
    }
    total
}

/// Resident memory of a range and how much of it is on huge pages, kB.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Residency {
    resident_kb: f64,
    huge_kb: f64,
}

/// Address space a run maps beyond the guest RAM and buffers it names
/// (the binary, thread stacks, allocator arenas), at the least: a 1 GB
/// bench without host baseline ran under `ulimit -v 1200000`, so the real
/// figure is below 150 MB; a run the check lets through may still fail
/// to map, with the OS error.
const MAP_OVERHEAD: u64 = 64 << 20;

/// A `/proc/meminfo`-style field (`"MemTotal:"`) of `text`, in its unit (kB).
fn kb_field(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
}

/// Check, before any VM exists, that `size` bytes of guest RAM (and the
/// buffers beside it) can be mapped: within the host's memory (MemTotal;
/// `HYPCLEAR_MEM_OVERCOMMIT=1` allows more, for guests that touch little),
/// within RLIMIT_AS, and for `backing` hugetlb in the free huge pages.
pub fn precheck(size: u64, backing: Backing) -> Result<()> {
    let overcommit = std::env::var("HYPCLEAR_MEM_OVERCOMMIT").is_ok_and(|v| v == "1");
    if let Some(total) = total_ram()
        && size > total
        && !overcommit
    {
        return Err(Error::Usage(format!(
            "{} of guest RAM and buffers is more than this host's memory (MemTotal {}); give \
             --mem (bench: -s) at most that, or set HYPCLEAR_MEM_OVERCOMMIT=1 if the guest \
             touches only part of it",
            crate::units::format_size(size),
            gib(total)
        )));
    }
    // What is mapped already matters only under a limit (procfs text
    // costs ~0.03 ms before every first hypercall).
    let limit = rlimit_as();
    let status = limit.map(|_| self_status()).unwrap_or_default();
    check_address_space(size.saturating_add(MAP_OVERHEAD), limit, &status)?;
    if backing != Backing::Hugetlb {
        return Ok(());
    }
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let field = |name: &str| kb_field(&meminfo, name);
    let free = field("HugePages_Free:").unwrap_or(0);
    let page_kb = field("Hugepagesize:").unwrap_or(2048);
    let need = size.div_ceil(2 << 20);
    if page_kb != 2048 || free < need {
        return Err(Error::Memory {
            size,
            backing,
            detail: format!(
                "only {free} free huge pages of {page_kb} kB, {need} of 2 MiB needed; reserve them \
                 first, e.g. `echo {} > /proc/sys/vm/nr_hugepages`",
                need + 8
            ),
        });
    }
    Ok(())
}

/// Memory this process may still use: `MemAvailable`, and the room left
/// under the memory limit of its cgroup and every ancestor (v2
/// `memory.max`, or the v1 memory controller's `memory.limit_in_bytes` on
/// hybrid hosts); with the source of the smallest. None when nothing can
/// be read. Read once per process: each read walks the cgroup hierarchy (a
/// few hundred microseconds). run and verify read it after their first VM
/// has booted: a thread spawned to read it during the boot delayed the
/// first hypercall by 0.6 ms at the median.
pub fn host_available() -> Option<(u64, String)> {
    static ONCE: std::sync::OnceLock<Option<(u64, String)>> = std::sync::OnceLock::new();
    ONCE.get_or_init(read_host_available).clone()
}

fn read_host_available() -> Option<(u64, String)> {
    let mut best: Option<(u64, String)> = None;
    let mut offer = |v: u64, what: String| {
        if best.as_ref().is_none_or(|(b, _)| v < *b) {
            best = Some((v, what));
        }
    };
    if let Ok(m) = std::fs::read_to_string("/proc/meminfo")
        && let Some(kb) = m
            .lines()
            .find(|l| l.starts_with("MemAvailable:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
    {
        offer(
            kb.saturating_mul(1024),
            "MemAvailable in /proc/meminfo".into(),
        );
    }
    let cg = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mi = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    for (mount, mut dir, v) in cgroup_memory_dirs(&cg, &mi) {
        let (max_f, used_f) = match v {
            CgroupVersion::V2 => ("memory.max", "memory.current"),
            CgroupVersion::V1 => ("memory.limit_in_bytes", "memory.usage_in_bytes"),
        };
        loop {
            let read = |f: &str| {
                std::fs::read_to_string(dir.join(f))
                    .ok()
                    .and_then(|s| s.trim().parse::<u64>().ok())
            };
            // "max" (v2) does not parse: no limit at this level.
            if let Some(max) = read(max_f) {
                let used = read(used_f).unwrap_or(0);
                offer(
                    max.saturating_sub(used),
                    format!("cgroup limit {}/{max_f} minus {used_f}", dir.display()),
                );
            }
            if dir == mount || !dir.pop() || !dir.starts_with(&mount) {
                break;
            }
        }
    }
    best
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CgroupVersion {
    V1,
    V2,
}

/// The cgroups whose memory limits bind this process, from
/// `/proc/self/cgroup` and `/proc/self/mountinfo`: (hierarchy mount point,
/// this process's cgroup directory under it, version) for the v2
/// hierarchy and the v1 memory controller, where mounted.
fn cgroup_memory_dirs(
    proc_cgroup: &str,
    mountinfo: &str,
) -> Vec<(std::path::PathBuf, std::path::PathBuf, CgroupVersion)> {
    let mut out = Vec::new();
    for line in mountinfo.lines() {
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        let pre: Vec<&str> = pre.split_whitespace().collect();
        let post: Vec<&str> = post.split_whitespace().collect();
        let (Some(root), Some(mount), Some(fstype)) = (pre.get(3), pre.get(4), post.first()) else {
            continue;
        };
        let version = match *fstype {
            "cgroup2" => CgroupVersion::V2,
            "cgroup"
                if post
                    .get(2)
                    .is_some_and(|o| o.split(',').any(|x| x == "memory")) =>
            {
                CgroupVersion::V1
            }
            _ => continue,
        };
        // "0::/path" (v2); "N:a,memory,b:/path" (v1).
        let path = proc_cgroup.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctrl, path) = (f.next()?, f.next()?, f.next()?);
            let hit = match version {
                CgroupVersion::V2 => ctrl.is_empty(),
                CgroupVersion::V1 => ctrl.split(',').any(|c| c == "memory"),
            };
            hit.then_some(path)
        });
        let Some(path) = path else { continue };
        // Inside a cgroup namespace the mount's root is a prefix of the path.
        let rel = path
            .strip_prefix(root)
            .unwrap_or(path)
            .trim_start_matches('/');
        let mount = std::path::PathBuf::from(mount);
        if out.iter().any(|(m, _, _)| *m == mount) {
            continue;
        }
        out.push((mount.clone(), mount.join(rel), version));
    }
    out
}

/// Check, before anything is allocated, that `need` bytes for `what` fit
/// in the host memory this process may use (exit 2 naming the need).
pub fn check_host_memory(need: u64, what: &str) -> Result<()> {
    let Some((available, detail)) = host_available() else {
        return Ok(());
    };
    if need > available {
        return Err(Error::HostMemory {
            what: what.into(),
            need,
            available,
            detail,
        });
    }
    Ok(())
}

/// `bytes` as GiB with one decimal ("23.5GB", GB = 2^30 as in --mem).
fn gib(bytes: u64) -> String {
    format!("{:.1}GB", bytes as f64 / f64::from(1u32 << 30))
}

/// The host's RAM in bytes (MemTotal, from sysinfo(2): one call, where
/// /proc/meminfo is text the kernel formats for every read).
fn total_ram() -> Option<u64> {
    // SAFETY: a zeroed sysinfo is a valid value for the call to fill in.
    let mut i: libc::sysinfo = unsafe { std::mem::zeroed() };
    // SAFETY: `i` is valid for the call.
    if unsafe { libc::sysinfo(&mut i) } != 0 {
        return None;
    }
    i.totalram.checked_mul(u64::from(i.mem_unit.max(1)))
}

/// This process's RLIMIT_AS (`ulimit -v`) in bytes; None when unlimited.
fn rlimit_as() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid rlimit to fill in.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut r) };
    (rc == 0 && r.rlim_cur != libc::RLIM_INFINITY).then_some(r.rlim_cur)
}

fn self_status() -> String {
    std::fs::read_to_string("/proc/self/status").unwrap_or_default()
}

/// Whether `need` more bytes of address space fit under `limit` (RLIMIT_AS),
/// given what is mapped already (VmSize in `status`, /proc/self/status).
fn check_address_space(need: u64, limit: Option<u64>, status: &str) -> Result<()> {
    let Some(limit) = limit else { return Ok(()) };
    let mapped = kb_field(status, "VmSize:").map_or(0, |kb| kb.saturating_mul(1024));
    if mapped.saturating_add(need) <= limit {
        return Ok(());
    }
    Err(Error::AddressSpace {
        need,
        limit,
        limit_kb: limit / 1024,
        mapped,
        suggest_kb: mapped.saturating_add(need).div_ceil(1024),
    })
}

/// Guest RAM at `[base, base + size)`.
pub struct GuestRam {
    mem: GuestMemoryMmap,
    base: u64,
    size: u64,
    host: *mut u8,
    pub backing: Backing,
}

impl GuestRam {
    /// Share of this mapping's resident memory on huge pages now (0..=1),
    /// from /proc/self/smaps: what the kernel granted where the run
    /// touched, where `backing` is what was asked (pages never touched
    /// are no page size at all). `None` when smaps cannot be read, lists
    /// no such mapping, or nothing of it is resident.
    pub fn huge_share(&self) -> Option<f64> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let r = smaps_residency(&smaps, self.host as u64, self.size)?;
        (r.resident_kb > 0.0).then(|| (r.huge_kb / r.resident_kb).min(1.0))
    }
}

// SAFETY: the raw pointer is the start of a mapping owned by `mem`, which is
// Send + Sync; GuestRam hands out access only through bounds-checked methods.
unsafe impl Send for GuestRam {}
// SAFETY: as for Send; shared access is bounds checked and copies, and
// views exist only through the unsafe `slice`/`slice_mut` and their contracts.
unsafe impl Sync for GuestRam {}

/// MADV_POPULATE_WRITE (Linux 5.14, one value on every architecture; the
/// libc crate does not name it yet).
const MADV_POPULATE_WRITE: libc::c_int = 23;

/// Fault in `[host, host + len)` for writing, as MAP_POPULATE would, after
/// its huge page advice. Kernels before 5.14 refuse the advice (EINVAL):
/// then each 4 KiB page is written once.
///
/// # Safety
/// The range must be a private anonymous mapping of the caller's that
/// nothing else uses yet (its zero bytes are written again).
unsafe fn populate(host: *mut u8, len: usize) -> std::result::Result<(), String> {
    // SAFETY: the caller's mapping.
    if unsafe { libc::madvise(host.cast(), len, MADV_POPULATE_WRITE) } == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::EINVAL) {
        return Err(format!("madvise(MADV_POPULATE_WRITE): {e}"));
    }
    for off in (0..len).step_by(4096) {
        // SAFETY: off < len, inside the caller's mapping; it holds zeros.
        unsafe { host.add(off).write_volatile(0) };
    }
    Ok(())
}

/// The mmap flags of guest RAM with `backing`.
fn mmap_flags(backing: Backing, prefault: bool) -> libc::c_int {
    let mut flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
    if backing == Backing::Hugetlb {
        // No MAP_NORESERVE here: the pool must be reserved at mmap time,
        // or a short pool turns into SIGBUS on first touch.
        flags |= libc::MAP_HUGETLB | libc::MAP_HUGE_2MB;
    } else {
        flags |= libc::MAP_NORESERVE;
    }
    // MAP_POPULATE would fault anon and thp memory in before the
    // madvise in `GuestRam::new`, in pages of whatever size THP's global
    // setting gives (4 KiB under `[madvise]`: a thp run on small pages);
    // those are populated after the advice instead. hugetlb has no advice.
    if prefault && backing == Backing::Hugetlb {
        flags |= libc::MAP_POPULATE;
    }
    flags
}

impl GuestRam {
    pub fn new(base: u64, size: u64, backing: Backing, prefault: bool) -> Result<Self> {
        let err = |detail: String| Error::Memory {
            size,
            backing,
            detail,
        };
        let len = usize::try_from(size).map_err(|_| err("size does not fit in usize".into()))?;
        let region: MmapRegion = MmapRegionBuilder::new(len)
            .with_mmap_prot(libc::PROT_READ | libc::PROT_WRITE)
            .with_mmap_flags(mmap_flags(backing, prefault))
            .with_hugetlbfs(backing == Backing::Hugetlb)
            .build()
            .map_err(|e| {
                err(if backing == Backing::Hugetlb {
                    format!(
                        "{e}; reserve 2 MiB pages first, e.g. \
                         `echo {} > /proc/sys/vm/nr_hugepages`",
                        size.div_ceil(2 << 20) + 8
                    )
                } else {
                    e.to_string()
                })
            })?;
        let host = region.as_ptr();
        let advice = match backing {
            Backing::Anon => Some(libc::MADV_NOHUGEPAGE),
            Backing::Thp => Some(libc::MADV_HUGEPAGE),
            Backing::Hugetlb => None,
        };
        if let Some(advice) = advice {
            // SAFETY: host..host+len is the mapping just created.
            let rc = unsafe { libc::madvise(host.cast(), len, advice) };
            if rc != 0 {
                return Err(err(format!("madvise: {}", std::io::Error::last_os_error())));
            }
            if prefault {
                // SAFETY: as above; nothing else maps or reads it yet.
                unsafe { populate(host, len) }.map_err(err)?;
            }
        }
        let region = GuestRegionMmap::new(region, GuestAddress(base))
            .ok_or_else(|| err("region wraps the guest address space".into()))?;
        let mem = GuestMemoryMmap::from_regions(vec![region]).map_err(|e| err(e.to_string()))?;
        Ok(GuestRam {
            mem,
            base,
            size,
            host,
            backing,
        })
    }

    pub fn mem(&self) -> &GuestMemoryMmap {
        &self.mem
    }

    pub fn base(&self) -> u64 {
        self.base
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn end(&self) -> u64 {
        self.base + self.size
    }

    pub fn host_addr(&self) -> u64 {
        self.host as u64
    }

    /// The host address of guest bytes `[gpa, gpa + len)`, all of which
    /// lie in this RAM (the host baseline calls a routine on them).
    pub fn host_range(&self, gpa: u64, len: u64) -> Result<u64> {
        Ok(self.host_addr() + self.check(gpa, len)? as u64)
    }

    fn check(&self, gpa: u64, len: u64) -> Result<usize> {
        let end = gpa.checked_add(len);
        if gpa < self.base || end.is_none_or(|e| e > self.end()) {
            return Err(Error::GuestMemory {
                gpa,
                len,
                detail: format!("outside guest RAM [{:#x}, {:#x})", self.base, self.end()),
            });
        }
        Ok((gpa - self.base) as usize)
    }

    /// Guest RAM as a byte slice (bounds checked).
    ///
    /// # Safety
    ///
    /// While the returned slice lives, no vCPU may run (vCPUs run only
    /// inside `Vcpu` methods, which return with the guest stopped in the
    /// host) and nothing may write the range: the guest can write any of
    /// its RAM, and a shared slice that changes underneath is undefined
    /// behaviour. To read memory a running guest may write, use
    /// [`GuestRam::read_into`], which copies.
    pub unsafe fn slice(&self, gpa: u64, len: u64) -> Result<&[u8]> {
        let off = self.check(gpa, len)?;
        // SAFETY: bounds checked against the mapping owned by self; the
        // caller guarantees no concurrent writer (see the contract above).
        Ok(unsafe { std::slice::from_raw_parts(self.host.add(off), len as usize) })
    }

    /// Copy `[gpa, gpa + buf.len())` into a host buffer. Safe while the
    /// guest runs: vm-memory copies with volatile accesses, and the caller
    /// decides on the copy only (a concurrent writer can only make it stale).
    pub fn read_into(&self, gpa: u64, buf: &mut [u8]) -> Result<()> {
        self.mem
            .read_slice(buf, GuestAddress(gpa))
            .map_err(|e| Error::GuestMemory {
                gpa,
                len: buf.len() as u64,
                detail: e.to_string(),
            })
    }

    /// Mutable view of guest RAM (bounds checked).
    ///
    /// # Safety
    ///
    /// While the returned slice lives, nothing else may read or write
    /// `[gpa, gpa + len)`: no vCPU may be running (vCPUs run only inside
    /// `Vcpu` methods, which return with the guest stopped in the host), and
    /// the caller holds no other slice of the range.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice_mut(&self, gpa: u64, len: u64) -> Result<&mut [u8]> {
        let off = self.check(gpa, len)?;
        // SAFETY: bounds checked against the mapping owned by self; the
        // caller guarantees exclusive access (see the contract above).
        Ok(unsafe { std::slice::from_raw_parts_mut(self.host.add(off), len as usize) })
    }

    /// Give the pages of `[gpa, gpa + len)` back (`MADV_DONTNEED`, widened
    /// to whole 4 KiB pages) so the next touch faults them in again; they
    /// read as zero afterwards.
    pub fn discard(&self, gpa: u64, len: u64) -> Result<()> {
        let off = self.check(gpa, len)? as u64;
        let start = off & !4095;
        let end = (off + len).next_multiple_of(4096).min(self.size);
        // SAFETY: [start, end) lies inside the private anonymous mapping
        // owned by self (bounds checked above); DONTNEED only drops its
        // contents, which no Rust reference observes as a typed value.
        let rc = unsafe {
            libc::madvise(
                self.host.add(start as usize).cast(),
                (end - start) as usize,
                libc::MADV_DONTNEED,
            )
        };
        if rc != 0 {
            return Err(Error::Usage(format!(
                "madvise(MADV_DONTNEED) failed: {} (demand fill needs a backing that can drop pages)",
                std::io::Error::last_os_error()
            )));
        }
        Ok(())
    }

    /// Keep this mapping out of any child a fork would make
    /// (`MADV_DONTFORK`): a pKVM protected guest's pinned pages are then
    /// never copied (which would make the hypervisor reclaim them).
    pub(crate) fn dont_fork(&self) -> Result<()> {
        // SAFETY: host..host+size is the mapping owned by self; DONTFORK
        // changes only what a fork inherits.
        let rc =
            unsafe { libc::madvise(self.host.cast(), self.size as usize, libc::MADV_DONTFORK) };
        if rc != 0 {
            return Err(Error::Memory {
                size: self.size,
                backing: self.backing,
                detail: format!(
                    "madvise(MADV_DONTFORK): {}",
                    std::io::Error::last_os_error()
                ),
            });
        }
        Ok(())
    }

    /// Write back and evict `[gpa, gpa + len)` from every cache level
    /// (`arch::evict` over the host mapping): the cold-cache precondition of
    /// a bench run, before guest and host passes alike.
    pub fn evict(&self, gpa: u64, len: u64) -> Result<()> {
        let off = self.check(gpa, len)?;
        // SAFETY: bounds checked against the mapping owned by self, which
        // stays mapped while self lives; no reference to the bytes is made.
        unsafe { crate::arch::evict(self.host.add(off), len as usize) };
        Ok(())
    }

    pub fn write_u64(&self, gpa: u64, v: u64) -> Result<()> {
        self.mem
            .write_obj(v, GuestAddress(gpa))
            .map_err(|e| Error::GuestMemory {
                gpa,
                len: 8,
                detail: e.to_string(),
            })
    }

    pub fn read_u64(&self, gpa: u64) -> Result<u64> {
        self.mem
            .read_obj(GuestAddress(gpa))
            .map_err(|e| Error::GuestMemory {
                gpa,
                len: 8,
                detail: e.to_string(),
            })
    }

    pub fn write_bytes(&self, gpa: u64, b: &[u8]) -> Result<()> {
        Ok(crate::arch::RamAccess::write_bytes(self, gpa, b)?)
    }
}

impl crate::arch::RamAccess for GuestRam {
    fn base(&self) -> u64 {
        self.base
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn write_bytes(
        &self,
        gpa: u64,
        bytes: &[u8],
    ) -> std::result::Result<(), crate::arch::RamError> {
        self.mem
            .write_slice(bytes, GuestAddress(gpa))
            .map_err(|e| crate::arch::RamError {
                gpa,
                len: bytes.len() as u64,
                detail: e.to_string(),
            })
    }

    fn mem(&self) -> &GuestMemoryMmap {
        GuestRam::mem(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Failure;
    use std::path::PathBuf;

    #[test]
    fn total_ram_is_meminfos_memtotal() {
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
        let kb = kb_field(&meminfo, "MemTotal:").unwrap();
        assert_eq!(total_ram(), Some(kb * 1024));
    }

    /// `--prefault` with thp: populated after MADV_HUGEPAGE, so on huge
    /// pages (MAP_POPULATE before the advice gave 4 KiB pages under THP
    /// `[madvise]`: 0% where the unpopulated run had 97%); anon stays small.
    #[test]
    fn a_prefaulted_thp_region_is_on_huge_pages() {
        if thp_refused() {
            eprintln!("SKIP: THP is [never] on this host");
            return;
        }
        let size = 32 << 20;
        let thp = GuestRam::new(0, size, Backing::Thp, true).unwrap();
        let share = thp.huge_share().unwrap();
        assert!(share > 0.5, "thp prefaulted: {share}");
        let anon = GuestRam::new(0, size, Backing::Anon, true).unwrap();
        assert_eq!(anon.huge_share(), Some(0.0));
    }

    /// Issue 25 case 10: `ulimit -v 2000000` and a 1 GB bench failed late
    /// with a raw ENOMEM; the check names RLIMIT_AS and what to set.
    #[test]
    fn the_address_space_limit_is_checked_and_named() {
        let status = "Name:\thypclear\nVmSize:\t  100000 kB\n";
        assert!(check_address_space(1 << 30, None, status).is_ok());
        assert!(check_address_space(1 << 30, Some(2_000_000 << 10), status).is_ok());
        let e = check_address_space(2 << 30, Some(2_000_000 << 10), status).unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("RLIMIT_AS") && m.contains("ulimit -v 2197152"),
            "{m}"
        );
        assert_eq!(e.exit_code(), crate::error::EXIT_USAGE);
    }

    #[test]
    fn cgroup_dirs_for_v2_and_hybrid_v1_hosts() {
        // Pure v2 (systemd): one hierarchy at /sys/fs/cgroup.
        let mi = "35 24 0:30 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n\
                  36 24 0:31 / /proc rw - proc proc rw\n";
        let cg = "0::/user.slice/session-1.scope\n";
        assert_eq!(
            cgroup_memory_dirs(cg, mi),
            vec![(
                PathBuf::from("/sys/fs/cgroup"),
                PathBuf::from("/sys/fs/cgroup/user.slice/session-1.scope"),
                CgroupVersion::V2
            )]
        );
        // Hybrid (this machine): memory on v1, an empty v2 at unified/.
        let mi = "40 30 0:35 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n\
                  41 30 0:36 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
                  42 30 0:37 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
        let cg = "4:memory:/process_api/be81\n1:cpu:/\n0::/\n";
        assert_eq!(
            cgroup_memory_dirs(cg, mi),
            vec![
                (
                    PathBuf::from("/sys/fs/cgroup/memory"),
                    PathBuf::from("/sys/fs/cgroup/memory/process_api/be81"),
                    CgroupVersion::V1
                ),
                (
                    PathBuf::from("/sys/fs/cgroup/unified"),
                    PathBuf::from("/sys/fs/cgroup/unified"),
                    CgroupVersion::V2
                ),
            ]
        );
        // A cgroup namespace: the mount's root is a prefix of the path.
        let mi = "50 40 0:40 /ns /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let cg = "0::/ns/job\n";
        assert_eq!(
            cgroup_memory_dirs(cg, mi)[0].1,
            PathBuf::from("/sys/fs/cgroup/job")
        );
        // Nothing mounted or nothing listed: no limits to read.
        assert!(cgroup_memory_dirs(cg, "").is_empty());
        assert!(
            cgroup_memory_dirs("", "41 30 0:36 / /m rw - cgroup cgroup rw,memory\n").is_empty()
        );
    }

    #[test]
    fn smaps_residency_sums_the_mappings_over_the_range() {
        let smaps = "\
7f0000000000-7f0040000000 rw-p 00000000 00:00 0
Size:            1048576 kB
Rss:              524288 kB
AnonHugePages:    522240 kB
Private_Hugetlb:       0 kB
VmFlags: rd wr mr mw me ac hg
7f0040000000-7f0040200000 rw-p 00000000 00:00 0
Size:               2048 kB
Rss:                2048 kB
AnonHugePages:      2048 kB
VmFlags: rd wr
7f0040200000-7f0040600000 rw-p 00000000 00:00 0
Size:               4096 kB
Rss:                   0 kB
Private_Hugetlb:    2048 kB
Shared_Hugetlb:        0 kB
VmFlags: rd wr ht
";
        let r = |start, len| smaps_residency(smaps, start, len);
        let kb = |resident_kb, huge_kb| {
            Some(Residency {
                resident_kb,
                huge_kb,
            })
        };
        // Both THP mappings: the kernel split one region in two.
        let both = (1 << 30) + (2 << 20);
        assert_eq!(r(0x7f00_0000_0000, both), kb(526_336.0, 524_288.0));
        assert_eq!(r(0x7f00_4000_0000, 2 << 20), kb(2048.0, 2048.0));
        // Half of the first mapping: half of each figure, pro rata.
        assert_eq!(r(0x7f00_0000_0000, 1 << 29), kb(262_144.0, 261_120.0));
        // hugetlb: resident only in its own fields, all of it huge.
        assert_eq!(r(0x7f00_4020_0000, 4 << 20), kb(2048.0, 2048.0));
        assert_eq!(r(0x7e00_0000_0000, 4096), None);
    }
}
