//! Which pages the guest wrote where it should not have: KVM's dirty-page
//! log with manual re-protection (KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2).
//!
//! Reading the log does not write-protect the pages again; only the pages
//! a call must not write are protected again before it (KVM_CLEAR_DIRTY_LOG),
//! so a page the harness or the checks write over and over (the mailbox,
//! the stacks, a target at its usual place) faults once, not on every call:
//! on PVM each such fault costs tens of microseconds, and re-protecting
//! everything after every call made a default `run` 10x slower.
use crate::error::{Error, Result};
use hypclear_abi::PAGE_SIZE;
use kvm_bindings::{KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2, kvm_clear_dirty_log, kvm_enable_cap};
use kvm_ioctls::VmFd;
use vmm_sys_util::ioctl::ioctl_with_ref;

/// KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE: KVM_GET_DIRTY_LOG leaves the
/// pages writable; KVM_CLEAR_DIRTY_LOG protects them again.
const MANUAL_PROTECT_ENABLE: u64 = 1;
vmm_sys_util::ioctl_iowr_nr!(
    KVM_CLEAR_DIRTY_LOG,
    kvm_bindings::KVMIO,
    0xc0,
    kvm_clear_dirty_log
);

/// The log of one memslot.
#[derive(Debug)]
pub(crate) struct DirtyLog {
    base: u64,
    pages: u64,
    /// Pages whose log bit is set: written since they were last protected
    /// (so writable now, unlogged).
    set: Vec<u64>,
    /// Pages protected before the current call (outside what it may write).
    watched: Vec<u64>,
}

/// Turn on manual protection for the VM; false where KVM lacks it.
pub(crate) fn enable_manual_protect(fd: &VmFd) -> Result<bool> {
    let offered = fd.check_extension_raw(libc::c_ulong::from(KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2));
    if offered <= 0 || (offered as u64) & MANUAL_PROTECT_ENABLE == 0 {
        return Ok(false);
    }
    let cap = kvm_enable_cap {
        cap: KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2,
        args: [MANUAL_PROTECT_ENABLE, 0, 0, 0],
        ..Default::default()
    };
    fd.enable_cap(&cap).map_err(Error::kvm(
        "KVM_ENABLE_CAP (KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2)",
    ))?;
    Ok(true)
}

impl DirtyLog {
    /// The log of the slot covering `[base, base + size)`, every page
    /// protected (as KVM leaves them when the slot's logging starts).
    pub(crate) fn new(base: u64, size: u64) -> DirtyLog {
        let pages = size / PAGE_SIZE;
        let words = pages.div_ceil(64) as usize;
        DirtyLog {
            base,
            pages,
            set: vec![0; words],
            watched: vec![!0; words],
        }
    }

    /// Protect every page outside `allowed` that is writable now, and
    /// remember which pages the next call must not write. Every guest run
    /// since the last watch must have been followed by
    /// [`DirtyLog::written`], or the pages it wrote stay writable and show
    /// up as the next call's.
    pub(crate) fn watch(&mut self, fd: &VmFd, allowed: &[(u64, u64)]) -> Result<()> {
        self.watched = self.mask_outside(allowed);
        let clear: Vec<u64> = self
            .set
            .iter()
            .zip(&self.watched)
            .map(|(s, w)| s & w)
            .collect();
        if clear.iter().any(|w| *w != 0) {
            let arg = kvm_clear_dirty_log {
                slot: 0,
                num_pages: u32::try_from(self.pages)
                    .map_err(|_| Error::Internal("guest RAM has more than 2^32 pages".into()))?,
                first_page: 0,
                __bindgen_anon_1: kvm_bindings::kvm_clear_dirty_log__bindgen_ty_1 {
                    dirty_bitmap: clear.as_ptr() as *mut libc::c_void,
                },
            };
            // SAFETY: `arg` points at `clear`, a bitmap of `pages` bits
            // that lives across the call; KVM only reads it.
            let r = unsafe { ioctl_with_ref(fd, KVM_CLEAR_DIRTY_LOG(), &arg) };
            if r < 0 {
                return Err(Error::kvm("KVM_CLEAR_DIRTY_LOG")(kvm_ioctls::Error::last()));
            }
            for (s, c) in self.set.iter_mut().zip(&clear) {
                *s &= !c;
            }
        }
        Ok(())
    }

    /// After the call: the pages it wrote that [`DirtyLog::watch`] had
    /// protected, by guest-physical address.
    pub(crate) fn written(&mut self, fd: &VmFd) -> Result<Vec<u64>> {
        let size = usize::try_from(self.pages * PAGE_SIZE)
            .map_err(|_| Error::Internal("guest RAM larger than the address space".into()))?;
        let bits = fd
            .get_dirty_log(0, size)
            .map_err(Error::kvm("KVM_GET_DIRTY_LOG"))?;
        let hit: Vec<u64> = bits.iter().zip(&self.watched).map(|(b, w)| b & w).collect();
        for (s, b) in self.set.iter_mut().zip(&bits) {
            *s |= b;
        }
        Ok(pages_of(&hit, self.base))
    }

    /// A bitmap with a bit for every page no range of `allowed` touches.
    fn mask_outside(&self, allowed: &[(u64, u64)]) -> Vec<u64> {
        let mut m = vec![!0u64; self.set.len()];
        if !self.pages.is_multiple_of(64)
            && let Some(last) = m.last_mut()
        {
            *last = (1u64 << (self.pages % 64)) - 1;
        }
        for &(lo, hi) in allowed {
            let first = lo.saturating_sub(self.base) / PAGE_SIZE;
            let end = hi
                .saturating_sub(self.base)
                .div_ceil(PAGE_SIZE)
                .min(self.pages);
            clear_bits(&mut m, first, end);
        }
        m
    }
}

/// Clear bits `[first, end)` of `bitmap` a word at a time: every call
/// allows the whole copy source (tens of MB), thousands of pages.
fn clear_bits(bitmap: &mut [u64], first: u64, end: u64) {
    let mut bit = first;
    while bit < end {
        let (word, shift) = ((bit / 64) as usize, bit % 64);
        let n = (64 - shift).min(end - bit);
        let bits = match n {
            64 => !0,
            _ => ((1u64 << n) - 1) << shift,
        };
        if let Some(w) = bitmap.get_mut(word) {
            *w &= !bits;
        }
        bit += n;
    }
}

/// The pages a bitmap marks (bit `i`: the page `i` pages above `base`).
pub(crate) fn pages_of(bitmap: &[u64], base: u64) -> Vec<u64> {
    let mut out = Vec::new();
    for (w, word) in bitmap.iter().enumerate() {
        let mut bits = *word;
        while bits != 0 {
            let b = u64::from(bits.trailing_zeros());
            out.push(base + (w as u64 * 64 + b) * PAGE_SIZE);
            bits &= bits - 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dirty_bitmap_names_its_pages() {
        let pages = pages_of(&[0b1001, 0, 1 << 63], 0x1000_0000);
        assert_eq!(pages, [0x1000_0000, 0x1000_3000, 0x1000_0000 + 191 * 4096]);
    }

    #[test]
    fn the_mask_leaves_out_every_page_a_range_touches() {
        let log = DirtyLog::new(0x4000_0000, 130 * PAGE_SIZE);
        let m = log.mask_outside(&[(0x4000_0010, 0x4000_1001), (0x4008_0000, 0x4008_0001)]);
        assert_eq!(m.len(), 3);
        assert_eq!(m[0], !0b11);
        assert_eq!(m[1], !0);
        assert_eq!(m[2], 0b10);
        let m = log.mask_outside(&[(0, 0x1_0000_0000)]);
        assert_eq!(m, [0, 0, 0]);
    }

    #[test]
    fn bits_are_cleared_exactly_across_words() {
        for first in 0..200u64 {
            for end in first..=200 {
                let mut m = vec![!0u64; 4];
                clear_bits(&mut m, first, end);
                for bit in 0..256u64 {
                    let set = m[(bit / 64) as usize] >> (bit % 64) & 1 == 1;
                    assert_eq!(
                        set,
                        !(first..end).contains(&bit),
                        "{first}..{end} bit {bit}"
                    );
                }
            }
        }
    }
}
