//! x86_64 guest memory layout. RAM starts at guest-physical 0. The harness
//! (everything below the arena) is identity mapped; the blob and the arena
//! are mapped where Linux keeps its text and its direct map, far above 4 GiB
//! and only there, so a routine that truncates a pointer to 32 bits faults.
//!
//! ```text
//! guest-physical (identity mapped up to the arena)
//! 0x0000_0000  not present (catches NULL dereferences)
//! 0x0000_1000  GDT (null, kernel code/data, user data/code, one TSS per vCPU)
//! 0x0000_2000  IDT (32 exception gates)
//! 0x0000_3000  TSSs (one 0x68-byte TSS per vCPU)
//! 0x0001_0000  page tables (bump allocated)
//! 0x0010_0000  mailboxes, 64 KiB (abi::MAILBOX_SIZE) per vCPU
//! 0x0020_0000  stacks: per vCPU a user stack and an exception stack
//! 0x0040_0000  blob window: the blob is loaded at a random page in here
//! 0x0100_0000  arena: the memory the routines clear/fill/copy
//!
//! guest-virtual, besides the identity map of the harness
//! 0xffff_8880_0100_0000  the arena at DIRECT_MAP + gpa (Linux's page_offset_base)
//! 0xffff_ffff_8040_0000  the blob window at TEXT_MAP + gpa (__START_KERNEL_map)
//! ```
use hypclear_abi as abi;

pub const RAM_BASE: u64 = 0;
pub(crate) const GDT_GPA: u64 = 0x1000;
pub(crate) const IDT_GPA: u64 = 0x2000;
pub(crate) const TSS_GPA: u64 = 0x3000;
pub(crate) const TSS_SIZE: u64 = 0x68;
pub const PAGE_TABLES_GPA: u64 = 0x1_0000;
pub const PAGE_TABLES_END: u64 = 0x10_0000;
pub(crate) const MAILBOX_BASE: u64 = 0x10_0000;
pub(crate) const STACKS_BASE: u64 = 0x20_0000;
/// User stack plus exception stack, per vCPU.
pub(crate) const STACK_SIZE: u64 = 0x1_0000;
pub(crate) const EXC_STACK_SIZE: u64 = 0x4000;
pub const BLOB_WINDOW: u64 = 0x40_0000;
pub const BLOB_WINDOW_END: u64 = 0x100_0000;
pub const ARENA_BASE: u64 = 0x100_0000;
/// Where the arena is mapped: guest-physical `p` at `DIRECT_MAP + p`, as
/// Linux's direct map (4-level paging, no KASLR) maps physical memory.
pub const DIRECT_MAP: u64 = 0xffff_8880_0000_0000;
/// Where the blob window is mapped: `p` at `TEXT_MAP + p`, as Linux's
/// kernel text mapping (`__START_KERNEL_map`) maps the kernel image.
pub const TEXT_MAP: u64 = 0xffff_ffff_8000_0000;

/// RAM is mapped with 2 MiB pages, so its size must be a multiple of this.
pub const RAM_ALIGN: u64 = 2 << 20;
/// The smallest useful guest: the fixed areas plus 16 MiB of arena.
pub const MIN_RAM: u64 = 32 << 20;
/// The direct map covers at most this much RAM: one page directory per
/// GiB must fit the page-table area next to the root, the harness's PDPT,
/// PD and 4 KiB table, the direct map's PDPT, the edge region's 4 KiB
/// table, the text map's PDPT, PD and 4 KiB tables (one per 2 MiB of the
/// blob window at most) and the doorbell's PDPT, PD and PT; the test in
/// `paging.rs` builds the map at this size and one 2 MiB step above it.
pub const MAX_RAM: u64 = ((PAGE_TABLES_END - PAGE_TABLES_GPA) / abi::PAGE_SIZE
    - 11
    - (BLOB_WINDOW_END - BLOB_WINDOW) / RAM_ALIGN)
    << 30;

// GDT selectors (Linux-like: user data 0x2b, user code 0x33).
pub(crate) const SEL_KERNEL_CODE: u16 = 0x08;
pub(crate) const SEL_KERNEL_DATA: u16 = 0x10;
pub(crate) const SEL_USER_DATA: u16 = 0x28;
pub(crate) const SEL_USER_CODE: u16 = 0x30;
pub(crate) const SEL_TSS0: u16 = 0x40;
/// Number of exception vectors in the IDT, and the blob's stub stride.
pub(crate) const IDT_VECTORS: u64 = 32;
pub(crate) const VECTOR_STUB_SIZE: u64 = 32;

/// The guest-virtual address the guest reaches guest-physical `gpa` at:
/// the blob window through the text map, the arena through the direct map,
/// the harness below them identity mapped.
pub fn guest_va(gpa: u64) -> u64 {
    if gpa >= ARENA_BASE {
        DIRECT_MAP + gpa
    } else if gpa >= BLOB_WINDOW {
        TEXT_MAP + gpa
    } else {
        gpa
    }
}

/// The guest-physical address behind guest-virtual `va` ([`guest_va`]'s
/// inverse), or `None` where the page tables map nothing of RAM there.
pub fn guest_pa(va: u64) -> Option<u64> {
    let (lo, hi) = (ARENA_BASE, BLOB_WINDOW_END);
    if let Some(p) = va
        .checked_sub(TEXT_MAP)
        .filter(|p| (BLOB_WINDOW..hi).contains(p))
    {
        Some(p)
    } else if let Some(p) = va
        .checked_sub(DIRECT_MAP)
        .filter(|&p| p >= lo && p < MAX_RAM)
    {
        Some(p)
    } else {
        (va < ARENA_BASE).then_some(va)
    }
}

pub fn mailbox_gpa(vcpu: u64) -> u64 {
    MAILBOX_BASE + vcpu * abi::MAILBOX_SIZE
}

/// The top of RAM the checks leave alone: 4 KiB pages with one hole (see
/// [`edge_hole`]), so an edge check's buffer can end or start against a
/// page that faults, as the hyp's sparse mappings do.
pub const EDGE_REGION: u64 = 2 << 20;

/// The unmapped page of a guest with `ram_size` bytes of RAM: 1 MiB below
/// the top, with mapped 4 KiB pages on both sides (a buffer may end
/// against it from below or start right above it).
pub fn edge_hole(ram_size: u64) -> Option<u64> {
    Some(RAM_BASE + ram_size - EDGE_REGION / 2)
}

/// What the guest may write besides the checks' windows while vCPU
/// `vcpu` runs a command, as `[start, end)` ranges: everything below the
/// arena (its mailbox and stacks, the page tables' accessed/dirty bits,
/// and on SVM at CPL0 also descriptor and blob-window pages the CPU or
/// KVM writes: seen in the x86_64-svm stage), so a page the guest dirtied
/// in the arena outside the windows is a stray write.
pub fn harness_areas(vcpu: u64) -> [(u64, u64); 3] {
    let stacks = STACKS_BASE + vcpu * (STACK_SIZE + EXC_STACK_SIZE);
    [
        (RAM_BASE, ARENA_BASE),
        (mailbox_gpa(vcpu), mailbox_gpa(vcpu) + abi::MAILBOX_SIZE),
        (stacks, stacks + STACK_SIZE + EXC_STACK_SIZE),
    ]
}

pub(crate) fn tss_gpa(vcpu: u64) -> u64 {
    TSS_GPA + vcpu * TSS_SIZE
}

pub(crate) fn tss_selector(vcpu: u64) -> u16 {
    SEL_TSS0 + 16 * vcpu as u16
}

/// Top of the user (routine) stack of a vCPU; 16-byte aligned.
pub(crate) fn stack_top(vcpu: u64) -> u64 {
    STACKS_BASE + (vcpu + 1) * (STACK_SIZE + EXC_STACK_SIZE) - EXC_STACK_SIZE
}

/// Top of the exception (TSS.RSP0) stack of a vCPU.
pub(crate) fn exception_stack_top(vcpu: u64) -> u64 {
    STACKS_BASE + (vcpu + 1) * (STACK_SIZE + EXC_STACK_SIZE)
}

const _: () = {
    assert!(TSS_GPA + abi::MAX_VCPUS * TSS_SIZE <= PAGE_TABLES_GPA);
    assert!(MAILBOX_BASE + abi::MAX_VCPUS * abi::MAILBOX_SIZE <= STACKS_BASE);
    assert!(STACKS_BASE + abi::MAX_VCPUS * (STACK_SIZE + EXC_STACK_SIZE) <= BLOB_WINDOW);
    assert!(SEL_TSS0 as u64 + 16 * abi::MAX_VCPUS <= abi::PAGE_SIZE);
    assert!(MAX_RAM <= abi::DOORBELL_GPA);
    assert!(MAX_RAM.is_multiple_of(RAM_ALIGN));
    // The text map reaches the blob window within its last 2 GiB.
    assert!(BLOB_WINDOW_END <= 1 << 30);
    assert!(ARENA_BASE.is_multiple_of(RAM_ALIGN));
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_va_and_guest_pa_are_inverse_and_far_above_4_gib() {
        for gpa in [
            0x1000,
            MAILBOX_BASE + 8,
            BLOB_WINDOW,
            BLOB_WINDOW_END - 1,
            ARENA_BASE,
            MAX_RAM - 1,
        ] {
            assert_eq!(guest_pa(guest_va(gpa)), Some(gpa), "{gpa:#x}");
        }
        for gpa in [BLOB_WINDOW, ARENA_BASE, 3 << 30] {
            assert!(guest_va(gpa) > u64::from(u32::MAX), "{gpa:#x}");
            assert_eq!(
                guest_pa(guest_va(gpa) & 0xffff_ffff),
                None,
                "truncated {gpa:#x}"
            );
        }
        assert_eq!(
            guest_pa(DIRECT_MAP + 0x1000),
            None,
            "the harness is not in the direct map"
        );
        assert_eq!(guest_pa(TEXT_MAP + ARENA_BASE), None);
    }
}
