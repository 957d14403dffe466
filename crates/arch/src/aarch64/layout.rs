//! aarch64 guest memory layout. RAM starts at guest-physical 1 GiB (as on
//! QEMU's and most VMMs' arm64 machines). The stage-1 tables the host
//! builds map all of it at one offset, as the nVHE hyp maps itself and the
//! memory it uses (`kern_hyp_va`: the linear map's address with the region
//! bit, hyp_va_bits - 1, and a tag above the bits RAM spans):
//! `HYP_VA_BASE + (gpa - RAM_BASE)`, far above 4 GiB. Below 4 GiB nothing is
//! mapped (at EL2 but the one page of the EL2 init code, its idmap, as the
//! hyp's), so NULL, small wild pointers and pointers truncated to 32 bits
//! fault; the doorbell is mapped at its guest-physical address.
//!
//! ```text
//! RAM_BASE + 0x0000_0000  not mapped (guard)
//! RAM_BASE + 0x0001_0000  page tables (bump allocated; EL1/EL2 only)
//! RAM_BASE + 0x0010_0000  mailboxes, 64 KiB (abi::MAILBOX_SIZE) per vCPU
//! RAM_BASE + 0x0020_0000  stacks: per vCPU a routine stack and an exception stack
//! RAM_BASE + 0x0040_0000  blob window: the blob is loaded at a random
//!                         2 MiB boundary in here (the arm64 Image protocol
//!                         that linux-loader's PE loader enforces)
//! RAM_BASE + 0x0100_0000  arena: the memory the routines clear/fill/copy,
//!                         up to RAM_BASE + RAM size
//! RAM end - 2 MiB         edge region (the arena's last 2 MiB): 4 KiB pages,
//! RAM end - 1 MiB         and this one page not mapped (the edge hole)
//! 0xff_ffff_f000          doorbell (no memslot; Device-nGnRE)
//! ```
//!
//! All constants below but `HYP_VA_BASE` are guest-physical addresses.
use crate::BlobSections;
use hypclear_abi as abi;

/// Guest-physical start of RAM.
pub const RAM_BASE: u64 = 0x4000_0000;
/// Below this (from RAM_BASE) nothing is mapped.
#[cfg(test)]
pub(crate) const GUARD_END: u64 = RAM_BASE + 0x1_0000;
pub const PAGE_TABLES_GPA: u64 = RAM_BASE + 0x1_0000;
pub const PAGE_TABLES_END: u64 = RAM_BASE + 0x10_0000;
pub(crate) const MAILBOX_BASE: u64 = RAM_BASE + 0x10_0000;
pub(crate) const MAILBOX_END: u64 = MAILBOX_BASE + abi::MAX_VCPUS * abi::MAILBOX_SIZE;
pub(crate) const STACKS_BASE: u64 = RAM_BASE + 0x20_0000;
/// Routine stack (SP_EL1 at EL1, SP_EL0 at EL0), per vCPU.
pub(crate) const STACK_SIZE: u64 = 0x1_0000;
/// Exception stack (SP_EL1 when the routines run at EL0), per vCPU. The
/// vectors use no stack today; it is there so SP_EL1 is always sane.
pub(crate) const EXC_STACK_SIZE: u64 = 0x4000;
pub(crate) const STACKS_END: u64 = STACKS_BASE + abi::MAX_VCPUS * (STACK_SIZE + EXC_STACK_SIZE);
pub const BLOB_WINDOW: u64 = RAM_BASE + 0x40_0000;
pub const BLOB_WINDOW_END: u64 = RAM_BASE + 0x100_0000;
/// The blob's load address must be a multiple of this (arm64 Image
/// protocol: 2 MiB aligned base + text_offset 0).
pub const BLOB_ALIGN: u64 = 2 << 20;
pub const ARENA_BASE: u64 = RAM_BASE + 0x100_0000;
/// RAM is mapped with 2 MiB blocks, so its size must be a multiple of this.
pub const RAM_ALIGN: u64 = 2 << 20;
/// The smallest useful guest: the fixed areas plus 16 MiB of arena.
pub const MIN_RAM: u64 = 32 << 20;
/// The tables map at most this much RAM: three sets of them (EL1, EL0 and
/// EL2 permissions) with 2 MiB blocks must fit the page-table area.
pub const MAX_RAM: u64 = 64 << 30;

pub fn mailbox_gpa(vcpu: u64) -> u64 {
    MAILBOX_BASE + vcpu * abi::MAILBOX_SIZE
}

/// The top of RAM the checks leave alone: mapped with 4 KiB pages and one
/// invalid descriptor (see [`edge_hole`]), so an edge check's buffer can
/// end or start against a page that faults, as the hyp's sparse mappings do.
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

/// Top of the routine stack of a vCPU; 16-byte aligned.
pub(crate) fn stack_top(vcpu: u64) -> u64 {
    STACKS_BASE + (vcpu + 1) * (STACK_SIZE + EXC_STACK_SIZE) - EXC_STACK_SIZE
}

/// Top of the exception stack of a vCPU (SP_EL1 for EL0 guests).
pub(crate) fn exception_stack_top(vcpu: u64) -> u64 {
    STACKS_BASE + (vcpu + 1) * (STACK_SIZE + EXC_STACK_SIZE)
}

/// Who may touch a mapped region (see `paging::attrs_for`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// Page tables: EL1 read/write only, never executable.
    Tables,
    /// Mailboxes, routine stacks, the arena: read/write data for the level
    /// the routines run at, never executable.
    Data,
    /// Exception stacks: EL1 data.
    ExceptionStacks,
    /// A blob's text: read-only and executable at EL1 and, for EL0
    /// guests, at EL0 (the vectors run at EL1 either way).
    Text,
    /// A blob's read-only data: read-only for the routines' level, never
    /// executable.
    ReadOnly,
    /// The doorbell page: Device-nGnRE, writable by the routines' level.
    Doorbell,
}

/// One mapping: guest-physical `[pa, pa + size)` at guest-virtual `va`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    pub va: u64,
    pub pa: u64,
    pub size: u64,
    pub use_: Use,
}

/// The regions to map for `ram_size` bytes of RAM and the blobs loaded at
/// `blobs` (base, sections), in guest-physical order, each at its [`guest_va`]
/// (RAM at the hyp VA, the doorbell where it is). Each blob is
/// mapped W^X as the hyp maps itself: text read-only and executable,
/// read-only data, then data (and .bss) never executable; the rest of the
/// blob window is not mapped. The arena stops at the edge hole and goes on
/// past it: that page gets no descriptor, and the 2 MiB around it, no
/// longer a whole block, 4 KiB pages.
pub fn regions(ram_size: u64, blobs: &[(u64, BlobSections)]) -> Vec<Region> {
    let ram_end = RAM_BASE + ram_size;
    let mut v = vec![
        (PAGE_TABLES_GPA, PAGE_TABLES_END, Use::Tables),
        (MAILBOX_BASE, MAILBOX_END, Use::Data),
    ];
    for cpu in 0..abi::MAX_VCPUS {
        v.push((stack_top(cpu) - STACK_SIZE, stack_top(cpu), Use::Data));
        v.push((
            stack_top(cpu),
            exception_stack_top(cpu),
            Use::ExceptionStacks,
        ));
    }
    let mut blobs = blobs.to_vec();
    blobs.sort_by_key(|b| b.0);
    for (base, s) in blobs {
        for (from, to, use_) in [
            (0, s.text_end, Use::Text),
            (s.text_end, s.data_start, Use::ReadOnly),
            (s.data_start, s.end, Use::Data),
        ] {
            if from < to {
                v.push((base + from, base + to, use_));
            }
        }
    }
    let hole = edge_hole(ram_size).unwrap_or(ram_end);
    v.push((ARENA_BASE, hole, Use::Data));
    if hole + abi::PAGE_SIZE < ram_end {
        v.push((hole + abi::PAGE_SIZE, ram_end, Use::Data));
    }
    v.push((
        abi::DOORBELL_GPA,
        abi::DOORBELL_GPA + abi::PAGE_SIZE,
        Use::Doorbell,
    ));
    v.into_iter()
        .map(|(pa, end, use_)| Region {
            va: guest_va(pa),
            pa,
            size: end - pa,
            use_,
        })
        .collect()
}

/// The EL2 tables' identity map of the page holding guest-physical `pa`
/// (the EL2 init code, `hyp_el2_init`): it turns the MMU on, so its next
/// instructions are fetched at VA == PA until it jumps to the hyp VA, as
/// the hyp's `__hyp_idmap_text` is mapped for its init.
pub fn hyp_idmap(pa: u64) -> Region {
    let page = pa & !(abi::PAGE_SIZE - 1);
    Region {
        va: page,
        pa: page,
        size: abi::PAGE_SIZE,
        use_: Use::Text,
    }
}

/// The hyp VA size the layout follows (`hyp_va_bits`: 48, TCR_ELx.T0SZ 16).
const HYP_VA_BITS: u32 = 48;
/// The lowest bit of the tag: RAM spans at most 2^36 bytes (`MAX_RAM`),
/// as `tag_lsb` sits just above what the linear map of RAM needs.
const HYP_TAG_LSB: u32 = 36;
/// The tag (random under KASLR in the hyp; fixed here, any would do).
const HYP_TAG: u64 = 0x5a5;
/// Guest-virtual address of `RAM_BASE`: the region bit and the tag. Its
/// low 32 bits are 0, so a RAM address truncated to 32 bits is its offset
/// into RAM, a VA below 4 GiB, where nothing of RAM is mapped.
pub const HYP_VA_BASE: u64 = (1 << (HYP_VA_BITS - 1)) | (HYP_TAG << HYP_TAG_LSB);

/// The guest-virtual address of guest-physical `gpa`: RAM at the hyp VA
/// (`HYP_VA_BASE` + its offset into RAM), anything else (the doorbell)
/// where it is.
pub fn guest_va(gpa: u64) -> u64 {
    match gpa.checked_sub(RAM_BASE) {
        Some(off) if off < MAX_RAM => HYP_VA_BASE + off,
        _ => gpa,
    }
}

/// The guest-physical address behind guest-virtual `va` ([`guest_va`]'s
/// inverse), where it is RAM.
pub fn guest_pa(va: u64) -> Option<u64> {
    va.checked_sub(HYP_VA_BASE)
        .filter(|&off| off < MAX_RAM)
        .map(|off| RAM_BASE + off)
}

const _: () = {
    assert!(RAM_BASE.is_multiple_of(1 << 30));
    assert!(MAILBOX_END <= STACKS_BASE);
    assert!(STACKS_END <= BLOB_WINDOW);
    assert!(BLOB_WINDOW.is_multiple_of(BLOB_ALIGN) && BLOB_WINDOW_END.is_multiple_of(BLOB_ALIGN));
    assert!(BLOB_WINDOW_END <= ARENA_BASE);
    assert!(ARENA_BASE - RAM_BASE + 16 * 1024 * 1024 <= MIN_RAM);
    // The edge region is one 2 MiB block of the arena, split around its hole.
    assert!(EDGE_REGION == 2 << 20 && RAM_ALIGN.is_multiple_of(EDGE_REGION));
    assert!(MIN_RAM.is_multiple_of(RAM_ALIGN) && MAX_RAM.is_multiple_of(RAM_ALIGN));
    // The hyp VA: the region bit above the tag, the tag above RAM, all
    // within TTBR0's 48 bits; low 32 bits clear (see HYP_VA_BASE).
    assert!(MAX_RAM <= 1 << HYP_TAG_LSB && HYP_TAG < 1 << (HYP_VA_BITS - 1 - HYP_TAG_LSB));
    assert!(HYP_VA_BASE + MAX_RAM <= 1 << HYP_VA_BITS && HYP_VA_BASE.is_multiple_of(1 << 32));
    // RAM stays below the doorbell, and within a 40-bit IPA space.
    assert!(RAM_BASE + MAX_RAM <= abi::DOORBELL_GPA);
    assert!(abi::DOORBELL_GPA + abi::PAGE_SIZE <= 1 << 40);
};

/// A blob of three text, two read-only and three data pages, loaded at
/// the start of the window (for the layout and paging tests).
#[cfg(test)]
pub(crate) const TEST_BLOB: (u64, BlobSections) = (
    BLOB_WINDOW,
    BlobSections {
        text_end: 0x3000,
        data_start: 0x5000,
        end: 0x8000,
    },
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_are_ordered_disjoint_and_page_aligned() {
        let r = regions(MIN_RAM, &[TEST_BLOB]);
        for w in r.windows(2) {
            assert!(w[0].pa + w[0].size <= w[1].pa, "{w:?}");
        }
        for x in &r {
            assert!(
                x.size > 0 && x.pa.is_multiple_of(4096) && x.size.is_multiple_of(4096),
                "{x:?}"
            );
            assert_eq!(x.va, guest_va(x.pa), "{x:?}");
        }
        assert_eq!(r.first().unwrap().pa, GUARD_END);
        let blob: Vec<_> = r
            .iter()
            .filter(|x| (BLOB_WINDOW..BLOB_WINDOW_END).contains(&x.pa))
            .map(|x| (x.pa, x.pa + x.size, x.use_))
            .collect();
        assert_eq!(
            blob,
            [
                (BLOB_WINDOW, BLOB_WINDOW + 0x3000, Use::Text),
                (BLOB_WINDOW + 0x3000, BLOB_WINDOW + 0x5000, Use::ReadOnly),
                (BLOB_WINDOW + 0x5000, BLOB_WINDOW + 0x8000, Use::Data),
            ]
        );
    }

    #[test]
    fn ram_lives_at_the_hyp_va_far_above_4_gib_and_truncates_below_it() {
        for gpa in [
            GUARD_END,
            mailbox_gpa(3) + 8,
            BLOB_WINDOW,
            BLOB_WINDOW_END - 1,
            ARENA_BASE,
            RAM_BASE + MAX_RAM - 1,
        ] {
            let va = guest_va(gpa);
            assert_eq!(guest_pa(va), Some(gpa), "{gpa:#x}");
            assert!(
                va >> 47 == 1 && va < 1 << 48,
                "{va:#x}: the region bit, TTBR0"
            );
            assert_eq!(va & 0xffff_ffff, (gpa - RAM_BASE) & 0xffff_ffff);
            assert_eq!(guest_pa(va & 0xffff_ffff), None, "truncated {gpa:#x}");
        }
        assert_eq!(guest_va(abi::DOORBELL_GPA), abi::DOORBELL_GPA);
        assert_eq!(guest_pa(abi::DOORBELL_GPA), None, "not RAM");
        assert_eq!(guest_pa(HYP_VA_BASE + MAX_RAM), None);
        assert_eq!(guest_pa(RAM_BASE), None, "RAM's own address is no VA of it");
    }

    #[test]
    fn stacks_are_16_byte_aligned_and_per_vcpu() {
        for v in 0..abi::MAX_VCPUS {
            assert!(stack_top(v).is_multiple_of(16));
            assert!(exception_stack_top(v).is_multiple_of(16));
            assert!(stack_top(v) < exception_stack_top(v));
            assert!(exception_stack_top(v) <= STACKS_END);
        }
        assert_eq!(mailbox_gpa(1) - mailbox_gpa(0), abi::MAILBOX_SIZE);
    }
}
