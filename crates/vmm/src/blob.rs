//! The embedded guest blob: ELF inspection (symbols, alias table, selftest
//! table, relocation list) and loading at a randomized address.
//!
//! Two link configurations are built by `build.rs` (see there):
//! `vanilla` has out-of-line `clear_page` routines aliased to
//! `__pi_clear_page_*`; `memset` has none, so `clear_page` becomes
//! `memset(addr, 0, PAGE_SIZE)` at the call site.
use crate::arch::RamAccess;
use crate::error::{Error, Result};
use hypclear_link::hyprel;
use object::{Object, ObjectSection, ObjectSymbol};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use vm_memory::{Bytes, GuestAddress};

pub use hypclear_link::link::SYMBOL_PREFIX;
/// Size of one alias/selftest table row: `{ u64 routine, u64 name }`.
pub(crate) const ROW_SIZE: u64 = 16;

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize,
)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum LinkConfig {
    /// clear_page is its own routine, aliased to __pi_clear_page_<variant>.
    Vanilla,
    /// No clear_page routine or alias: clear_page is memset(addr, 0, PAGE_SIZE).
    Memset,
}

impl LinkConfig {
    pub fn name(self) -> &'static str {
        match self {
            LinkConfig::Vanilla => "vanilla",
            LinkConfig::Memset => "memset",
        }
    }

    fn elf(self) -> &'static [u8] {
        match self {
            LinkConfig::Vanilla => hypclear_guest::VANILLA_ELF,
            LinkConfig::Memset => hypclear_guest::MEMSET_ELF,
        }
    }

    /// The flat image linux-loader's PE loader takes on aarch64.
    #[cfg(target_arch = "aarch64")]
    fn image(self) -> &'static [u8] {
        match self {
            LinkConfig::Vanilla => hypclear_guest::VANILLA_BIN,
            LinkConfig::Memset => hypclear_guest::MEMSET_BIN,
        }
    }
}

impl std::fmt::Display for LinkConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One row of the alias or selftest table.
#[derive(Debug, Clone, Serialize)]
pub struct TableRow {
    /// Alias name, e.g. `memset_erms` (symbol `__hypclear_memset_erms`).
    pub name: String,
    /// The routine it reaches, e.g. `__pi_memset_erms`.
    pub target: String,
    /// Link-time address (offset from the blob base).
    pub offset: u64,
}

/// A blob's bytes: built into hypclear (used in place, never copied) or
/// read at run time (shared between the VMs of a side).
#[derive(Debug, Clone)]
pub enum BlobBytes {
    Static(&'static [u8]),
    Shared(Arc<[u8]>),
}

impl std::ops::Deref for BlobBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            BlobBytes::Static(b) => b,
            BlobBytes::Shared(b) => b,
        }
    }
}

/// A parsed blob, not yet loaded.
#[derive(Debug, Clone)]
pub struct Blob {
    pub config: LinkConfig,
    pub symbols: BTreeMap<String, u64>,
    /// Symbols that are absolute values, not addresses in the image.
    pub absolute: std::collections::BTreeSet<String>,
    pub aliases: Vec<TableRow>,
    pub selftests: Vec<TableRow>,
    pub relocs: Vec<u32>,
    /// Link-time addresses of the harness's doorbell stores (`RING`, from
    /// `.rodata.hyp_rings`): the only places a hypercall may come from.
    pub rings: Vec<u64>,
    /// Bytes from the base to the end of .bss.
    pub size: u64,
    /// Its pages by permission (text, read-only data, writable data).
    pub sections: crate::arch::BlobSections,
    /// The linked ELF (after load-time patching for a kernel blob).
    pub elf: BlobBytes,
    /// The flat image from address 0 (what the aarch64 PE loader takes).
    pub image: Option<BlobBytes>,
}

/// Where a blob was loaded (plain data, defined by the arch contract).
pub use crate::arch::Loaded;
impl Blob {
    /// The built-in blob of `config` (a kernel blob is a [`Side::Kernel`]).
    pub fn get(config: LinkConfig) -> Result<Blob> {
        #[cfg(target_arch = "aarch64")]
        let image = Some(BlobBytes::Static(config.image()));
        #[cfg(not(target_arch = "aarch64"))]
        let image = None;
        Self::parse(config, BlobBytes::Static(config.elf()), image)
    }

    pub fn parse(config: LinkConfig, elf: BlobBytes, image: Option<BlobBytes>) -> Result<Blob> {
        let bytes = elf.clone();
        let elf: &[u8] = &bytes;
        let file = object::File::parse(elf).map_err(|e| Error::Blob(e.to_string()))?;
        let mut symbols = BTreeMap::new();
        let mut absolute = std::collections::BTreeSet::new();
        for s in file.symbols() {
            if let Ok(name) = s.name()
                && let Some(short) = name.strip_prefix(SYMBOL_PREFIX)
                && !s.is_undefined()
            {
                if s.section() == object::SymbolSection::Absolute {
                    absolute.insert(short.to_string());
                }
                symbols.insert(short.to_string(), s.address());
            }
        }
        let relocs = file
            .section_by_name(hyprel::RELOC_SECTION)
            .and_then(|s| s.data().ok())
            .and_then(hyprel::decode)
            .ok_or_else(|| Error::Blob(format!("no valid {} section", hyprel::RELOC_SECTION)))?;
        let sym = |n: &str| {
            symbols
                .get(n)
                .copied()
                .ok_or_else(|| Error::Blob(format!("symbol {SYMBOL_PREFIX}{n} is missing")))
        };
        let size = sym("hyp_end")?;
        let (sections, names) = (Sections::new(&file)?, RoutineNames::new(&symbols));
        let table = |start: &str, end: &str| read_table(&sections, &names, sym(start)?, sym(end)?);
        let aliases = table("alias_table_start", "alias_table_end")?;
        let selftests = table("selftest_table_start", "selftest_table_end")?;
        let sections_by_perm = permissions(&file, size)?;
        let rings = read_rings(
            &sections,
            sym("hyp_rings_start")?,
            sym("hyp_rings_end")?,
            sections_by_perm.text_end,
        )?;
        Ok(Blob {
            config,
            symbols,
            absolute,
            aliases,
            selftests,
            relocs,
            rings,
            size,
            sections: sections_by_perm,
            elf: bytes,
            image,
        })
    }

    pub fn symbol(&self, name: &str) -> Result<u64> {
        self.symbols
            .get(name)
            .copied()
            .ok_or_else(|| Error::Blob(format!("symbol {SYMBOL_PREFIX}{name} is missing")))
    }

    pub fn alias_index(&self, name: &str) -> Option<u64> {
        self.aliases
            .iter()
            .position(|r| r.name == name)
            .map(|i| i as u64)
    }

    /// The row of selftest (or hostile) routine `name` in the selftest
    /// table.
    pub fn selftest_index(&self, name: &str) -> Result<u64> {
        self.selftests
            .iter()
            .position(|r| r.name == name)
            .map(|i| i as u64)
            .ok_or_else(|| Error::Blob(format!("the blob has no selftest routine `{name}`")))
    }

    /// Load at guest-physical `base` (page aligned), apply `.hyp.reloc` for
    /// the guest-virtual address the guest runs it at (`arch::guest_va`),
    /// return its entry points there.
    pub fn load(&self, ram: &impl RamAccess, base: u64) -> Result<Loaded> {
        if !base.is_multiple_of(hypclear_abi::PAGE_SIZE) {
            return Err(Error::Load(format!(
                "load address {base:#x} is not page aligned"
            )));
        }
        crate::arch::load_image(
            ram,
            &crate::arch::BlobImage {
                elf: &self.elf,
                flat: self.image.as_deref(),
                size: self.size,
            },
            base,
        )?;
        let va = crate::arch::guest_va(base);
        for off in &self.relocs {
            let at = base + u64::from(*off);
            let bad = |e: vm_memory::GuestMemoryError| Error::GuestMemory {
                gpa: at,
                len: 8,
                detail: e.to_string(),
            };
            let v: u64 = ram.mem().read_obj(GuestAddress(at)).map_err(bad)?;
            ram.mem()
                .write_obj(v.wrapping_add(va), GuestAddress(at))
                .map_err(bad)?;
        }
        let hyp = match (
            self.symbols.get("hyp_el2_init"),
            self.symbols.get("hyp_el2_vectors"),
        ) {
            (Some(e), Some(v)) => Some(crate::arch::HypEntry {
                entry: va + e,
                vectors: va + v,
            }),
            _ => None,
        };
        Ok(Loaded {
            base,
            va,
            entry: va + self.symbol("hyp_entry")?,
            vectors: va + self.symbol("hyp_vectors")?,
            sections: self.sections,
            hyp,
        })
    }
}

/// The `{ u64 routine, u64 name }` rows from link-time address `start` to
/// `end`, each with the name of the routine it reaches.
fn read_table(
    sections: &Sections,
    names: &RoutineNames,
    start: u64,
    end: u64,
) -> Result<Vec<TableRow>> {
    let read_u64 = |addr: u64| -> Result<u64> {
        let b = sections.read(addr, 8)?;
        <[u8; 8]>::try_from(b)
            .map(u64::from_le_bytes)
            .map_err(|_| Error::Blob(format!("table entry at {addr:#x} runs past its section")))
    };
    let mut rows = Vec::new();
    let mut at = start;
    while at + ROW_SIZE <= end {
        let fun = read_u64(at)?;
        let name_bytes = sections.read(read_u64(at + 8)?, 64)?;
        let len = name_bytes
            .iter()
            .position(|&c| c == 0)
            .unwrap_or(name_bytes.len());
        rows.push(TableRow {
            name: String::from_utf8_lossy(&name_bytes[..len]).into_owned(),
            target: names.name(fun),
            offset: fun,
        });
        at += ROW_SIZE;
    }
    Ok(rows)
}

/// The ring sites of `.rodata.hyp_rings` from `start` to `end`: each entry
/// an `i32` offset from itself to the site, which must lie in the text
/// (below `text_end`). A blob without any cannot ring and is refused.
fn read_rings(sections: &Sections, start: u64, end: u64, text_end: u64) -> Result<Vec<u64>> {
    let mut rings = Vec::new();
    let mut at = start;
    while at.saturating_add(4) <= end {
        let b = sections.read(at, 4)?;
        let rel = <[u8; 4]>::try_from(b)
            .map(i32::from_le_bytes)
            .map_err(|_| Error::Blob(format!("ring entry at {at:#x} runs past its section")))?;
        let site = at.wrapping_add_signed(i64::from(rel));
        if site >= text_end {
            return Err(Error::Blob(format!(
                "ring entry at {at:#x} names {site:#x}, outside the text (below {text_end:#x})"
            )));
        }
        rings.push(site);
        at += 4;
    }
    if rings.is_empty() {
        return Err(Error::Blob(
            "the blob lists no doorbell ring sites (.rodata.hyp_rings): \
             is its entry.S built with ring.h's RING?"
                .into(),
        ));
    }
    Ok(rings)
}

/// The symbols of each link-time address, in name order (built once: the
/// tables name every routine they reach).
struct RoutineNames<'a>(BTreeMap<u64, Vec<&'a str>>);

impl<'a> RoutineNames<'a> {
    fn new(symbols: &'a BTreeMap<String, u64>) -> Self {
        let mut by_addr: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
        for (n, a) in symbols {
            by_addr.entry(*a).or_default().push(n);
        }
        RoutineNames(by_addr)
    }

    /// The routine at link-time address `fun`: its `__pi_`/`selftest_`/
    /// `hostile_` name, else (a kernel blob) the kernel's own name, else
    /// the address.
    fn name(&self, fun: u64) -> String {
        let names = self.0.get(&fun).map_or(&[][..], |v| v.as_slice());
        names
            .iter()
            .find(|n| {
                n.starts_with("__pi_") || n.starts_with("selftest_") || n.starts_with("hostile_")
            })
            .or_else(|| names.iter().find(|n| !n.contains("_kernel")))
            .map_or_else(|| format!("{fun:#x}"), |n| n.to_string())
    }
}

/// The initialized sections' bytes by link-time address (collected once:
/// the tables are read eight bytes at a time).
/// The blob's pages by permission, from its sections' flags: text ends
/// at the page after the last executable section, data starts at the page
/// of the first writable one. A blob whose text and data share a page (or
/// interleave) cannot be mapped W^X and is refused.
fn permissions(file: &object::File<'_>, size: u64) -> Result<crate::arch::BlobSections> {
    let page = hypclear_abi::PAGE_SIZE;
    let (mut text_end, mut data_start) = (0u64, size.next_multiple_of(page));
    use object::SectionKind as K;
    for s in file.sections().filter(|s| s.size() > 0) {
        match s.kind() {
            K::Text => text_end = text_end.max(s.address().saturating_add(s.size())),
            K::Data | K::UninitializedData | K::Tls | K::UninitializedTls => {
                data_start = data_start.min(s.address() / page * page);
            }
            _ => {}
        }
    }
    let text_end = text_end.next_multiple_of(page);
    if text_end > data_start {
        return Err(Error::Blob(format!(
            "text up to {text_end:#x} and writable data from {data_start:#x} share pages: \
             the blob cannot be mapped W^X (is it linked with hyp.lds.S?)"
        )));
    }
    Ok(crate::arch::BlobSections {
        text_end,
        data_start,
        end: size.next_multiple_of(page),
    })
}

struct Sections<'a>(Vec<(u64, &'a [u8])>);

impl<'a> Sections<'a> {
    fn new(file: &object::File<'a>) -> Result<Self> {
        let mut v = Vec::new();
        for s in file.sections() {
            if s.kind() != object::SectionKind::UninitializedData && s.size() > 0 {
                v.push((
                    s.address(),
                    s.data().map_err(|e| Error::Blob(e.to_string()))?,
                ));
            }
        }
        Ok(Sections(v))
    }

    /// Up to `len` bytes at link-time address `addr` (fewer at the end of
    /// the section that holds them).
    fn read(&self, addr: u64, len: u64) -> Result<&'a [u8]> {
        for &(a, data) in &self.0 {
            if addr >= a && addr - a < data.len() as u64 {
                let from = (addr - a) as usize;
                let to = from.saturating_add(len as usize).min(data.len());
                return Ok(&data[from..to]);
            }
        }
        Err(Error::Blob(format!(
            "address {addr:#x} is in no section of the blob"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Text, read-only data and writable data on pages of their own, the
    /// entry in the text and the tables (relocated at load) in the data.
    #[test]
    fn the_blob_splits_into_w_xor_x_pages() {
        for config in [LinkConfig::Vanilla, LinkConfig::Memset] {
            let b = Blob::get(config).unwrap();
            let s = b.sections;
            assert!(
                s.text_end > 0 && s.text_end <= s.data_start && s.data_start < s.end,
                "{s:?}"
            );
            assert!(s.text_end.is_multiple_of(4096) && s.data_start.is_multiple_of(4096));
            assert!(b.symbol("hyp_entry").unwrap() < s.text_end);
            assert!(b.symbol("alias_table_start").unwrap() >= s.data_start);
            // Every hypercall the harness rings is a listed site in its text.
            assert!(b.rings.len() >= 5, "{:?}", b.rings);
            assert!(b.rings.iter().all(|r| *r < s.text_end), "{:?}", b.rings);
            for off in &b.relocs {
                assert!(
                    u64::from(*off) >= s.data_start,
                    "a relocation in the text at {off:#x}"
                );
            }
        }
    }

    #[test]
    fn vanilla_has_clear_page_aliases_and_memset_has_none() {
        let v = Blob::get(LinkConfig::Vanilla).unwrap();
        let m = Blob::get(LinkConfig::Memset).unwrap();
        assert!(v.aliases.iter().any(|r| r.name.starts_with("clear_page")));
        assert!(!m.aliases.iter().any(|r| r.name.starts_with("clear_page")));
        assert!(!m.symbols.keys().any(|s| s.contains("clear_page")));
        for b in [&v, &m] {
            for r in &b.aliases {
                assert_eq!(r.target, format!("__pi_{}", r.name), "alias {r:?}");
            }
            for r in &b.selftests {
                assert!(
                    r.target.starts_with("selftest_") || r.target.starts_with("hostile_"),
                    "{r:?}"
                );
                assert!(!b.aliases.iter().any(|a| a.offset == r.offset));
            }
            // Every table row holds two absolute words, both relocated.
            assert_eq!(b.relocs.len(), 2 * (b.aliases.len() + b.selftests.len()));
        }
    }

    #[test]
    fn pi_routines_have_no_relocations_and_all_symbols_are_prefixed() {
        let elf = LinkConfig::Vanilla.elf();
        let file = object::File::parse(elf).unwrap();
        for s in file.symbols() {
            let n = s.name().unwrap();
            if !n.is_empty()
                && s.kind() != object::SymbolKind::Section
                && s.kind() != object::SymbolKind::File
            {
                assert!(n.starts_with(SYMBOL_PREFIX), "unprefixed symbol {n}");
            }
        }
        assert!(hyprel::police(elf).is_ok());
    }
}

/// The arm64 flat images and their loading (the arch contract's loader and
/// page tables, with the VMM's own guest RAM).
#[cfg(all(test, target_arch = "aarch64"))]
mod aarch64_tests {
    use super::*;
    use crate::arch::aarch64::layout::{PAGE_TABLES_END, PAGE_TABLES_GPA};
    use crate::arch::{BLOB_WINDOW, LOAD_ALIGN, MIN_RAM, RAM_BASE, prepare_memory};
    use crate::memory::{Backing, GuestRam};

    fn le64(b: &[u8], off: usize) -> u64 {
        u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
    }

    /// The flat images carry a valid arm64 Image header.
    #[test]
    fn images_have_an_arm64_image_header() {
        for (config, image) in [
            (LinkConfig::Vanilla, hypclear_guest::VANILLA_BIN),
            (LinkConfig::Memset, hypclear_guest::MEMSET_BIN),
        ] {
            let blob = Blob::get(config).unwrap();
            assert_eq!(&image[0x38..0x3c], b"ARM\x64", "{config}");
            assert_eq!(le64(image, 0x08), 0, "text_offset");
            assert_eq!(le64(image, 0x10), blob.size, "image_size = hyp_end");
            assert_eq!(le64(image, 0x18), 0xa, "flags: LE, 4K pages, anywhere");
            // code0 is "b hyp_entry".
            let code0 = u32::from_le_bytes(image[0..4].try_into().unwrap());
            assert_eq!(code0 >> 26, 0b000101, "code0 {code0:#x} is not a B");
            assert_eq!(
                u64::from(code0 & 0x03ff_ffff) * 4,
                blob.symbol("hyp_entry").unwrap()
            );
            assert!(blob.symbol("hyp_vectors").unwrap().is_multiple_of(2048));
            assert!(image.len() as u64 <= blob.size);
        }
    }

    /// linux-loader's PE loader takes the image at a 2 MiB boundary of the
    /// blob window, the relocated tables point into the blob, and both sets
    /// of page tables fit.
    #[test]
    fn blob_loads_in_the_window_and_tables_are_written() {
        let ram = GuestRam::new(RAM_BASE, MIN_RAM, Backing::Anon, false).unwrap();
        for config in [LinkConfig::Vanilla, LinkConfig::Memset] {
            let blob = Blob::get(config).unwrap();
            let base = BLOB_WINDOW + LOAD_ALIGN;
            let loaded = blob.load(&ram, base).unwrap();
            let va = crate::arch::guest_va(base);
            assert_eq!(loaded.va, va);
            assert_eq!(loaded.entry, va + blob.symbol("hyp_entry").unwrap());
            let start = base + blob.symbol("alias_table_start").unwrap();
            for (i, row) in blob.aliases.iter().enumerate() {
                let f = ram.read_u64(start + 16 * i as u64).unwrap();
                assert_eq!(f, va + row.offset, "{}", row.name);
            }
            let mem = prepare_memory(&ram, 2, &[loaded]).unwrap();
            assert_eq!(mem.kernel_root, PAGE_TABLES_GPA);
            assert!(mem.user_root > mem.kernel_root && mem.user_root < PAGE_TABLES_END);
            // The L0 entry for RAM is a table descriptor in both sets.
            for root in [mem.kernel_root, mem.user_root] {
                assert_eq!(ram.read_u64(root).unwrap() & 3, 3);
            }
        }
        // A base off the 2 MiB grid is refused by the Image loader.
        let blob = Blob::get(LinkConfig::Vanilla).unwrap();
        assert!(blob.load(&ram, BLOB_WINDOW + 0x1000).is_err());
    }
}
