//! The host baseline: the very same routine objects the blob is built from,
//! linked into this binary (see build.rs), run natively on a host buffer.
use crate::error::{Error, Result};
use crate::vmm::memory::Backing;

mod generated {
    include!(concat!(env!("OUT_DIR"), "/host_routines.rs"));
}

/// A routine callable with the dispatcher's convention `fn(a0, a1, a2)`.
pub type HostFn = unsafe extern "C" fn(u64, u64, u64) -> u64;

/// The host copy of the routine behind alias `name`.
pub fn routine(name: &str) -> Option<HostFn> {
    generated::HOST_ROUTINES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| {
            // SAFETY: every routine follows the C ABI with at most three
            // integer arguments; passing unused extra argument registers is
            // harmless under the SysV x86_64 and AAPCS64 calling conventions.
            unsafe { std::mem::transmute::<unsafe extern "C" fn(), HostFn>(*f) }
        })
}

/// Names of all routines linked into the host.
pub fn names() -> Vec<&'static str> {
    generated::HOST_ROUTINES.iter().map(|(n, _)| *n).collect()
}

/// An anonymous host buffer with the same backing as guest RAM.
pub struct HostBuffer {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the buffer is plain memory owned by this value.
unsafe impl Send for HostBuffer {}
unsafe impl Sync for HostBuffer {}

impl HostBuffer {
    pub fn new(len: u64, backing: Backing) -> Result<HostBuffer> {
        let len = usize::try_from(len.next_multiple_of(2 << 20))
            .map_err(|_| Error::Usage("host buffer too large".into()))?;
        let mut flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        if backing == Backing::Hugetlb {
            flags |= libc::MAP_HUGETLB | libc::MAP_HUGE_2MB;
        }
        // SAFETY: anonymous mapping, no file, checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(Error::Memory {
                size: len as u64,
                backing: backing.to_string(),
                detail: format!("host baseline buffer: {}", std::io::Error::last_os_error()),
            });
        }
        let advice = match backing {
            Backing::Anon => libc::MADV_NOHUGEPAGE,
            Backing::Thp => libc::MADV_HUGEPAGE,
            Backing::Hugetlb => libc::MADV_NORMAL,
        };
        // SAFETY: the mapping just created.
        unsafe { libc::madvise(ptr, len, advice) };
        Ok(HostBuffer {
            ptr: ptr.cast(),
            len,
        })
    }

    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }

    pub fn len(&self) -> u64 {
        self.len as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Give the pages back so the next touch faults them in again.
    pub fn discard(&self, off: u64, len: u64) -> Result<()> {
        discard(self.ptr as u64 + off, len)
    }

    pub fn fill(&self, byte: u8) {
        // SAFETY: within the mapping owned by self.
        unsafe { std::ptr::write_bytes(self.ptr, byte, self.len) };
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        // SAFETY: unmapping what new() mapped.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// `MADV_DONTNEED` on page-aligned host memory.
pub fn discard(addr: u64, len: u64) -> Result<()> {
    let start = addr & !4095;
    let end = (addr + len).next_multiple_of(4096);
    // SAFETY: callers pass ranges inside mappings they own; DONTNEED on
    // private anonymous memory only drops contents.
    let rc = unsafe {
        libc::madvise(
            start as *mut libc::c_void,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_routines_are_linked_and_clear_memory() {
        assert!(!names().is_empty());
        let buf = HostBuffer::new(2 << 20, Backing::Anon).unwrap();
        buf.fill(0xaa);
        let name = names()
            .into_iter()
            .find(|n| n.starts_with("memset_"))
            .expect("a memset variant");
        let f = routine(name).unwrap();
        // SAFETY: buffer is large enough.
        unsafe { f(buf.addr() + 3, 0x5a, 100) };
        // SAFETY: reading our own buffer.
        let s = unsafe { std::slice::from_raw_parts(buf.addr() as *const u8, 200) };
        assert_eq!(s[2], 0xaa);
        assert!(s[3..103].iter().all(|b| *b == 0x5a));
        assert_eq!(s[103], 0xaa);
        buf.discard(0, 4096).unwrap();
        assert_eq!(s[0], 0);
    }
}
