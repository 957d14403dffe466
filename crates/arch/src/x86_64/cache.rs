//! x86_64: write back and evict a host range from every cache level.
//!
//! CLFLUSHOPT (CLFLUSH where the CPU lacks it) on every 64-byte line, then
//! MFENCE so the flushes are complete before the caller starts a clock.
//! Guest RAM is host memory, so flushing the host mapping of a guest range
//! evicts it for the guest too (the caches are physically tagged).
use std::arch::asm;
use std::arch::x86_64::{__cpuid_count, _mm_clflush, _mm_mfence};

/// Smallest cache line of the x86_64 CPUs this runs on.
const LINE: usize = 64;

fn has_clflushopt() -> bool {
    // CPUID.(EAX=7,ECX=0):EBX bit 23.
    __cpuid_count(7, 0).ebx & (1 << 23) != 0
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
    let first = start as usize & !(LINE - 1);
    let end = start as usize + len;
    let opt = has_clflushopt();
    let mut a = first;
    while a < end {
        let p = a as *const u8;
        if opt {
            // SAFETY: `p` lies in the cache line of a byte of the range,
            // which the caller guarantees is mapped;
            // CLFLUSHOPT changes no memory contents.
            unsafe { asm!("clflushopt [{0}]", in(reg) p, options(nostack, preserves_flags)) };
        } else {
            // SAFETY: as above, for CLFLUSH.
            unsafe { _mm_clflush(p) };
        }
        a += LINE;
    }
    // SAFETY: MFENCE has no memory-safety preconditions.
    unsafe { _mm_mfence() };
}
