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

/// Write back and evict `[start, start + len)` from every cache level.
/// Takes an address range, not a slice: flushing reads and writes no data,
/// so the range may be memory a vCPU writes concurrently.
///
/// # Safety
///
/// The whole range must be mapped in this process (a flush of an unmapped
/// address faults) for the duration of the call.
pub unsafe fn evict(start: *const u8, len: usize) {
    let line = line();
    let first = start as usize & !(line - 1);
    let end = start as usize + len;
    let mut a = first;
    while a < end {
        // SAFETY: `a` lies in the cache line of a byte of the range, which
        // the caller guarantees is mapped; DC CIVAC changes no memory
        // contents (Linux sets SCTLR_EL1.UCI, so it is legal at EL0).
        unsafe { asm!("dc civac, {0}", in(reg) a, options(nostack, preserves_flags)) };
        a += line;
    }
    // SAFETY: a barrier has no memory-safety preconditions.
    unsafe { asm!("dsb ish", options(nostack, preserves_flags)) };
}
