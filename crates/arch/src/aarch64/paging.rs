//! aarch64 stage-1 page tables (4 KiB granule, 48-bit VA, four levels
//! L0..L3) of the guest: RAM at the hyp VA, the doorbell where it is (see
//! `layout`).
//!
//! RAM is Normal write-back memory (MAIR index `MT_NORMAL`), inner
//! shareable; the doorbell page is Device-nGnRE. Fixed areas that need
//! different permissions (page tables, mailboxes, stacks) and the blobs
//! (text, read-only data, data) use 4 KiB pages; the arena uses 2 MiB
//! blocks, like x86_64, but for its last 2 MiB (the edge region): 4 KiB
//! pages, the edge hole's descriptor left invalid (0) in every set, so an
//! access past an edge check's buffer faults as in the hyp. Every
//! descriptor has AF set (no hardware Access flag management is enabled).
//!
//! Two sets of tables are built, one per [`Privilege`], because AArch64
//! permissions differ by exception level:
//! * `Kernel` (routines at EL1): everything EL1-only (AP = 0b00 / 0b10);
//!   only the blob's text is executable (and read-only), its read-only
//!   data is read-only, its data writable; UXN everywhere.
//! * `User` (routines at EL0): data, mailboxes, routine stacks and the
//!   doorbell are EL0 read/write (AP = 0b01; such pages are never executable
//!   at EL1, and are PXN explicitly too); the blob's text is read-only at
//!   both levels (AP = 0b11) and executable at both (the vectors run at
//!   EL1); page tables and exception stacks stay EL1-only.
//!
//! A third set is for `Hyp` (routines at EL2 with E2H = 0, TTBR0_EL2): the
//! same regions and memory types, in the EL2 descriptor format, which the
//! EL1 sets do not satisfy. That regime has one privilege level, so AP[1]
//! is RES1 (AP = 0b01 read/write, 0b11 read-only, as the nVHE hyp's
//! pgtable.c writes them), bit 54 is XN (UXN at EL1) and bit 53 (PXN) is
//! RES0: the blob's text is read-only and executable, its read-only data
//! read-only and XN, everything else read/write and XN. SCTLR_ELx.WXN is
//! set at EL1 and EL2 alike, as the nVHE hyp sets it.
// The descriptor bits are named as the Arm ARM names them, whether or not
// the tables set them.
#![allow(dead_code)]
use super::layout::{Region, Use};
use super::sysregs::{MT_DEVICE_NGNRE, MT_NORMAL};
use crate::Privilege;
use std::collections::BTreeMap;
use thiserror::Error;

pub(crate) const DESC_VALID: u64 = 1 << 0;
/// Table descriptor at L0-L2, page descriptor at L3 (block if clear at L1/L2).
pub(crate) const DESC_TABLE: u64 = 1 << 1;
pub(crate) const DESC_ATTRINDX_SHIFT: u64 = 2;
pub(crate) const DESC_AP_SHIFT: u64 = 6;
pub(crate) const DESC_SH_INNER: u64 = 3 << 8;
pub(crate) const DESC_AF: u64 = 1 << 10;
pub(crate) const DESC_NG: u64 = 1 << 11;
pub(crate) const DESC_PXN: u64 = 1 << 53;
pub(crate) const DESC_UXN: u64 = 1 << 54;
const ADDR_MASK: u64 = 0x0000_ffff_ffff_f000;

const SIZE_4K: u64 = 1 << 12;
const SIZE_2M: u64 = 1 << 21;

/// Data access permissions, the four AP[2:1] encodings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ap {
    /// 0b00: EL1 read/write, no EL0 access.
    El1Rw,
    /// 0b01: read/write at EL1 and EL0.
    BothRw,
    /// 0b10: EL1 read-only, no EL0 access.
    El1Ro,
    /// 0b11: read-only at EL1 and EL0.
    BothRo,
}

impl Ap {
    fn bits(self) -> u64 {
        match self {
            Ap::El1Rw => 0,
            Ap::BothRw => 1,
            Ap::El1Ro => 2,
            Ap::BothRo => 3,
        }
    }

    fn from_bits(b: u64) -> Ap {
        match b & 3 {
            0 => Ap::El1Rw,
            1 => Ap::BothRw,
            2 => Ap::El1Ro,
            _ => Ap::BothRo,
        }
    }

    pub fn el0_access(self) -> bool {
        matches!(self, Ap::BothRw | Ap::BothRo)
    }

    pub fn writable(self) -> bool {
        matches!(self, Ap::El1Rw | Ap::BothRw)
    }
}

/// Attributes of one mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attrs {
    /// Device-nGnRE instead of Normal write-back.
    pub device: bool,
    pub ap: Ap,
    /// Executable at EL1 (PXN clear).
    pub el1_exec: bool,
    /// Executable at EL0 (UXN clear).
    pub el0_exec: bool,
}

impl Attrs {
    /// The leaf descriptor bits other than the address and the type bits.
    pub fn bits(self) -> u64 {
        let attr = if self.device {
            MT_DEVICE_NGNRE
        } else {
            MT_NORMAL
        };
        let mut d = (attr << DESC_ATTRINDX_SHIFT) | (self.ap.bits() << DESC_AP_SHIFT) | DESC_AF;
        if !self.device {
            d |= DESC_SH_INNER;
        }
        if !self.el1_exec {
            d |= DESC_PXN;
        }
        if !self.el0_exec {
            d |= DESC_UXN;
        }
        d
    }

    fn from_bits(d: u64) -> Attrs {
        Attrs {
            device: (d >> DESC_ATTRINDX_SHIFT) & 7 == MT_DEVICE_NGNRE,
            ap: Ap::from_bits(d >> DESC_AP_SHIFT),
            el1_exec: d & DESC_PXN == 0,
            el0_exec: d & DESC_UXN == 0,
        }
    }

    /// Whether an access of the given kind is permitted by these attributes
    /// (including the architectural rule that EL0-writable memory is never
    /// executable at EL1).
    pub fn permits(self, el0: bool, write: bool, exec: bool) -> bool {
        if exec {
            return if el0 {
                self.el0_exec && self.ap.el0_access()
            } else {
                self.el1_exec && self.ap != Ap::BothRw
            };
        }
        (!el0 || self.ap.el0_access()) && (!write || self.ap.writable())
    }
}

/// The attributes a region gets for routines running at `privilege`.
pub(crate) fn attrs_for(use_: Use, privilege: Privilege) -> Attrs {
    if privilege == Privilege::Hyp {
        return attrs_el2(use_);
    }
    let user = privilege == Privilege::User;
    let data = |ap| Attrs {
        device: false,
        ap,
        el1_exec: false,
        el0_exec: false,
    };
    match use_ {
        Use::Tables | Use::ExceptionStacks => data(Ap::El1Rw),
        Use::Data => data(if user { Ap::BothRw } else { Ap::El1Rw }),
        Use::Text => Attrs {
            device: false,
            ap: if user { Ap::BothRo } else { Ap::El1Ro },
            el1_exec: true,
            el0_exec: user,
        },
        Use::ReadOnly => data(if user { Ap::BothRo } else { Ap::El1Ro }),
        Use::Doorbell => Attrs {
            device: true,
            ..data(if user { Ap::BothRw } else { Ap::El1Rw })
        },
    }
}

/// The EL2 (E2H = 0) attributes of a region, in [`Attrs`] terms: AP[1]
/// set (RES1), `el1_exec` true so that bit 53 (RES0 at EL2) stays clear,
/// `el0_exec` for bit 54, which is XN at EL2.
fn attrs_el2(use_: Use) -> Attrs {
    let data = Attrs {
        device: use_ == Use::Doorbell,
        ap: Ap::BothRw,
        el1_exec: true,
        el0_exec: false,
    };
    match use_ {
        Use::Text => Attrs {
            device: false,
            ap: Ap::BothRo,
            el1_exec: true,
            el0_exec: true,
        },
        Use::ReadOnly => Attrs {
            ap: Ap::BothRo,
            ..data
        },
        _ => data,
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum PagingError {
    #[error("page-table area exhausted: {needed} tables do not fit in {available}; use less --mem")]
    OutOfTables { needed: usize, available: usize },
    #[error("mapping {0:#x} is not 4 KiB aligned")]
    Unaligned(u64),
    #[error("address {0:#x} is mapped twice")]
    Overlap(u64),
    #[error("address {0:#x} is beyond the 48-bit virtual address space")]
    OutOfRange(u64),
}

/// Page tables under construction: table GPA -> 512 entries.
#[derive(Debug, Default)]
pub struct PageTables {
    /// Guest-physical address of the L0 table (TTBR0_EL1).
    pub root: u64,
    tables: BTreeMap<u64, Box<[u64; 512]>>,
    start: u64,
    next: u64,
    end: u64,
}

fn idx(va: u64, level: u32) -> usize {
    ((va >> (39 - 9 * level)) & 0x1ff) as usize
}

impl PageTables {
    /// Empty tables (just the L0 table) allocated from `[area, area_end)`.
    pub fn new(area: u64, area_end: u64) -> Result<PageTables, PagingError> {
        let mut pt = PageTables {
            start: area,
            next: area,
            end: area_end,
            ..Default::default()
        };
        pt.root = pt.alloc()?;
        Ok(pt)
    }

    fn alloc(&mut self) -> Result<u64, PagingError> {
        if self.next + SIZE_4K > self.end {
            return Err(PagingError::OutOfTables {
                needed: self.tables.len() + 1,
                available: ((self.end - self.start) / SIZE_4K) as usize,
            });
        }
        let gpa = self.next;
        self.next += SIZE_4K;
        self.tables.insert(gpa, Box::new([0; 512]));
        Ok(gpa)
    }

    /// First byte of the table area not used by these tables.
    pub fn next_free(&self) -> u64 {
        self.next
    }

    /// Entry `i` of `table`: follow its table descriptor or create one.
    fn descend(&mut self, table: u64, i: usize, va: u64) -> Result<u64, PagingError> {
        let cur = self.tables[&table][i];
        if cur & DESC_VALID != 0 {
            if cur & DESC_TABLE == 0 {
                return Err(PagingError::Overlap(va));
            }
            return Ok(cur & ADDR_MASK);
        }
        let next = self.alloc()?;
        if let Some(t) = self.tables.get_mut(&table) {
            t[i] = next | DESC_TABLE | DESC_VALID;
        }
        Ok(next)
    }

    fn set_leaf(&mut self, table: u64, i: usize, va: u64, val: u64) -> Result<(), PagingError> {
        let t = self
            .tables
            .get_mut(&table)
            .ok_or(PagingError::Overlap(va))?;
        if t[i] & DESC_VALID != 0 {
            return Err(PagingError::Overlap(va));
        }
        t[i] = val;
        Ok(())
    }

    /// Map the 4 KiB page at `va` to `pa`.
    pub fn map_4k(&mut self, va: u64, pa: u64, a: Attrs) -> Result<(), PagingError> {
        let mut t = self.root;
        for level in 0..3 {
            t = self.descend(t, idx(va, level), va)?;
        }
        self.set_leaf(
            t,
            idx(va, 3),
            va,
            (pa & ADDR_MASK) | a.bits() | DESC_TABLE | DESC_VALID,
        )
    }

    /// Map the 2 MiB block at `va` to `pa`.
    pub fn map_2m(&mut self, va: u64, pa: u64, a: Attrs) -> Result<(), PagingError> {
        let mut t = self.root;
        for level in 0..2 {
            t = self.descend(t, idx(va, level), va)?;
        }
        self.set_leaf(
            t,
            idx(va, 2),
            va,
            (pa & ADDR_MASK & !(SIZE_2M - 1)) | a.bits() | DESC_VALID,
        )
    }

    /// Map `[va, va + size)` to `pa`, with 2 MiB blocks where both
    /// addresses are 2 MiB aligned and a whole block remains, else 4 KiB pages.
    pub fn map(&mut self, va: u64, pa: u64, size: u64, a: Attrs) -> Result<(), PagingError> {
        for x in [va, pa, size] {
            if !x.is_multiple_of(SIZE_4K) {
                return Err(PagingError::Unaligned(x));
            }
        }
        if va.checked_add(size).is_none_or(|e| e > 1 << 48) {
            return Err(PagingError::OutOfRange(va));
        }
        let mut off = 0;
        while off < size {
            let (v, p) = (va + off, pa + off);
            if v.is_multiple_of(SIZE_2M) && p.is_multiple_of(SIZE_2M) && size - off >= SIZE_2M {
                self.map_2m(v, p, a)?;
                off += SIZE_2M;
            } else {
                self.map_4k(v, p, a)?;
                off += SIZE_4K;
            }
        }
        Ok(())
    }

    /// The leaf descriptor `va` translates through and its level, or `None`
    /// for a translation fault.
    pub fn leaf(&self, va: u64) -> Option<(u64, u32)> {
        if va >> 48 != 0 {
            return None;
        }
        let mut table = self.root;
        for level in 0..4u32 {
            let e = self.tables.get(&table)?[idx(va, level)];
            if e & DESC_VALID == 0 {
                return None;
            }
            let is_table = e & DESC_TABLE != 0;
            if level == 3 {
                // At L3 only the page encoding (0b11) is valid.
                return is_table.then_some((e, 3));
            }
            if !is_table {
                // Blocks exist at L1 (1 GiB) and L2 (2 MiB) only.
                return (level > 0).then_some((e, level));
            }
            table = e & ADDR_MASK;
        }
        None
    }

    /// Walk the tables like the MMU: the physical address `va` maps to and
    /// the leaf's attributes, or `None` for a translation fault.
    pub fn translate(&self, va: u64) -> Option<(u64, Attrs)> {
        let (e, level) = self.leaf(va)?;
        let mask = (1u64 << (39 - 9 * level)) - 1;
        Some(((e & ADDR_MASK & !mask) | (va & mask), Attrs::from_bits(e)))
    }

    /// Number of tables.
    pub fn len(&self) -> usize {
        self.tables.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    /// Tables to write into guest memory, by guest-physical address.
    pub fn tables(&self) -> impl Iterator<Item = (u64, &[u64; 512])> {
        self.tables.iter().map(|(k, v)| (*k, &**v))
    }
}

/// Map `regions` for routines at `privilege`, allocating tables from
/// `[area, area_end)`.
pub(crate) fn map_regions(
    regions: &[Region],
    privilege: Privilege,
    area: u64,
    area_end: u64,
) -> Result<PageTables, PagingError> {
    let mut pt = PageTables::new(area, area_end)?;
    for r in regions {
        pt.map(r.va, r.pa, r.size, attrs_for(r.use_, privilege))?;
    }
    Ok(pt)
}

#[cfg(test)]
mod tests {
    /// Whether an EL2 (E2H = 0) regime descriptor's attributes permit an
    /// access: AP[2] says read-only, bit 54 (`el0_exec` clear) says XN.
    fn el2_permits(a: Attrs, write: bool, exec: bool) -> bool {
        if exec {
            return a.el0_exec;
        }
        !write || a.ap.writable()
    }

    use super::super::layout::{self, *};
    use super::*;
    use hypclear_abi::DOORBELL_GPA;

    fn both(ram: u64) -> (PageTables, PageTables) {
        let r = layout::regions(ram, &[TEST_BLOB]);
        let k = map_regions(&r, Privilege::Kernel, PAGE_TABLES_GPA, PAGE_TABLES_END).unwrap();
        let u = map_regions(&r, Privilege::User, k.next_free(), PAGE_TABLES_END).unwrap();
        (k, u)
    }

    /// Where the EL2 tables' idmap page lies in the tests: the test blob's
    /// first text page.
    const IDMAP: u64 = BLOB_WINDOW;

    /// The EL2 tables (with the idmap of the test blob's first page).
    fn hyp(ram: u64, from: u64) -> PageTables {
        let mut r = layout::regions(ram, &[TEST_BLOB]);
        r.push(layout::hyp_idmap(IDMAP + 0x80));
        map_regions(&r, Privilege::Hyp, from, PAGE_TABLES_END).unwrap()
    }

    /// The translation of the VA guest-physical `gpa` is mapped at.
    fn tr(pt: &PageTables, gpa: u64) -> Option<(u64, Attrs)> {
        pt.translate(guest_va(gpa))
    }

    /// The leaf descriptor of the VA guest-physical `gpa` is mapped at.
    fn lf(pt: &PageTables, gpa: u64) -> Option<(u64, u32)> {
        pt.leaf(guest_va(gpa))
    }

    #[test]
    fn ram_is_mapped_at_the_hyp_va_and_the_doorbell_where_it_is() {
        let (k, u) = both(64 << 20);
        for pt in [&k, &u] {
            assert_eq!(tr(pt, 0), None, "nothing below RAM");
            assert_eq!(tr(pt, RAM_BASE), None, "guard at the start of RAM");
            assert_eq!(tr(pt, GUARD_END - 1), None);
            for a in [
                GUARD_END,
                mailbox_gpa(3) + 8,
                stack_top(0) - 16,
                BLOB_WINDOW + 0x1234,
                ARENA_BASE,
                RAM_BASE + (64 << 20) - 1,
                DOORBELL_GPA,
            ] {
                assert_eq!(tr(pt, a).map(|x| x.0), Some(a), "{a:#x}");
            }
            assert_eq!(tr(pt, RAM_BASE + (64 << 20)), None, "end of RAM");
            assert_eq!(tr(pt, DOORBELL_GPA - 1), None);
            assert!(tr(pt, DOORBELL_GPA).unwrap().1.device);
            assert!(!tr(pt, ARENA_BASE).unwrap().1.device);
            for a in [GUARD_END, BLOB_WINDOW, ARENA_BASE] {
                assert_eq!(pt.translate(a), None, "{a:#x}: RAM not at its own address");
            }
        }
        assert_ne!(k.root, u.root);
    }

    /// The test blob's text, read-only data and data pages.
    const TEXT: u64 = BLOB_WINDOW;
    const RODATA: u64 = BLOB_WINDOW + 0x3000;
    const DATA: u64 = BLOB_WINDOW + 0x5000;

    #[test]
    fn kernel_tables_keep_el0_out_and_only_the_blob_executable() {
        let (k, _) = both(64 << 20);
        let at = |a: u64| tr(&k, a).unwrap().1;
        for a in [
            PAGE_TABLES_GPA,
            mailbox_gpa(0),
            stack_top(1) - 8,
            ARENA_BASE,
            DOORBELL_GPA,
            DATA,
        ] {
            let x = at(a);
            assert!(x.permits(false, true, false), "{a:#x}");
            assert!(!x.permits(true, false, false), "{a:#x} EL0");
            assert!(!x.permits(false, false, true), "{a:#x} exec");
        }
        let b = at(TEXT);
        assert!(b.permits(false, false, true) && b.permits(false, false, false));
        assert!(!b.permits(false, true, false), "blob text is read-only");
        assert!(!b.permits(true, false, true));
        let r = at(RODATA);
        assert!(r.permits(false, false, false));
        assert!(!r.permits(false, true, false) && !r.permits(false, false, true));
        assert_eq!(tr(&k, DATA + 0x3000), None, "the rest of the window");
    }

    #[test]
    fn user_tables_open_data_to_el0_but_not_tables_or_exception_stacks() {
        let (_, u) = both(64 << 20);
        let at = |a: u64| tr(&u, a).unwrap().1;
        for a in [mailbox_gpa(0), stack_top(0) - 8, ARENA_BASE, DOORBELL_GPA] {
            let x = at(a);
            assert!(x.permits(true, true, false), "{a:#x}");
            assert!(x.permits(false, true, false), "{a:#x} (PAN is off)");
            assert!(!x.permits(true, false, true) && !x.permits(false, false, true));
        }
        for a in [PAGE_TABLES_GPA, exception_stack_top(0) - 8] {
            assert!(!at(a).permits(true, false, false), "{a:#x}");
            assert!(at(a).permits(false, true, false));
        }
        let b = at(TEXT + 0x1000);
        assert!(b.permits(true, false, true), "routines run at EL0");
        assert!(b.permits(false, false, true), "vectors run at EL1");
        assert!(!b.permits(true, true, false) && !b.permits(false, true, false));
    }

    #[test]
    fn el2_tables_use_the_el2_descriptor_format() {
        let (_, u) = both(64 << 20);
        let h = hyp(64 << 20, u.next_free());
        let idmap = layout::hyp_idmap(IDMAP);
        for r in layout::regions(64 << 20, &[TEST_BLOB])
            .into_iter()
            .chain([idmap])
        {
            let use_ = r.use_;
            for va in (r.va..r.va + r.size).step_by(0x1000) {
                let a = va;
                let (d, _) = h.leaf(va).unwrap();
                assert_ne!(d & (1 << 6), 0, "{a:#x}: AP[1] is RES1 at EL2");
                assert_eq!(d & DESC_PXN, 0, "{a:#x}: bit 53 is RES0 at EL2");
                assert_eq!(d & DESC_NG, 0, "{a:#x}: nG is RES0 at EL2");
                let x = h.translate(va).unwrap().1;
                let text = use_ == Use::Text;
                let ro = text || use_ == Use::ReadOnly;
                assert_eq!(el2_permits(x, false, true), text, "{a:#x} exec");
                assert_eq!(el2_permits(x, true, false), !ro, "{a:#x} write");
                assert!(
                    !(el2_permits(x, true, false) && el2_permits(x, false, true)),
                    "WXN"
                );
                assert_eq!(x.device, use_ == Use::Doorbell);
            }
        }
    }

    #[test]
    fn descriptors_have_af_and_the_right_memory_types() {
        let (k, u) = both(32 << 20);
        let h = hyp(32 << 20, u.next_free());
        for pt in [&k, &u, &h] {
            for r in layout::regions(32 << 20, &[TEST_BLOB]) {
                let use_ = r.use_;
                for a in (r.pa..r.pa + r.size).step_by(4096) {
                    let (d, level) = lf(pt, a).unwrap();
                    assert_ne!(d & DESC_AF, 0, "{a:#x}");
                    assert_eq!(d & DESC_NG, 0, "{a:#x}");
                    let want = if use_ == Use::Doorbell {
                        MT_DEVICE_NGNRE
                    } else {
                        MT_NORMAL
                    };
                    assert_eq!((d >> DESC_ATTRINDX_SHIFT) & 7, want, "{a:#x}");
                    if use_ != Use::Doorbell {
                        assert_eq!(d & (3 << 8), DESC_SH_INNER, "{a:#x}");
                    }
                    let block = a >= ARENA_BASE
                        && use_ == Use::Data
                        && a < RAM_BASE + (32 << 20) - EDGE_REGION;
                    assert_eq!(level, if block { 2 } else { 3 }, "{a:#x}");
                }
            }
        }
    }

    #[test]
    fn the_arena_uses_2m_blocks() {
        let (k, _) = both(64 << 20);
        // Find the L2 entry for the arena's VA: it must be a block.
        let arena = guest_va(ARENA_BASE);
        let l1 = k.tables[&k.root][idx(arena, 0)] & ADDR_MASK;
        let l2 = k.tables[&l1][idx(arena, 1)] & ADDR_MASK;
        let e = k.tables[&l2][idx(arena, 2)];
        assert_eq!(e & 3, 1, "the arena should be a 2 MiB block, got {e:#x}");
        // And the fixed area below and the blob use pages.
        assert_eq!(k.tables[&l2][idx(guest_va(RAM_BASE), 2)] & 3, 3);
        assert_eq!(k.tables[&l2][idx(guest_va(BLOB_WINDOW), 2)] & 3, 3);
    }

    /// The raw L3 entry for `va` (its L0-L2 entries must be tables).
    fn l3_entry(pt: &PageTables, va: u64) -> u64 {
        let mut t = pt.root;
        for level in 0..3 {
            t = pt.tables[&t][idx(va, level)] & ADDR_MASK;
        }
        pt.tables[&t][idx(va, 3)]
    }

    #[test]
    fn the_edge_hole_alone_is_invalid_at_el1_el0_and_el2() {
        let ram = 64 << 20;
        let (k, u) = both(ram);
        let h = hyp(ram, u.next_free());
        let hole = edge_hole(ram).unwrap();
        let end = RAM_BASE + ram;
        for pt in [&k, &u, &h] {
            assert_eq!(tr(pt, hole), None);
            assert_eq!(tr(pt, hole + 0xfff), None);
            // An invalid descriptor in the L3 table of the edge region.
            let l3 = lf(pt, hole - 1).map(|(_, level)| level);
            assert_eq!(l3, Some(3), "4 KiB pages around the hole");
            for a in [hole - 1, hole + 0x1000, end - EDGE_REGION, end - 1] {
                assert_eq!(tr(pt, a).map(|x| x.0), Some(a), "{a:#x}");
            }
            let below = end - EDGE_REGION - 1;
            assert_eq!(lf(pt, below).map(|(_, l)| l), Some(2), "a 2 MiB block");
            let hole_l3 = l3_entry(pt, guest_va(hole));
            assert_eq!(hole_l3, 0, "the hole's descriptor is invalid");
        }
    }

    #[test]
    fn max_ram_fits_all_three_sets_in_the_table_area() {
        let (k, u) = both(MAX_RAM);
        let h = hyp(MAX_RAM, u.next_free());
        assert!(h.next_free() <= PAGE_TABLES_END);
        assert_eq!(
            tr(&k, RAM_BASE + MAX_RAM - 1).map(|x| x.0),
            Some(RAM_BASE + MAX_RAM - 1)
        );
        assert_eq!(tr(&u, RAM_BASE + MAX_RAM), None);
        // Twice as much would not fit.
        let r = layout::regions(4 * MAX_RAM, &[TEST_BLOB]);
        let e = map_regions(
            &r,
            Privilege::Kernel,
            PAGE_TABLES_GPA,
            PAGE_TABLES_GPA + 100 * 4096,
        );
        assert!(matches!(e, Err(PagingError::OutOfTables { .. })));
    }

    #[test]
    fn overlaps_and_misalignment_are_errors() {
        let a = attrs_for(Use::Data, Privilege::Kernel);
        let mut pt = PageTables::new(0x1_0000, 0x10_0000).unwrap();
        pt.map(0x4000_0000, 0x4000_0000, 0x20_0000, a).unwrap();
        assert_eq!(
            pt.map_4k(0x4000_1000, 0x4000_1000, a),
            Err(PagingError::Overlap(0x4000_1000))
        );
        assert_eq!(
            pt.map(0x4000_0100, 0, 4096, a),
            Err(PagingError::Unaligned(0x4000_0100))
        );
        assert!(pt.map(1 << 48, 0, 4096, a).is_err());
    }

    /// Every mapped 4 KiB page below `limit` (walking the tables), as VAs.
    fn mapped_below(pt: &PageTables, limit: u64) -> Vec<u64> {
        let mut out = Vec::new();
        let mut va = 0;
        while va < limit {
            match pt.leaf(va) {
                Some((_, level)) => {
                    out.push(va);
                    va += 1 << (39 - 9 * level);
                }
                None => va += 0x1000,
            }
        }
        out
    }

    #[test]
    fn below_4_gib_nothing_is_mapped_but_the_el2_idmap_page() {
        let (k, u) = both(64 << 20);
        let h = hyp(64 << 20, u.next_free());
        assert_eq!(mapped_below(&k, 1 << 32), [0u64; 0]);
        assert_eq!(mapped_below(&u, 1 << 32), [0u64; 0]);
        assert_eq!(mapped_below(&h, 1 << 32), [IDMAP]);
        let (pa, x) = h.translate(IDMAP + 0x84).unwrap();
        assert_eq!(pa, IDMAP + 0x84, "the idmap: VA == PA");
        assert!(
            x.el0_exec && !x.ap.writable(),
            "EL2 text: executable, read-only"
        );
        // Truncated to 32 bits, every RAM address lands there (or below
        // 4 GiB anyway), unmapped in every set but that one text page.
        for gpa in [
            GUARD_END,
            mailbox_gpa(1),
            stack_top(0) - 8,
            BLOB_WINDOW,
            ARENA_BASE,
        ] {
            let t = guest_va(gpa) & 0xffff_ffff;
            assert_eq!(k.translate(t), None, "{gpa:#x}");
            assert_eq!(u.translate(t), None, "{gpa:#x}");
            assert_eq!(h.translate(t), None, "{gpa:#x}");
        }
    }
}
