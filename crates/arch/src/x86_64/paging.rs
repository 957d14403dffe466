//! x86_64 4-level page tables of the guest (see `layout` for the map).
//!
//! The harness below the blob window is identity mapped, the first 2 MiB
//! with 4 KiB pages so that page 0 can stay not present; the blob's pages
//! only in the text map, W^X; the arena only in the direct map, with 2 MiB
//! pages but for the last 2 MiB of RAM (the edge region): 4 KiB pages with
//! the edge checks' hole left not present. The doorbell page is mapped on
//! its own with a 4 KiB page. Nothing is writable and executable; every
//! entry has the U/S bit so the same tables serve CPL 3 and CPL 0.
use super::layout::{ARENA_BASE, BLOB_WINDOW, guest_va};
use crate::BlobSections;
use thiserror::Error;

pub(crate) const PTE_PRESENT: u64 = 1 << 0;
pub(crate) const PTE_WRITE: u64 = 1 << 1;
pub(crate) const PTE_USER: u64 = 1 << 2;
pub(crate) const PTE_HUGE: u64 = 1 << 7;
pub(crate) const PTE_NX: u64 = 1 << 63;
const ADDR_MASK: u64 = 0x000f_ffff_ffff_f000;
/// Upper levels allow everything; the leaves decide.
const TABLE: u64 = PTE_PRESENT | PTE_WRITE | PTE_USER;

/// What a mapped page may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Perm {
    /// Read and execute (the blob's text).
    Text,
    /// Read only (the blob's read-only data).
    ReadOnly,
    /// Read and write, never execute (data, stacks, the arena).
    Data,
}

impl Perm {
    fn leaf(self) -> u64 {
        PTE_PRESENT
            | PTE_USER
            | match self {
                Perm::Text => 0,
                Perm::ReadOnly => PTE_NX,
                Perm::Data => PTE_WRITE | PTE_NX,
            }
    }

    fn of(entry: u64) -> Perm {
        match (entry & PTE_WRITE != 0, entry & PTE_NX != 0) {
            (false, false) => Perm::Text,
            (false, true) => Perm::ReadOnly,
            // Writable and executable is never mapped.
            (true, _) => Perm::Data,
        }
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum PagingError {
    #[error("page-table area exhausted: {needed} tables do not fit in {available}; use less --mem")]
    OutOfTables { needed: usize, available: usize },
    #[error("RAM size {0:#x} is not a multiple of 2 MiB")]
    Unaligned(u64),
}

/// Page tables under construction, allocated in turn from `start`: the
/// table at GPA `start + 4096 * i` is `tables[i]` (an index, not a map:
/// a 256 MB guest maps over a thousand pages before its first hypercall).
#[derive(Debug, Default)]
pub struct PageTables {
    pub root: u64,
    start: u64,
    tables: Vec<Box<[u64; 512]>>,
    end: u64,
}

impl PageTables {
    fn alloc(&mut self) -> Result<u64, PagingError> {
        let gpa = self.start + 4096 * self.tables.len() as u64;
        if gpa + 4096 > self.end {
            return Err(PagingError::OutOfTables {
                needed: self.tables.len() + 1,
                available: self.tables.len(),
            });
        }
        self.tables.push(Box::new([0; 512]));
        Ok(gpa)
    }

    /// Which of these tables is at `gpa`, if one is.
    fn index(&self, gpa: u64) -> Option<usize> {
        let off = gpa.checked_sub(self.start)?;
        let i = usize::try_from(off / 4096).ok()?;
        (off.is_multiple_of(4096) && i < self.tables.len()).then_some(i)
    }

    fn table(&self, gpa: u64) -> Option<&[u64; 512]> {
        self.tables.get(self.index(gpa)?).map(|t| &**t)
    }

    fn table_mut(&mut self, gpa: u64) -> Option<&mut [u64; 512]> {
        let i = self.index(gpa)?;
        self.tables.get_mut(i).map(|t| &mut **t)
    }

    /// Table at `table`, entry `idx`: follow it or create the next level.
    fn descend(&mut self, table: u64, idx: usize) -> Result<u64, PagingError> {
        let cur = self.table(table).map_or(0, |t| t[idx]);
        if cur & PTE_PRESENT != 0 {
            return Ok(cur & ADDR_MASK);
        }
        let next = self.alloc()?;
        self.set(table, idx, next | TABLE);
        Ok(next)
    }

    fn set(&mut self, table: u64, idx: usize, val: u64) {
        if let Some(t) = self.table_mut(table) {
            t[idx] = val;
        }
    }

    /// Map the 4 KiB page at `va` to `pa`.
    pub fn map_4k(&mut self, va: u64, pa: u64, perm: Perm) -> Result<(), PagingError> {
        let pdpt = self.descend(self.root, idx(va, 39))?;
        let pd = self.descend(pdpt, idx(va, 30))?;
        let pt = self.descend(pd, idx(va, 21))?;
        self.set(pt, idx(va, 12), (pa & ADDR_MASK) | perm.leaf());
        Ok(())
    }

    /// Map the 2 MiB page at `va` to `pa`.
    pub fn map_2m(&mut self, va: u64, pa: u64, perm: Perm) -> Result<(), PagingError> {
        let pdpt = self.descend(self.root, idx(va, 39))?;
        let pd = self.descend(pdpt, idx(va, 30))?;
        self.set(pd, idx(va, 21), (pa & ADDR_MASK) | perm.leaf() | PTE_HUGE);
        Ok(())
    }

    /// Walk the tables like the MMU: the physical address `va` maps to.
    pub fn translate(&self, va: u64) -> Option<u64> {
        self.walk(va).map(|(pa, _)| pa)
    }

    /// The physical address `va` maps to and what the page may do.
    pub fn walk(&self, va: u64) -> Option<(u64, Perm)> {
        let mut table = self.root;
        for (level, shift) in [39u32, 30, 21, 12].into_iter().enumerate() {
            let e = self.table(table)?[idx(va, shift)];
            if e & PTE_PRESENT == 0 || e & PTE_USER == 0 {
                return None;
            }
            if level == 2 && e & PTE_HUGE != 0 {
                let pa = (e & ADDR_MASK & !0x1f_ffff) | (va & 0x1f_ffff);
                return Some((pa, Perm::of(e)));
            }
            table = e & ADDR_MASK;
            if level == 3 {
                return Some((table | (va & 0xfff), Perm::of(e)));
            }
        }
        None
    }

    /// Tables to write into guest memory, by guest-physical address.
    pub fn tables(&self) -> impl Iterator<Item = (u64, &[u64; 512])> {
        let gpas = (self.start..).step_by(4096);
        gpas.zip(self.tables.iter().map(|t| &**t))
    }
}

fn idx(va: u64, shift: u32) -> usize {
    ((va >> shift) & 0x1ff) as usize
}

/// What [`guest_map`] maps.
#[derive(Debug, Clone)]
pub(crate) struct GuestMap {
    pub ram_size: u64,
    pub doorbell: u64,
    /// Where the tables go: `[start, end)`.
    pub area: (u64, u64),
    /// The edge checks' unmapped page.
    pub hole: Option<u64>,
    /// The blobs: each one's guest-physical base and pages by permission.
    pub blobs: Vec<(u64, BlobSections)>,
}

/// Map guest RAM where [`guest_va`] says, W^X as the hyp maps itself: the
/// harness below the blob window identity mapped, data (page 0 left not
/// present); the blob's own pages in the text map, text read-only and
/// executable, the rest never executable (the rest of the window is not
/// mapped); the arena in the direct map, data, with 4 KiB pages around
/// `hole` (left not present); the doorbell, data.
pub(crate) fn guest_map(m: &GuestMap) -> Result<PageTables, PagingError> {
    if !m.ram_size.is_multiple_of(2 << 20) {
        return Err(PagingError::Unaligned(m.ram_size));
    }
    let mut pt = PageTables {
        start: m.area.0,
        end: m.area.1,
        ..Default::default()
    };
    pt.root = pt.alloc()?;
    let harness_end = BLOB_WINDOW.min(m.ram_size);
    for page in (0x1000..(2u64 << 20).min(harness_end)).step_by(4096) {
        pt.map_4k(page, page, Perm::Data)?;
    }
    for page in ((2u64 << 20)..harness_end).step_by(2 << 20) {
        pt.map_2m(page, page, Perm::Data)?;
    }
    for &(base, s) in &m.blobs {
        for off in (0..s.end).step_by(4096) {
            let perm = match off {
                o if o < s.text_end => Perm::Text,
                o if o < s.data_start => Perm::ReadOnly,
                _ => Perm::Data,
            };
            pt.map_4k(guest_va(base + off), base + off, perm)?;
        }
    }
    let split = m.hole.map(|h| h & !0x1f_ffff);
    for page in (ARENA_BASE.min(m.ram_size)..m.ram_size).step_by(2 << 20) {
        if Some(page) != split {
            pt.map_2m(guest_va(page), page, Perm::Data)?;
            continue;
        }
        for small in (page..page + (2 << 20)).step_by(4096) {
            if Some(small) != m.hole {
                pt.map_4k(guest_va(small), small, Perm::Data)?;
            }
        }
    }
    pt.map_4k(m.doorbell, m.doorbell, Perm::Data)?;
    Ok(pt)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::x86_64::layout::{self, BLOB_WINDOW_END, DIRECT_MAP, TEXT_MAP};
    use hypclear_abi::DOORBELL_GPA;

    /// A blob of 3 text pages, 1 read-only page and 2 data pages.
    const BLOB: (u64, BlobSections) = (
        BLOB_WINDOW + 0x5000,
        BlobSections {
            text_end: 0x3000,
            data_start: 0x4000,
            end: 0x6000,
        },
    );

    fn map(ram_size: u64, hole: Option<u64>) -> Result<PageTables, PagingError> {
        guest_map(&GuestMap {
            ram_size,
            doorbell: DOORBELL_GPA,
            area: (0x10000, 0x100000),
            hole,
            blobs: vec![BLOB],
        })
    }

    /// Only a table's own address names it: not an address inside one
    /// (an entry pointing there is not followed), nor one past the last.
    #[test]
    fn a_table_is_found_at_its_own_address_only() {
        let pt = map(64 << 20, None).unwrap();
        let n = pt.tables().count() as u64;
        assert!(pt.table(pt.root).is_some());
        assert!(pt.table(pt.root + 8).is_none());
        assert!(pt.table(0x10000 + 4096 * (n - 1)).is_some());
        assert!(pt.table(0x10000 + 4096 * n).is_none());
        assert!(pt.table(0x10000 - 4096).is_none());
    }

    #[test]
    fn max_ram_is_exactly_what_the_page_table_area_can_map() {
        // The largest blob: the whole window, over 6 page tables.
        let window = BLOB_WINDOW_END - BLOB_WINDOW;
        let map = |ram| {
            guest_map(&GuestMap {
                ram_size: ram,
                doorbell: DOORBELL_GPA,
                area: (layout::PAGE_TABLES_GPA, layout::PAGE_TABLES_END),
                hole: layout::edge_hole(ram),
                blobs: vec![(
                    BLOB_WINDOW,
                    BlobSections {
                        text_end: window,
                        data_start: window,
                        end: window,
                    },
                )],
            })
        };
        assert!(map(layout::MAX_RAM).is_ok());
        assert!(matches!(
            map(layout::MAX_RAM + layout::RAM_ALIGN),
            Err(PagingError::OutOfTables { .. })
        ));
    }

    #[test]
    fn the_harness_is_identity_mapped_the_blob_and_arena_only_high() {
        let pt = map(64 << 20, None).unwrap();
        assert_eq!(pt.translate(0), None, "page 0 must not be present");
        assert_eq!(pt.translate(0xfff), None);
        assert_eq!(pt.translate(0x1000), Some(0x1000));
        assert_eq!(pt.translate(0x1f_ffff), Some(0x1f_ffff));
        assert_eq!(pt.translate(BLOB_WINDOW - 1), Some(BLOB_WINDOW - 1));
        assert_eq!(
            pt.translate(BLOB_WINDOW),
            None,
            "the blob is not identity mapped"
        );
        assert_eq!(pt.translate(BLOB.0), None);
        assert_eq!(pt.translate(TEXT_MAP + BLOB.0), Some(BLOB.0));
        assert_eq!(
            pt.translate(TEXT_MAP + BLOB.0 + 0x5fff),
            Some(BLOB.0 + 0x5fff)
        );
        assert_eq!(
            pt.translate(TEXT_MAP + BLOB.0 - 1),
            None,
            "only the blob's pages"
        );
        assert_eq!(pt.translate(TEXT_MAP + BLOB.0 + 0x6000), None);
        assert_eq!(
            pt.translate(ARENA_BASE),
            None,
            "the arena is not identity mapped"
        );
        assert_eq!(pt.translate(DIRECT_MAP + ARENA_BASE), Some(ARENA_BASE));
        assert_eq!(pt.translate(DIRECT_MAP + 0x3ff_fff8), Some(0x3ff_fff8));
        assert_eq!(pt.translate(DIRECT_MAP + (64 << 20)), None, "beyond RAM");
        assert_eq!(
            pt.translate(DIRECT_MAP + 0x1000),
            None,
            "the harness is not in the direct map"
        );
        assert_eq!(pt.translate(DOORBELL_GPA + 8), Some(DOORBELL_GPA + 8));
        assert_eq!(pt.translate(DOORBELL_GPA - 4096), None);
        // PML4; PDPT, PD, PT of the harness; PDPT, PD, PT of the text map;
        // PDPT, PD of the direct map; PDPT, PD, PT of the doorbell.
        assert_eq!(pt.tables().count(), 12);
        for (gpa, _) in pt.tables() {
            assert!((0x10000..0x100000).contains(&gpa));
        }
    }

    #[test]
    fn nothing_is_writable_and_executable() {
        let pt = map(64 << 20, None).unwrap();
        let perm = |va| pt.walk(va).map(|(_, p)| p);
        let text = TEXT_MAP + BLOB.0;
        assert_eq!(perm(text), Some(Perm::Text));
        assert_eq!(perm(text + 0x2fff), Some(Perm::Text));
        assert_eq!(perm(text + 0x3000), Some(Perm::ReadOnly));
        assert_eq!(perm(text + 0x4000), Some(Perm::Data));
        assert_eq!(perm(text + 0x5fff), Some(Perm::Data));
        for va in [
            0x1000,
            0x20_0000,
            DIRECT_MAP + ARENA_BASE,
            DIRECT_MAP + (64 << 20) - 1,
            DOORBELL_GPA,
        ] {
            assert_eq!(perm(va), Some(Perm::Data), "{va:#x}");
        }
        // Writable and executable: only the upper levels' entries, which
        // point at tables and leave the decision to the leaves.
        let tables: std::collections::BTreeSet<u64> = pt.tables().map(|(gpa, _)| gpa).collect();
        for (_, table) in pt.tables() {
            for e in table
                .iter()
                .filter(|e| *e & PTE_WRITE != 0 && *e & PTE_NX == 0)
            {
                assert_eq!(e & !ADDR_MASK, TABLE, "W+X leaf {e:#x}");
                assert!(tables.contains(&(e & ADDR_MASK)), "W+X leaf {e:#x}");
            }
        }
    }

    #[test]
    fn the_edge_hole_alone_is_not_present() {
        let ram = 64 << 20;
        let hole = layout::edge_hole(ram).unwrap();
        let pt = map(ram, Some(hole)).unwrap();
        let va = |p| DIRECT_MAP + p;
        assert_eq!(pt.translate(va(hole)), None);
        assert_eq!(pt.translate(va(hole + 0xfff)), None);
        assert_eq!(pt.translate(va(hole - 1)), Some(hole - 1));
        assert_eq!(pt.translate(va(hole + 0x1000)), Some(hole + 0x1000));
        assert_eq!(pt.translate(va(ram - 1)), Some(ram - 1));
        assert_eq!(
            pt.translate(va(ram - (2 << 20) - 1)),
            Some(ram - (2 << 20) - 1)
        );
        assert_eq!(
            pt.tables().count(),
            13,
            "one more page table: the edge region's"
        );
    }

    #[test]
    fn large_ram_uses_one_pd_per_gib() {
        let pt = map(3 << 30, None).unwrap();
        assert_eq!(
            pt.translate(DIRECT_MAP + (3 << 30) - 1),
            Some((3 << 30) - 1)
        );
        assert_eq!(pt.tables().count(), 12 + 2);
    }

    #[test]
    fn errors() {
        assert_eq!(
            map(3 << 20, None).unwrap_err(),
            PagingError::Unaligned(3 << 20)
        );
        let tiny = GuestMap {
            ram_size: 64 << 30,
            doorbell: DOORBELL_GPA,
            area: (0x10000, 0x14000),
            hole: None,
            blobs: vec![BLOB],
        };
        assert!(matches!(
            guest_map(&tiny),
            Err(PagingError::OutOfTables { .. })
        ));
    }
}
