//! x86_64 4-level page tables for the identity-mapped guest.
//!
//! RAM is mapped with 2 MiB pages, except the first 2 MiB, which uses 4 KiB
//! pages so that page 0 can stay not-present, and the last 2 MiB (the edge
//! region), 4 KiB pages with the edge checks' hole left not present. The
//! doorbell page is mapped on its own with a 4 KiB page. Every entry has the U/S bit so the same tables
//! serve CPL 3 and CPL 0.
use std::collections::BTreeMap;
use thiserror::Error;

pub(crate) const PTE_PRESENT: u64 = 1 << 0;
pub(crate) const PTE_WRITE: u64 = 1 << 1;
pub(crate) const PTE_USER: u64 = 1 << 2;
pub(crate) const PTE_HUGE: u64 = 1 << 7;
const ADDR_MASK: u64 = 0x000f_ffff_ffff_f000;
const LEAF: u64 = PTE_PRESENT | PTE_WRITE | PTE_USER;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum PagingError {
    #[error("page-table area exhausted: {needed} tables do not fit in {available}; use less --mem")]
    OutOfTables { needed: usize, available: usize },
    #[error("RAM size {0:#x} is not a multiple of 2 MiB")]
    Unaligned(u64),
}

/// Page tables under construction: table GPA -> 512 entries.
#[derive(Debug, Default)]
pub struct PageTables {
    pub root: u64,
    tables: BTreeMap<u64, Box<[u64; 512]>>,
    next: u64,
    end: u64,
}

impl PageTables {
    fn alloc(&mut self) -> Result<u64, PagingError> {
        if self.next + 4096 > self.end {
            return Err(PagingError::OutOfTables {
                needed: self.tables.len() + 1,
                available: self.tables.len(),
            });
        }
        let gpa = self.next;
        self.next += 4096;
        self.tables.insert(gpa, Box::new([0; 512]));
        Ok(gpa)
    }

    /// Table at `table`, entry `idx`: follow it or create the next level.
    fn descend(&mut self, table: u64, idx: usize) -> Result<u64, PagingError> {
        let cur = self.tables[&table][idx];
        if cur & PTE_PRESENT != 0 {
            return Ok(cur & ADDR_MASK);
        }
        let next = self.alloc()?;
        if let Some(t) = self.tables.get_mut(&table) {
            t[idx] = next | LEAF;
        }
        Ok(next)
    }

    fn set(&mut self, table: u64, idx: usize, val: u64) {
        if let Some(t) = self.tables.get_mut(&table) {
            t[idx] = val;
        }
    }

    /// Map the 4 KiB page at `va` to `pa`.
    pub fn map_4k(&mut self, va: u64, pa: u64) -> Result<(), PagingError> {
        let pdpt = self.descend(self.root, idx(va, 39))?;
        let pd = self.descend(pdpt, idx(va, 30))?;
        let pt = self.descend(pd, idx(va, 21))?;
        self.set(pt, idx(va, 12), (pa & ADDR_MASK) | LEAF);
        Ok(())
    }

    /// Map the 2 MiB page at `va` to `pa`.
    pub fn map_2m(&mut self, va: u64, pa: u64) -> Result<(), PagingError> {
        let pdpt = self.descend(self.root, idx(va, 39))?;
        let pd = self.descend(pdpt, idx(va, 30))?;
        self.set(pd, idx(va, 21), (pa & ADDR_MASK) | LEAF | PTE_HUGE);
        Ok(())
    }

    /// Walk the tables like the MMU: the physical address `va` maps to.
    pub fn translate(&self, va: u64) -> Option<u64> {
        let mut table = self.root;
        for (level, shift) in [39u32, 30, 21, 12].into_iter().enumerate() {
            let e = self.tables.get(&table)?[idx(va, shift)];
            if e & PTE_PRESENT == 0 || e & PTE_USER == 0 {
                return None;
            }
            if level == 2 && e & PTE_HUGE != 0 {
                return Some((e & ADDR_MASK & !0x1f_ffff) | (va & 0x1f_ffff));
            }
            table = e & ADDR_MASK;
            if level == 3 {
                return Some(table | (va & 0xfff));
            }
        }
        None
    }

    /// Tables to write into guest memory, by guest-physical address.
    pub fn tables(&self) -> impl Iterator<Item = (u64, &[u64; 512])> {
        self.tables.iter().map(|(k, v)| (*k, &**v))
    }
}

fn idx(va: u64, shift: u32) -> usize {
    ((va >> shift) & 0x1ff) as usize
}

/// Identity-map `[0, ram_size)` (page 0 and `hole` left not present) and
/// `doorbell`. The 2 MiB page holding `hole` is mapped with 4 KiB pages.
/// Tables are allocated from `[area, area_end)`.
pub(crate) fn identity_map(
    ram_size: u64,
    doorbell: u64,
    area: u64,
    area_end: u64,
    hole: Option<u64>,
) -> Result<PageTables, PagingError> {
    if !ram_size.is_multiple_of(2 << 20) {
        return Err(PagingError::Unaligned(ram_size));
    }
    let mut pt = PageTables {
        next: area,
        end: area_end,
        ..Default::default()
    };
    pt.root = pt.alloc()?;
    for page in (0x1000..(2u64 << 20).min(ram_size)).step_by(4096) {
        pt.map_4k(page, page)?;
    }
    let split = hole.map(|h| h & !0x1f_ffff);
    for page in ((2u64 << 20)..ram_size).step_by(2 << 20) {
        if Some(page) != split {
            pt.map_2m(page, page)?;
            continue;
        }
        for small in (page..page + (2 << 20)).step_by(4096) {
            if Some(small) != hole {
                pt.map_4k(small, small)?;
            }
        }
    }
    pt.map_4k(doorbell, doorbell)?;
    Ok(pt)
}

#[cfg(test)]
mod tests {
    use crate::x86_64::layout;

    #[test]
    fn max_ram_is_exactly_what_the_page_table_area_can_map() {
        let map = |ram| {
            identity_map(
                ram,
                hypclear_abi::DOORBELL_GPA,
                layout::PAGE_TABLES_GPA,
                layout::PAGE_TABLES_END,
                layout::edge_hole(ram),
            )
        };
        assert!(map(layout::MAX_RAM).is_ok());
        assert!(matches!(
            map(layout::MAX_RAM + layout::RAM_ALIGN),
            Err(PagingError::OutOfTables { .. })
        ));
    }

    use super::*;
    use hypclear_abi::DOORBELL_GPA;

    #[test]
    fn identity_map_translates_ram_and_doorbell() {
        let pt = identity_map(64 << 20, DOORBELL_GPA, 0x10000, 0x100000, None).unwrap();
        assert_eq!(pt.translate(0), None, "page 0 must not be present");
        assert_eq!(pt.translate(0xfff), None);
        assert_eq!(pt.translate(0x1000), Some(0x1000));
        assert_eq!(pt.translate(0x1f_ffff), Some(0x1f_ffff));
        assert_eq!(pt.translate(0x20_0000), Some(0x20_0000));
        assert_eq!(pt.translate(0x3ff_fff8), Some(0x3ff_fff8));
        assert_eq!(pt.translate(64 << 20), None, "beyond RAM");
        assert_eq!(pt.translate(DOORBELL_GPA + 8), Some(DOORBELL_GPA + 8));
        assert_eq!(pt.translate(DOORBELL_GPA - 4096), None);
        // PML4, PDPT, PD, PT for RAM; PDPT, PD, PT for the doorbell.
        assert_eq!(pt.tables().count(), 7);
        for (gpa, _) in pt.tables() {
            assert!((0x10000..0x100000).contains(&gpa));
        }
    }

    #[test]
    fn the_edge_hole_alone_is_not_present() {
        let ram = 64 << 20;
        let hole = layout::edge_hole(ram).unwrap();
        let pt = identity_map(ram, DOORBELL_GPA, 0x10000, 0x100000, Some(hole)).unwrap();
        assert_eq!(pt.translate(hole), None);
        assert_eq!(pt.translate(hole + 0xfff), None);
        assert_eq!(pt.translate(hole - 1), Some(hole - 1));
        assert_eq!(pt.translate(hole + 0x1000), Some(hole + 0x1000));
        assert_eq!(pt.translate(ram - 1), Some(ram - 1));
        assert_eq!(pt.translate(ram - (2 << 20) - 1), Some(ram - (2 << 20) - 1));
        assert_eq!(
            pt.tables().count(),
            8,
            "one more page table: the edge region's"
        );
    }

    #[test]
    fn large_ram_uses_one_pd_per_gib() {
        let pt = identity_map(3 << 30, DOORBELL_GPA, 0x10000, 0x100000, None).unwrap();
        assert_eq!(pt.translate((3 << 30) - 1), Some((3 << 30) - 1));
        assert_eq!(pt.tables().count(), 4 + 2 + 3);
    }

    #[test]
    fn errors() {
        assert_eq!(
            identity_map(3 << 20, DOORBELL_GPA, 0x10000, 0x100000, None).unwrap_err(),
            PagingError::Unaligned(3 << 20)
        );
        assert!(matches!(
            identity_map(64 << 30, DOORBELL_GPA, 0x10000, 0x14000, None),
            Err(PagingError::OutOfTables { .. })
        ));
    }
}
