//! aarch64: write back and evict a host range from every cache level.
//!
//! DC CIVAC (clean and invalidate by VA to the point of coherency) on every
//! line, then DSB ISH. Linux sets SCTLR_EL1.UCI so EL0 may use it, and
//! SCTLR_EL1.UCT so EL0 may read CTR_EL0 for the line size. Guest RAM is
//! host memory, so flushing the host mapping of a guest range evicts it for
//! the guest too.
use std::arch::asm;

/// Smallest data cache line in bytes (CTR_EL0.DminLine, log2 of words).
fn line() -> usize {
    let ctr: u64;
    // SAFETY: reading CTR_EL0 at EL0 is allowed by Linux (SCTLR_EL1.UCT);
    // no memory is touched.
    unsafe { asm!("mrs {0}, ctr_el0", out(reg) ctr, options(nomem, nostack, preserves_flags)) };
    4 << ((ctr >> 16) & 0xf)
}

/// Write back and evict `bytes` from every cache level.
pub fn evict(bytes: &[u8]) {
    let line = line();
    let start = bytes.as_ptr() as usize & !(line - 1);
    let end = bytes.as_ptr() as usize + bytes.len();
    let mut a = start;
    while a < end {
        // SAFETY: `a` lies in the cache line of a byte of `bytes`, which is
        // mapped for the lifetime of the borrow; DC CIVAC changes no memory
        // contents (Linux sets SCTLR_EL1.UCI, so it is legal at EL0).
        unsafe { asm!("dc civac, {0}", in(reg) a, options(nostack, preserves_flags)) };
        a += line;
    }
    // SAFETY: a barrier has no memory-safety preconditions.
    unsafe { asm!("dsb ish", options(nostack, preserves_flags)) };
}
