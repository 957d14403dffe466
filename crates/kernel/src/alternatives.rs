//! The kernel's alternatives (`.altinstructions`) and x86 return thunks,
//! applied the way the host kernel patched its own copy of the routines.
//!
//! Design: the alternatives are applied to an *image* in which every
//! section has an address and every PC-relative field holds its resolved
//! value, exactly as the kernel patches its linked image. The blob is
//! linked at address 0 with `--emit-relocs`, so its ELF is such an image
//! (section `sh_addr`s, relocations kept only to say *where* PC-relative
//! fields are); [`Image::from_elf`] also accepts a relocatable object, laying
//! its sections out at their file offsets and resolving the PC-relative
//! relocations between defined symbols, so single kbuild objects can be
//! listed and crafted objects tested. Working on the linked image means the
//! table and the patching survive into a blob file unchanged and are done
//! at load time on the machine that runs the guest, as the kernel does at
//! boot.
use object::read::elf::{ElfFile64, FileHeader};
use object::{Object, ObjectSection, ObjectSymbol, RelocationFlags, RelocationTarget, SymbolKind};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum AltError {
    #[error("cannot parse the ELF object: {0}")]
    Parse(String),
    #[error("{section} is malformed: {why}")]
    Malformed { section: String, why: String },
    #[error("cannot read {path}: {source}")]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("alternative at {addr:#x}: {why}")]
    Apply { addr: u64, why: String },
    #[error(
        "unknown feature `{0}` in --alternatives; use host, guest, none or a comma-separated list \
         of features such as erms,fsrm,rep_good or mops"
    )]
    UnknownFeature(String),
    #[error(
        "{family}: {count} features decide its alternatives, more than the {max} whose \
         combinations are tried; verify it with an explicit --alternatives"
    )]
    TooManyFeatures {
        family: crate::arch::Family,
        count: usize,
        max: usize,
    },
}

/// The `struct alt_instr` layouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// x86 up to 6.2: s32, s32, u16 cpuid (bit 15: inverted), u8, u8.
    X86Cpuid16,
    /// x86 from 6.3 (6.12): s32, s32, u32 ft_flags (cpuid:16, flags:16;
    /// flag 1 = NOT, 2 = DIRECT_CALL), u8, u8.
    X86FtFlags,
    /// arm64: s32 orig, s32 alt (or callback), u16 cpucap (bit 15:
    /// callback), u8 orig_len, u8 alt_len.
    Arm64,
}

impl Layout {
    pub fn entry_size(self) -> usize {
        match self {
            Layout::X86FtFlags => 14,
            Layout::X86Cpuid16 | Layout::Arm64 => 12,
        }
    }
}

/// The names of feature numbers, parsed from the tree.
#[derive(Debug, Clone, Default)]
pub struct FeatureNames {
    /// number -> lowercase name (`erms`, `has_mops`, ...).
    pub names: BTreeMap<u16, String>,
}

impl FeatureNames {
    /// x86: `#define X86_FEATURE_ERMS ( 9*32+ 9)` lines of
    /// arch/x86/include/asm/cpufeatures.h.
    pub fn parse_x86(header: &str) -> FeatureNames {
        let mut names = BTreeMap::new();
        for line in header.lines() {
            let Some(rest) = line.trim().strip_prefix("#define X86_FEATURE_") else {
                continue;
            };
            let mut it = rest.splitn(2, |c: char| c.is_whitespace());
            let (Some(name), Some(value)) = (it.next(), it.next()) else {
                continue;
            };
            let value: String = value
                .split("/*")
                .next()
                .unwrap_or("")
                .chars()
                .filter(|c| !c.is_whitespace())
                .collect();
            let Some(inner) = value.strip_prefix('(').and_then(|v| v.strip_suffix(')')) else {
                continue;
            };
            let Some((word, bit)) = inner.split_once("*32+") else {
                continue;
            };
            if let (Ok(w), Ok(b)) = (word.parse::<u16>(), bit.parse::<u16>()) {
                names.insert(w * 32 + b, name.to_ascii_lowercase());
            }
        }
        FeatureNames { names }
    }

    /// arm64: `#define ARM64_HAS_MOPS 38` lines of the generated
    /// arch/arm64/include/generated/asm/cpucap-defs.h (cpucaps.h in older
    /// trees) in the build directory.
    pub fn parse_arm64(header: &str) -> FeatureNames {
        let mut names = BTreeMap::new();
        for line in header.lines() {
            let Some(rest) = line.trim().strip_prefix("#define ARM64_") else {
                continue;
            };
            let mut it = rest.split_whitespace();
            if let (Some(name), Some(Ok(n))) = (it.next(), it.next().map(str::parse::<u16>))
                && name != "NCAPS"
            {
                names.insert(n, name.to_ascii_lowercase());
            }
        }
        FeatureNames { names }
    }

    pub fn name(&self, n: u16) -> String {
        self.names
            .get(&n)
            .cloned()
            .unwrap_or_else(|| format!("feature#{n}"))
    }

    pub fn number(&self, name: &str) -> Option<u16> {
        self.names
            .iter()
            .find(|(_, v)| v.as_str() == name)
            .map(|(k, _)| *k)
    }
}

/// One `.altinstructions` entry, with image addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AltSite {
    pub orig: u64,
    pub repl: u64,
    pub orig_len: u8,
    pub repl_len: u8,
    pub feature: u16,
    /// Replacement taken when the feature is *absent* (ALT_NOT).
    pub invert: bool,
    /// arm64 callback alternative or x86 direct call: needs kernel code,
    /// never applied here.
    pub callback: bool,
}

/// A PC-relative field of the image (from relocations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcField {
    pub addr: u64,
    pub r_type: u32,
}

/// An ELF laid out as an image, with what patching needs.
#[derive(Debug, Clone)]
pub struct Image {
    pub machine: object::elf::Machine,
    /// The image bytes; `bytes[0]` is address `base`.
    pub bytes: Vec<u8>,
    pub base: u64,
    pub sites: Vec<AltSite>,
    /// x86 return sites (`.return_sites` or jumps to `__x86_return_thunk`).
    pub return_sites: Vec<u64>,
    /// PC-relative fields (x86 PC32/PLT32), by address.
    pub pc_fields: Vec<PcField>,
    /// Function symbols, by address.
    pub functions: Vec<Function>,
}

/// A function symbol of the image.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Function {
    pub addr: u64,
    pub size: u64,
    pub name: String,
}

/// Where one relocation applies.
struct RelocAt {
    place: u64,
    r_type: object::elf::RelocationType,
    addend: i64,
    /// In `.altinstructions` or `.return_sites`.
    in_table: bool,
}

fn malformed(section: &str, why: impl Into<String>) -> AltError {
    AltError::Malformed {
        section: section.into(),
        why: why.into(),
    }
}

fn le32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

type Elf<'a> = ElfFile64<'a, object::Endianness>;
type ElfSection<'a, 'f> = object::read::elf::ElfSection64<'a, 'f, object::Endianness>;

/// Where an ELF's sections lie in its image.
struct SectionLayout {
    /// A relocatable object: sections at their file offsets.
    relocatable: bool,
    /// Section index -> image address.
    addr: BTreeMap<usize, u64>,
    /// The allocated sections span `lo..hi`.
    lo: u64,
    hi: u64,
}

/// What a relocation points at.
struct RelocTarget {
    addr: u64,
    name: String,
    /// Defined in this ELF (else an undefined symbol, address 0).
    defined: bool,
}

fn is_alloc(s: &ElfSection) -> bool {
    matches!(s.flags(), object::SectionFlags::Elf { sh_flags, .. } if sh_flags.0 & object::elf::SHF_ALLOC.0 != 0)
}

impl SectionLayout {
    /// Section addresses: sh_addr when linked, the file offset otherwise.
    fn of(file: &Elf) -> Result<SectionLayout, AltError> {
        let endian = file.endian();
        let relocatable = file.elf_header().e_type(endian) == object::elf::ET_REL;
        let mut addr: BTreeMap<usize, u64> = BTreeMap::new();
        let (mut lo, mut hi) = (u64::MAX, 0u64);
        for s in file.sections() {
            let a = if relocatable {
                s.elf_section_header().sh_offset.get(endian)
            } else {
                s.address()
            };
            addr.insert(s.index().0, a);
            if is_alloc(&s) && s.size() > 0 {
                lo = lo.min(a);
                hi = hi.max(a + s.size());
            }
        }
        if lo > hi {
            return Err(AltError::Parse("no allocated sections".into()));
        }
        Ok(SectionLayout {
            relocatable,
            addr,
            lo,
            hi,
        })
    }

    fn section(&self, s: &ElfSection) -> u64 {
        self.addr[&s.index().0]
    }

    /// The image bytes `lo..hi`: every loaded section's contents.
    fn bytes(&self, file: &Elf) -> Result<Vec<u8>, AltError> {
        let len = usize::try_from(self.hi - self.lo).map_err(|e| AltError::Parse(e.to_string()))?;
        let mut bytes = vec![0u8; len];
        for s in file.sections() {
            let a = self.section(&s);
            // Only what is loaded: a linked ELF's other sections have address 0.
            if !is_alloc(&s) || a < self.lo || s.kind() == object::SectionKind::UninitializedData {
                continue;
            }
            if let Ok(d) = s.data()
                && !d.is_empty()
                && a + d.len() as u64 <= self.hi
            {
                let off = (a - self.lo) as usize;
                bytes[off..off + d.len()].copy_from_slice(d);
            }
        }
        Ok(bytes)
    }

    /// The function symbols, sorted by address.
    fn functions(&self, file: &Elf) -> Vec<Function> {
        let mut out = Vec::new();
        for sym in file.symbols() {
            if sym.kind() == SymbolKind::Text
                && let Some(si) = sym.section_index()
                && let Ok(name) = sym.name()
            {
                let addr = if self.relocatable {
                    self.addr[&si.0] + sym.address()
                } else {
                    sym.address()
                };
                out.push(Function {
                    addr,
                    size: sym.size(),
                    name: name.to_string(),
                });
            }
        }
        out.sort();
        out
    }

    fn target(&self, file: &Elf, t: RelocationTarget) -> Option<RelocTarget> {
        match t {
            RelocationTarget::Symbol(idx) => {
                let sym = file.symbol_by_index(idx).ok()?;
                let name = sym.name().unwrap_or("").to_string();
                let (addr, defined) = match sym.section_index() {
                    Some(si) if self.relocatable => (self.addr.get(&si.0)? + sym.address(), true),
                    Some(_) => (sym.address(), true),
                    None => (0, false),
                };
                Some(RelocTarget {
                    addr,
                    name,
                    defined,
                })
            }
            RelocationTarget::Section(i) => self.addr.get(&i.0).map(|a| RelocTarget {
                addr: *a,
                name: String::new(),
                defined: true,
            }),
            _ => None,
        }
    }
}

/// Whether `r_type` is a PC-relative 32-bit field on `machine`.
fn is_pc32(machine: object::elf::Machine, r_type: object::elf::RelocationType) -> bool {
    match machine {
        object::elf::EM_X86_64 => matches!(
            r_type,
            object::elf::R_X86_64_PC32 | object::elf::R_X86_64_PLT32
        ),
        object::elf::EM_AARCH64 => r_type == object::elf::R_AARCH64_PREL32,
        _ => false,
    }
}

/// Whether section `name` is one of the tables read here (their fields are
/// not code to move).
fn is_table(name: &str) -> bool {
    name == ".altinstructions" || name == ".return_sites"
}

impl Image {
    /// Lay out `elf` (a linked image or a relocatable object) and parse its
    /// alternatives with `layout` (`None`: infer the x86 layout from the
    /// relocation stride or the section size).
    pub fn from_elf(elf: &[u8], layout: Option<Layout>) -> Result<Image, AltError> {
        let file = Elf::parse(elf).map_err(|e| AltError::Parse(e.to_string()))?;
        let sections = SectionLayout::of(&file)?;
        let mut image = Image {
            machine: file.elf_header().e_machine(file.endian()),
            bytes: sections.bytes(&file)?,
            base: sections.lo,
            sites: Vec::new(),
            return_sites: Vec::new(),
            pc_fields: Vec::new(),
            functions: sections.functions(&file),
        };
        let table_relocs = image.relocate(&file, &sections);
        if let Some(sec) = file.section_by_name(".altinstructions") {
            image.read_altinstructions(&sec, &sections, layout, &table_relocs)?;
        }
        if let Some(sec) = file.section_by_name(".return_sites") {
            image.read_return_sites(&sec, &sections, &table_relocs)?;
        }
        image.return_sites.sort_unstable();
        image.return_sites.dedup();
        Ok(image)
    }

    /// Relocations: resolve PC-relative ones in a relocatable object,
    /// remember PC-relative fields and return-thunk jumps. Returns the
    /// tables' resolved fields (field address -> target).
    fn relocate(&mut self, file: &Elf, sections: &SectionLayout) -> BTreeMap<u64, u64> {
        let mut table_relocs = BTreeMap::new();
        for s in file.sections() {
            if !is_alloc(&s) {
                continue; // debug info
            }
            let base = sections.section(&s);
            let sname = s.name().unwrap_or("").to_string();
            for (off, r) in s.relocations() {
                let RelocationFlags::Elf { r_type } = r.flags() else {
                    continue;
                };
                let place = if sections.relocatable {
                    base + off
                } else {
                    off
                };
                let Some(target) = sections.target(file, r.target()) else {
                    continue;
                };
                let at = RelocAt {
                    place,
                    r_type,
                    addend: r.addend(),
                    in_table: is_table(&sname),
                };
                if let Some(field) = self.relocate_one(&at, &target, sections.relocatable) {
                    table_relocs.insert(place, field);
                }
            }
        }
        table_relocs
    }

    /// One relocation at `at` to `target`; a table field's target if it is one.
    fn relocate_one(
        &mut self,
        at: &RelocAt,
        target: &RelocTarget,
        relocatable: bool,
    ) -> Option<u64> {
        let x86 = self.machine == object::elf::EM_X86_64;
        if x86 && target.name.ends_with("__x86_return_thunk") && at.place >= 1 {
            self.return_sites.push(at.place - 1);
        }
        if !is_pc32(self.machine, at.r_type) {
            return None;
        }
        if x86 && !at.in_table {
            self.pc_fields.push(PcField {
                addr: at.place,
                r_type: at.r_type.0,
            });
        }
        if !target.defined {
            return None;
        }
        let value = target
            .addr
            .wrapping_add(at.addend as u64)
            .wrapping_sub(at.place);
        if relocatable {
            self.write32(at.place, value as u32);
        }
        at.in_table
            .then(|| target.addr.wrapping_add(at.addend as u64))
    }

    /// The bytes of table section `sec`, from the image (its PC-relative
    /// fields are resolved).
    fn table_bytes(&self, sec: &ElfSection, a: u64, what: &str) -> Result<Vec<u8>, AltError> {
        let i = self
            .idx(a, sec.size() as usize)
            .ok_or_else(|| malformed(what, "outside the image"))?;
        Ok(self.bytes[i..i + sec.size() as usize].to_vec())
    }

    fn read_altinstructions(
        &mut self,
        sec: &ElfSection,
        sections: &SectionLayout,
        layout: Option<Layout>,
        table_relocs: &BTreeMap<u64, u64>,
    ) -> Result<(), AltError> {
        let a = sections.section(sec);
        let data = self.table_bytes(sec, a, ".altinstructions")?;
        let layout = match layout {
            Some(l) => l,
            None if self.machine == object::elf::EM_AARCH64 => Layout::Arm64,
            // (A table's fields lie inside it; wrapping as in release builds.)
            None => infer_x86_layout(data.len(), table_relocs.keys().map(|k| k.wrapping_sub(a))),
        };
        self.sites = parse_entries(&data, a, layout)?;
        Ok(())
    }

    fn read_return_sites(
        &mut self,
        sec: &ElfSection,
        sections: &SectionLayout,
        table_relocs: &BTreeMap<u64, u64>,
    ) -> Result<(), AltError> {
        let a = sections.section(sec);
        let data = self.table_bytes(sec, a, ".return_sites")?;
        for i in (0..data.len()).step_by(4) {
            let v = le32(&data, i)
                .ok_or_else(|| malformed(".return_sites", "size not a multiple of 4"))?;
            let place = a + i as u64;
            let site = table_relocs
                .get(&place)
                .copied()
                .unwrap_or_else(|| place.wrapping_add(v as i32 as i64 as u64));
            self.return_sites.push(site);
        }
        Ok(())
    }

    fn idx(&self, addr: u64, len: usize) -> Option<usize> {
        let off = usize::try_from(addr.checked_sub(self.base)?).ok()?;
        (off + len <= self.bytes.len()).then_some(off)
    }

    fn read32(&self, addr: u64) -> Option<u32> {
        le32(&self.bytes, self.idx(addr, 4)?)
    }

    fn write32(&mut self, addr: u64, v: u32) -> bool {
        match self.idx(addr, 4) {
            Some(i) => {
                self.bytes[i..i + 4].copy_from_slice(&v.to_le_bytes());
                true
            }
            None => false,
        }
    }

    /// Drop a namespace prefix (the blob's `objcopy --prefix-symbols`)
    /// from the function names used in reports.
    pub fn strip_symbol_prefix(&mut self, prefix: &str) {
        for f in &mut self.functions {
            if let Some(rest) = f.name.strip_prefix(prefix) {
                f.name = rest.to_string();
            }
        }
    }

    /// The function containing `addr`, preferring non-underscore names.
    pub fn function_at(&self, addr: u64) -> Option<&str> {
        let mut best: Option<&Function> = None;
        for f in &self.functions {
            if f.addr <= addr && addr < f.addr + f.size.max(1) {
                let better = match best {
                    None => true,
                    Some(b) => b.name.starts_with('_') && !f.name.starts_with('_'),
                };
                if better {
                    best = Some(f);
                }
            }
        }
        best.map(|f| f.name.as_str())
    }

    fn function_named_at(&self, addr: u64) -> Option<&str> {
        self.functions
            .iter()
            .find(|f| f.addr == addr)
            .map(|f| f.name.as_str())
    }
}

/// x86 entries are 12 (before 6.3) or 14 bytes: the stride of the
/// relocated `instr_offset` fields says which, else the section size.
pub(crate) fn infer_x86_layout(size: usize, reloc_offsets: impl Iterator<Item = u64>) -> Layout {
    let offs: BTreeSet<u64> = reloc_offsets.collect();
    if offs.contains(&14) && offs.contains(&18) {
        return Layout::X86FtFlags;
    }
    if offs.contains(&12) && offs.contains(&16) {
        return Layout::X86Cpuid16;
    }
    if size.is_multiple_of(14) && !size.is_multiple_of(12) {
        Layout::X86FtFlags
    } else {
        Layout::X86Cpuid16
    }
}

fn parse_entries(data: &[u8], base: u64, layout: Layout) -> Result<Vec<AltSite>, AltError> {
    let n = layout.entry_size();
    if !data.len().is_multiple_of(n) {
        return Err(malformed(
            ".altinstructions",
            format!(
                "size {} is not a multiple of the {n}-byte entry ({layout:?})",
                data.len()
            ),
        ));
    }
    let mut out = Vec::new();
    for (i, e) in data.chunks_exact(n).enumerate() {
        let at = base + (i * n) as u64;
        let rel = |o: usize| {
            at.wrapping_add(o as u64).wrapping_add(i32::from_le_bytes([
                e[o],
                e[o + 1],
                e[o + 2],
                e[o + 3],
            ]) as i64 as u64)
        };
        let (feature, invert, callback, lens) = match layout {
            Layout::X86Cpuid16 => {
                let c = u16::from_le_bytes([e[8], e[9]]);
                (c & 0x7fff, c & 0x8000 != 0, false, 10)
            }
            Layout::X86FtFlags => {
                let c = u16::from_le_bytes([e[8], e[9]]);
                let flags = u16::from_le_bytes([e[10], e[11]]);
                (c, flags & 1 != 0, flags & 2 != 0, 12)
            }
            Layout::Arm64 => {
                let c = u16::from_le_bytes([e[8], e[9]]);
                (c & 0x7fff, false, c & 0x8000 != 0, 10)
            }
        };
        out.push(AltSite {
            orig: rel(0),
            repl: rel(4),
            orig_len: e[lens],
            repl_len: e[lens + 1],
            feature,
            invert,
            callback,
        });
    }
    Ok(out)
}

/// The features the host kernel decided for the routines' alternatives:
/// x86 from /proc/cpuinfo (where Linux reports its own rep_good decision)
/// plus CPUID for FSRS, which 6.12 does not list; arm64 MOPS from HWCAP2.
/// Returns lowercase names as in [`FeatureNames`].
pub fn host_features(machine: object::elf::Machine) -> BTreeSet<String> {
    let mut set = BTreeSet::new();
    set.insert("always".to_string());
    match machine {
        object::elf::EM_X86_64 => {
            if let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") {
                set.extend(cpuinfo_flags(&info));
            }
            #[cfg(target_arch = "x86_64")]
            {
                let max = core::arch::x86_64::__cpuid(0).eax;
                if max >= 7 {
                    let l = core::arch::x86_64::__cpuid_count(7, 1);
                    if l.eax & (1 << 11) != 0 {
                        set.insert("fsrs".into());
                    }
                }
            }
        }
        object::elf::EM_AARCH64 => {
            #[cfg(target_arch = "aarch64")]
            {
                // SAFETY: getauxval has no preconditions.
                let hwcap2 = unsafe { libc::getauxval(libc::AT_HWCAP2) };
                if hwcap2 & (1 << 43) != 0 {
                    set.insert("has_mops".into());
                }
            }
            // has_no_hw_prefetch: no current arm64 CPU needs it.
        }
        _ => {}
    }
    set
}

/// The `flags` line of the first processor in /proc/cpuinfo.
pub(crate) fn cpuinfo_flags(cpuinfo: &str) -> BTreeSet<String> {
    cpuinfo
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == "flags").then(|| v.split_whitespace().map(str::to_string).collect())
        })
        .unwrap_or_default()
}

/// What happened at one site.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Applied {
    /// The routine containing the site.
    pub routine: String,
    /// The site's address (ALTERNATIVE_2's entries share it).
    pub site: u64,
    pub feature: String,
    pub taken: bool,
    /// The function the site jumps to or calls as this load leaves it
    /// (`memset_orig`), `None` where it runs inline code.
    pub target: Option<String>,
    /// Human-readable: "memset: FSRS alternative" / "memset: fallback memset_orig (no FSRS)".
    pub summary: String,
}

impl fmt::Display for Applied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.summary)
    }
}

const X86_NOPS: [&[u8]; 9] = [
    &[],
    &[0x90],
    &[0x66, 0x90],
    &[0x0f, 0x1f, 0x00],
    &[0x0f, 0x1f, 0x40, 0x00],
    &[0x0f, 0x1f, 0x44, 0x00, 0x00],
    &[0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00],
    &[0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00],
    &[0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00],
];

fn x86_nop_fill(buf: &mut [u8]) {
    let mut i = 0;
    while i < buf.len() {
        let n = (buf.len() - i).min(8);
        buf[i..i + n].copy_from_slice(X86_NOPS[n]);
        i += n;
    }
}

impl Image {
    /// Patch x86 return sites to `ret; int3` (int3 padding), as the kernel
    /// does without return thunks. Returns how many were patched.
    pub fn patch_returns(&mut self) -> Result<usize, AltError> {
        let mut n = 0;
        for site in self.return_sites.clone() {
            let i = self.idx(site, 5).ok_or(AltError::Apply {
                addr: site,
                why: "return site outside the image".into(),
            })?;
            if self.bytes[i] != 0xe9 {
                return Err(AltError::Apply {
                    addr: site,
                    why: format!(
                        "return site is not a jmp rel32 (opcode {:#04x})",
                        self.bytes[i]
                    ),
                });
            }
            self.bytes[i..i + 5].copy_from_slice(&[0xc3, 0xcc, 0xcc, 0xcc, 0xcc]);
            n += 1;
        }
        Ok(n)
    }

    /// Apply every alternative whose feature `present` says is there, as
    /// the kernel's apply_alternatives: copy the replacement over the
    /// original, fix PC-relative displacements that point outside the
    /// replacement, pad with NOPs. Call [`Image::patch_returns`] first
    /// (the kernel patches returns before alternatives).
    pub fn apply(
        &mut self,
        names: &FeatureNames,
        present: &BTreeSet<String>,
    ) -> Result<Vec<Applied>, AltError> {
        self.apply_by(names, &|_| present)
    }

    /// [`Image::apply`] with the present features decided per routine
    /// (`present(routine)`): one image can carry a different path of each
    /// routine, even where routines share a feature.
    pub(crate) fn apply_by<'p>(
        &mut self,
        names: &FeatureNames,
        present: &dyn Fn(&str) -> &'p BTreeSet<String>,
    ) -> Result<Vec<Applied>, AltError> {
        // Describe the original code before anything is patched.
        let sites = self.sites.clone();
        let originals: Vec<Option<String>> = sites
            .iter()
            .map(|s| self.jump_target(s.orig, s.orig_len).map(str::to_string))
            .collect();
        let mut report: Vec<Applied> = Vec::new();
        for (k, site) in sites.iter().enumerate() {
            let fname = names.name(site.feature);
            let routine = self.function_at(site.orig).unwrap_or("?").to_string();
            let has = present(&routine).contains(&fname);
            let take = has != site.invert && !site.callback;
            let shown = if site.invert {
                format!("!{}", fname.to_uppercase())
            } else {
                fname.to_uppercase()
            };
            let mut target = originals[k].clone();
            let summary = if site.callback {
                format!("{routine}: {shown} callback alternative not applied (needs kernel code)")
            } else if take {
                self.apply_one(site)?;
                // As in the kernel, a later alternative of the same site
                // (ALTERNATIVE_2) overrides an earlier one.
                for (j, earlier) in sites[..k].iter().enumerate() {
                    if earlier.orig == site.orig && report[j].taken {
                        report[j]
                            .summary
                            .push_str(&format!(" (superseded by {shown})"));
                    }
                }
                target = self
                    .jump_target(site.orig, site.orig_len)
                    .map(str::to_string);
                match &target {
                    Some(name) => format!("{routine}: {shown} alternative ({name})"),
                    None => format!("{routine}: {shown} alternative"),
                }
            } else {
                match &originals[k] {
                    Some(name) => format!("{routine}: fallback {name} (no {shown})"),
                    None => format!("{routine}: original instructions (no {shown})"),
                }
            };
            report.push(Applied {
                routine,
                site: site.orig,
                feature: fname,
                taken: take,
                target,
                summary,
            });
        }
        Ok(report)
    }

    /// The function an x86 `jmp` or `call` at `at` goes to (e.g.
    /// `memset_orig`, 7.x clear_pages' `__clear_pages_unrolled`).
    fn jump_target(&self, at: u64, len: u8) -> Option<&str> {
        if self.machine != object::elf::EM_X86_64 {
            return None;
        }
        let i = self.idx(at, usize::from(len))?;
        let target = match self.bytes[i] {
            0xeb if len >= 2 => at
                .wrapping_add(2)
                .wrapping_add(self.bytes[i + 1] as i8 as i64 as u64),
            0xe8 | 0xe9 if len >= 5 => at
                .wrapping_add(5)
                .wrapping_add(self.read32(at + 1)? as i32 as i64 as u64),
            _ => return None,
        };
        self.function_named_at(target)
    }

    fn apply_one(&mut self, s: &AltSite) -> Result<(), AltError> {
        let err = |why: String| AltError::Apply { addr: s.orig, why };
        if s.repl_len > s.orig_len {
            return Err(err(format!(
                "replacement ({} bytes) longer than the original ({})",
                s.repl_len, s.orig_len
            )));
        }
        let (ol, rl) = (usize::from(s.orig_len), usize::from(s.repl_len));
        let oi = self
            .idx(s.orig, ol)
            .ok_or_else(|| err("original outside the image".into()))?;
        let ri = self
            .idx(s.repl, rl)
            .ok_or_else(|| err("replacement outside the image".into()))?;
        let mut buf = self.bytes[ri..ri + rl].to_vec();
        let delta = s.repl.wrapping_sub(s.orig);
        match self.machine {
            object::elf::EM_X86_64 => {
                for f in self
                    .pc_fields
                    .iter()
                    .filter(|f| f.addr >= s.repl && f.addr + 4 <= s.repl + rl as u64)
                {
                    if self.return_sites.contains(&(f.addr - 1)) {
                        continue; // already `ret; int3`
                    }
                    let o = (f.addr - s.repl) as usize;
                    let v = u32::from_le_bytes([buf[o], buf[o + 1], buf[o + 2], buf[o + 3]]);
                    buf[o..o + 4].copy_from_slice(&(v.wrapping_add(delta as u32)).to_le_bytes());
                }
                let mut out = vec![0u8; ol];
                out[..rl].copy_from_slice(&buf);
                x86_nop_fill(&mut out[rl..]);
                self.bytes[oi..oi + ol].copy_from_slice(&out);
            }
            object::elf::EM_AARCH64 => {
                if ol % 4 != 0 || rl != ol {
                    return Err(err(format!(
                        "arm64 lengths {ol}/{rl} must be equal multiples of 4"
                    )));
                }
                for k in (0..rl).step_by(4) {
                    let insn = u32::from_le_bytes([buf[k], buf[k + 1], buf[k + 2], buf[k + 3]]);
                    let pc_new = s.orig + k as u64;
                    let pc_old = s.repl + k as u64;
                    let fixed =
                        arm64_fix(insn, pc_old, pc_new, s.repl, s.repl + rl as u64).map_err(err)?;
                    buf[k..k + 4].copy_from_slice(&fixed.to_le_bytes());
                }
                self.bytes[oi..oi + ol].copy_from_slice(&buf);
            }
            m => return Err(err(format!("unsupported machine {m}"))),
        }
        Ok(())
    }
}

fn sext(v: u64, bits: u32) -> i64 {
    ((v << (64 - bits)) as i64) >> (64 - bits)
}

/// Move one arm64 instruction from `old` to `new` as the kernel's
/// get_alt_insn does: immediate branches to outside the replacement block
/// and ADRP are re-encoded; everything else is copied.
pub(crate) fn arm64_fix(
    insn: u32,
    old: u64,
    new: u64,
    blk_start: u64,
    blk_end: u64,
) -> Result<u32, String> {
    // (mask, value, imm shift, imm bits)
    let forms: [(u32, u32, u32, u32); 4] = [
        (0x7c00_0000, 0x1400_0000, 0, 26), // B, BL
        (0xff00_0010, 0x5400_0000, 5, 19), // B.cond
        (0x7e00_0000, 0x3400_0000, 5, 19), // CBZ, CBNZ
        (0x7e00_0000, 0x3600_0000, 5, 14), // TBZ, TBNZ
    ];
    for (mask, val, sh, bits) in forms {
        if insn & mask == val {
            let field = ((insn >> sh) & ((1 << bits) - 1)) as u64;
            let target = old.wrapping_add((sext(field, bits) * 4) as u64);
            if (blk_start..blk_end).contains(&target) {
                return Ok(insn);
            }
            let off = (target.wrapping_sub(new) as i64) / 4;
            if off < -(1 << (bits - 1)) || off >= 1 << (bits - 1) {
                return Err(format!(
                    "branch at {old:#x} out of range after moving to {new:#x}"
                ));
            }
            let m = ((1u32 << bits) - 1) << sh;
            return Ok((insn & !m) | (((off as u32) << sh) & m));
        }
    }
    if insn & 0x9f00_0000 == 0x9000_0000 {
        // ADRP: immhi 23:5, immlo 30:29
        let imm = (((insn >> 5) & 0x7ffff) << 2 | ((insn >> 29) & 3)) as u64;
        let target = (old & !0xfff).wrapping_add((sext(imm, 21) << 12) as u64);
        let off = (target.wrapping_sub(new & !0xfff) as i64) >> 12;
        if !(-(1 << 20)..(1 << 20)).contains(&off) {
            return Err(format!("adrp at {old:#x} out of range after moving"));
        }
        let o = off as u32;
        return Ok((insn & !(0x7ffff << 5 | 3 << 29)) | ((o >> 2) & 0x7ffff) << 5 | (o & 3) << 29);
    }
    if insn & 0x9f00_0000 == 0x1000_0000 {
        return Err(format!(
            "adr at {old:#x} in an alternative cannot be moved (the kernel BUGs too)"
        ));
    }
    Ok(insn)
}

/// Read the tree's feature numbering: cpufeatures.h from the source tree
/// (x86) or the generated cpucap header from the build dir (arm64).
pub fn feature_names(
    machine: object::elf::Machine,
    srctree: &Path,
    objtree: &Path,
) -> Result<FeatureNames, AltError> {
    let read = |p: std::path::PathBuf| {
        std::fs::read_to_string(&p).map_err(|source| AltError::Io { path: p, source })
    };
    match machine {
        object::elf::EM_X86_64 => Ok(FeatureNames::parse_x86(&read(
            srctree.join("arch/x86/include/asm/cpufeatures.h"),
        )?)),
        _ => {
            let dir = objtree.join("arch/arm64/include/generated/asm");
            let p = if dir.join("cpucap-defs.h").is_file() {
                dir.join("cpucap-defs.h")
            } else {
                dir.join("cpucaps.h")
            };
            Ok(FeatureNames::parse_arm64(&read(p)?))
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use object::write::{
        Object as WObject, Relocation, SectionId, Symbol, SymbolId, SymbolSection,
    };
    use object::{Architecture, BinaryFormat, Endianness, SectionKind, SymbolFlags, SymbolScope};

    pub(crate) const FSRS: u16 = 12 * 32 + 11;
    pub(crate) const ERMS: u16 = 9 * 32 + 9;

    pub(crate) fn names() -> FeatureNames {
        FeatureNames::parse_x86(
            "#define X86_FEATURE_ERMS\t\t( 9*32+ 9) /* \"erms\" Enhanced REP */\n\
             #define X86_FEATURE_FSRS\t\t(12*32+11) /* Fast short REP STOSB */\n\
             #define X86_FEATURE_ALWAYS\t\t( 3*32+21) /* \"\" Always */\n\
             #define X86_BUG_F00F X86_BUG(0)\n",
        )
    }

    /// The shape of [`memset_object`]'s object.
    pub(crate) struct MemsetObject<'a> {
        /// The `.altinstructions` entry layout.
        pub layout: Layout,
        /// The replacement's bytes.
        pub repl: &'a [u8],
        /// The replacement ends in `jmp memset_orig` (a relocated jump).
        pub repl_jmp_to_orig: bool,
        /// A second entry (ERMS, inverted) at the same site.
        pub two: bool,
    }

    impl MemsetObject<'_> {
        /// The common FSRS `rep stosb` replacement of `layout`.
        pub(crate) fn rep_stosb(layout: Layout, two: bool) -> MemsetObject<'static> {
            MemsetObject {
                layout,
                repl: &[0xf3, 0xaa],
                repl_jmp_to_orig: false,
                two,
            }
        }
    }

    fn text_symbol(o: &mut WObject, name: &str, section: SectionId, value: u64) -> SymbolId {
        o.add_symbol(Symbol {
            name: name.as_bytes().to_vec(),
            value,
            size: 16,
            kind: SymbolKind::Text,
            scope: SymbolScope::Linkage,
            weak: false,
            section: SymbolSection::Section(section),
            flags: SymbolFlags::None,
        })
    }

    fn rel(
        o: &mut WObject,
        sec: SectionId,
        offset: u64,
        symbol: SymbolId,
        addend: i64,
        r_type: object::elf::RelocationType,
    ) {
        o.add_relocation(
            sec,
            Relocation {
                offset,
                symbol,
                addend,
                flags: RelocationFlags::Elf { r_type },
            },
        )
        .unwrap()
    }

    /// `.noinstr.text` with `memset` (the site, then a jump to the return
    /// thunk) and `memset_orig`; returns the section and `memset_orig`.
    fn memset_text(o: &mut WObject) -> (SectionId, SymbolId) {
        let text = o.add_section(vec![], b".noinstr.text".to_vec(), SectionKind::Text);
        // memset: 0: eb 0e (jmp 0x10) ; 2: 3 bytes pad (nop) ; 5: e9 <thunk> ; 10..16 int3
        let mut code = vec![0xeb, 0x0e, 0x90, 0x90, 0x90, 0xe9, 0, 0, 0, 0];
        code.resize(16, 0xcc);
        // memset_orig at 0x10: ret
        code.extend([0xc3; 16]);
        o.append_section_data(text, &code, 16);
        text_symbol(o, "memset", text, 0);
        let orig = text_symbol(o, "memset_orig", text, 0x10);
        (text, orig)
    }

    /// The return-thunk jump at text+5 as `layout`'s kernel leaves it.
    fn return_thunk(o: &mut WObject, text: SectionId, layout: Layout) {
        let thunk = o.add_symbol(Symbol {
            name: b"__x86_return_thunk".to_vec(),
            value: 0,
            size: 0,
            kind: SymbolKind::Unknown,
            scope: SymbolScope::Linkage,
            weak: false,
            section: SymbolSection::Undefined,
            flags: SymbolFlags::None,
        });
        if layout == Layout::X86FtFlags {
            // 6.12 single objects: objtool has not run, only the relocation.
            rel(o, text, 6, thunk, -4, object::elf::R_X86_64_PLT32);
        } else {
            // 6.1: objtool listed the site in .return_sites (PC32 to text+5).
            let rs = o.add_section(vec![], b".return_sites".to_vec(), SectionKind::ReadOnlyData);
            o.append_section_data(rs, &[0; 4], 4);
            let text_sym = o.section_symbol(text);
            rel(o, rs, 0, text_sym, 5, object::elf::R_X86_64_PC32);
        }
    }

    /// `.altinstr_replacement`; returns the section and the replacement's length.
    fn replacement(o: &mut WObject, spec: &MemsetObject, orig: SymbolId) -> (SectionId, usize) {
        let sec = o.add_section(vec![], b".altinstr_replacement".to_vec(), SectionKind::Text);
        let mut r = spec.repl.to_vec();
        if spec.repl_jmp_to_orig {
            r.extend([0xe9, 0, 0, 0, 0]);
        }
        o.append_section_data(sec, &r, 1);
        if spec.repl_jmp_to_orig {
            let at = spec.repl.len() as u64 + 1;
            rel(o, sec, at, orig, -4, object::elf::R_X86_64_PC32);
        }
        (sec, r.len())
    }

    /// The `.altinstructions` entries of the site at text+0 (5 bytes).
    fn alt_entries(
        o: &mut WObject,
        spec: &MemsetObject,
        text: SectionId,
        repl: (SectionId, usize),
    ) {
        let alt = o.add_section(
            vec![],
            b".altinstructions".to_vec(),
            SectionKind::ReadOnlyData,
        );
        let text_sym = o.section_symbol(text);
        let repl_sym = o.section_symbol(repl.0);
        let entries: &[(u16, bool)] = if spec.two {
            &[(FSRS, false), (ERMS, true)]
        } else {
            &[(FSRS, false)]
        };
        for (i, &(feature, not)) in entries.iter().enumerate() {
            let mut e = vec![0u8; 8];
            match spec.layout {
                Layout::X86FtFlags => {
                    e.extend(feature.to_le_bytes());
                    e.extend((u16::from(not)).to_le_bytes());
                }
                _ => e.extend((feature | if not { 0x8000 } else { 0 }).to_le_bytes()),
            }
            e.push(5);
            e.push(repl.1 as u8);
            let base = (i * spec.layout.entry_size()) as u64;
            o.append_section_data(alt, &e, 1);
            rel(o, alt, base, text_sym, 0, object::elf::R_X86_64_PC32);
            rel(o, alt, base + 4, repl_sym, 0, object::elf::R_X86_64_PC32);
        }
    }

    /// A relocatable x86 object shaped like the kernel's memset_64.o:
    /// `memset` starts with an alternative site (`jmp memset_orig`,
    /// 2 bytes, + 3 bytes of padding) whose replacement is `spec.repl`;
    /// `memset` then jumps to `__x86_return_thunk`. Entries use
    /// `spec.layout`; a second entry (ERMS, inverted) is added when `spec.two`.
    pub(crate) fn memset_object(spec: &MemsetObject) -> Vec<u8> {
        let mut o = WObject::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
        let (text, orig) = memset_text(&mut o);
        return_thunk(&mut o, text, spec.layout);
        let repl = replacement(&mut o, spec, orig);
        alt_entries(&mut o, spec, text, repl);
        o.write().unwrap()
    }

    fn orig_bytes(img: &Image) -> Vec<u8> {
        let at = img
            .functions
            .iter()
            .find(|f| f.name == "memset")
            .unwrap()
            .addr;
        let i = (at - img.base) as usize;
        img.bytes[i..i + 10].to_vec()
    }

    #[test]
    fn feature_headers() {
        let n = names();
        assert_eq!(n.name(ERMS), "erms");
        assert_eq!(n.number("fsrs"), Some(FSRS));
        assert_eq!(n.name(3 * 32 + 21), "always");
        assert_eq!(n.name(7), "feature#7");
        let a =
            FeatureNames::parse_arm64("#define ARM64_HAS_MOPS\t\t38\n#define ARM64_NCAPS 102\n");
        assert_eq!(a.number("has_mops"), Some(38));
        assert_eq!(a.number("ncaps"), None);
        let flags =
            cpuinfo_flags("processor\t: 0\nflags\t\t: fpu erms fsrm rep_good\n\nprocessor: 1\n");
        assert!(flags.contains("erms") && flags.contains("rep_good") && !flags.contains("fsrs"));
    }

    #[test]
    fn parses_both_x86_layouts() {
        for layout in [Layout::X86FtFlags, Layout::X86Cpuid16] {
            let elf = memset_object(&MemsetObject::rep_stosb(layout, true));
            let img = Image::from_elf(&elf, None).unwrap();
            assert_eq!(img.sites.len(), 2, "{layout:?}");
            let memset = img
                .functions
                .iter()
                .find(|f| f.name == "memset")
                .unwrap()
                .addr;
            assert_eq!(img.sites[0].orig, memset, "{layout:?}");
            assert_eq!((img.sites[0].feature, img.sites[0].invert), (FSRS, false));
            assert_eq!((img.sites[1].feature, img.sites[1].invert), (ERMS, true));
            assert_eq!((img.sites[0].orig_len, img.sites[0].repl_len), (5, 2));
            assert_eq!(img.return_sites, vec![memset + 5]);
        }
        assert_eq!(infer_x86_layout(14, [0, 4].into_iter()), Layout::X86FtFlags);
        assert_eq!(
            infer_x86_layout(24, [0, 4, 12, 16].into_iter()),
            Layout::X86Cpuid16
        );
        assert_eq!(
            infer_x86_layout(28, [0, 4, 14, 18].into_iter()),
            Layout::X86FtFlags
        );
        let bad = parse_entries(&[0; 13], 0, Layout::X86FtFlags);
        assert!(matches!(bad, Err(AltError::Malformed { .. })));
    }

    #[test]
    fn applies_taken_alternatives_with_nop_padding() {
        let elf = memset_object(&MemsetObject::rep_stosb(Layout::X86FtFlags, false));
        let n = names();
        let mut img = Image::from_elf(&elf, None).unwrap();
        let untouched = orig_bytes(&img);
        let r = img.apply(&n, &BTreeSet::new()).unwrap();
        assert_eq!(r[0].summary, "memset: fallback memset_orig (no FSRS)");
        assert!(!r[0].taken);
        assert_eq!(orig_bytes(&img), untouched);

        let r = img.apply(&n, &["fsrs".to_string()].into()).unwrap();
        assert_eq!(r[0].summary, "memset: FSRS alternative");
        assert_eq!(&orig_bytes(&img)[..5], &[0xf3, 0xaa, 0x0f, 0x1f, 0x00]);

        assert_eq!(img.patch_returns().unwrap(), 1);
        assert_eq!(&orig_bytes(&img)[5..10], &[0xc3, 0xcc, 0xcc, 0xcc, 0xcc]);
        // Already patched: no longer a jmp, refused rather than corrupted.
        assert!(img.patch_returns().is_err());
    }

    #[test]
    fn inverted_alternatives_apply_when_the_feature_is_absent() {
        let elf = memset_object(&MemsetObject {
            layout: Layout::X86Cpuid16,
            repl: &[],
            repl_jmp_to_orig: false,
            two: true,
        });
        let mut img = Image::from_elf(&elf, None).unwrap();
        let r = img.apply(&names(), &["erms".to_string()].into()).unwrap();
        assert!(!r[0].taken && !r[1].taken, "{r:?}");
        let r = img.apply(&names(), &BTreeSet::new()).unwrap();
        assert!(!r[0].taken && r[1].taken, "{r:?}");
        assert_eq!(r[1].summary, "memset: !ERMS alternative");
        assert_eq!(&orig_bytes(&img)[..5], X86_NOPS[5]);
        // Both taken: the later entry of the same site wins, as in the kernel.
        let mut img = Image::from_elf(&elf, None).unwrap();
        let r = img.apply(&names(), &["fsrs".to_string()].into()).unwrap();
        assert!(r[0].taken && r[1].taken, "{r:?}");
        assert_eq!(
            r[0].summary,
            "memset: FSRS alternative (superseded by !ERMS)"
        );
    }

    #[test]
    fn jump_displacements_in_replacements_are_recomputed() {
        // Replacement: `nop; jmp memset_orig` (rel32 against .noinstr.text).
        let elf = memset_object(&MemsetObject {
            layout: Layout::X86FtFlags,
            repl: &[],
            repl_jmp_to_orig: true,
            two: false,
        });
        let mut img = Image::from_elf(&elf, None).unwrap();
        let site = img.sites[0].clone();
        let target = img
            .functions
            .iter()
            .find(|f| f.name == "memset_orig")
            .unwrap()
            .addr;
        let r = img.apply(&names(), &["fsrs".to_string()].into()).unwrap();
        assert_eq!(r[0].summary, "memset: FSRS alternative (memset_orig)");
        let i = (site.orig - img.base) as usize;
        assert_eq!(img.bytes[i], 0xe9);
        let d = i32::from_le_bytes(img.bytes[i + 1..i + 5].try_into().unwrap());
        assert_eq!(
            site.orig.wrapping_add(5).wrapping_add(d as i64 as u64),
            target
        );
    }

    #[test]
    fn arm64_branches_and_adrp_move() {
        // b +0x100 at 0x1000 moved to 0x800: target 0x1100 stays.
        let b = 0x1400_0000 | (0x100 / 4);
        let moved = arm64_fix(b, 0x1000, 0x800, 0x1000, 0x1004).unwrap();
        assert_eq!(moved & 0x03ff_ffff, (0x1100 - 0x800) / 4);
        // A branch inside the replacement block is left alone.
        let inner = 0x1400_0001;
        assert_eq!(
            arm64_fix(inner, 0x1000, 0x800, 0x1000, 0x1008).unwrap(),
            inner
        );
        // cbz x0, -8 : target 0xff8, moved to 0x2000.
        let cbz = 0xb400_0000 | ((((-2i32) as u32) & 0x7ffff) << 5);
        let m = arm64_fix(cbz, 0x1000, 0x2000, 0x1000, 0x1004).unwrap();
        let imm = sext(u64::from((m >> 5) & 0x7ffff), 19);
        assert_eq!(0x2000 + imm * 4, 0xff8);
        // adrp x0, +1 page at 0x1000 -> page 0x2000; moved to 0x5000: -3 pages.
        let adrp = 0x9000_0000 | (1 << 29);
        let m = arm64_fix(adrp, 0x1000, 0x5000, 0x1000, 0x1004).unwrap();
        let imm = sext(u64::from(((m >> 5) & 0x7ffff) << 2 | ((m >> 29) & 3)), 21);
        assert_eq!(0x5000 + (imm << 12), 0x2000);
        // adr cannot be moved.
        assert!(arm64_fix(0x1000_0000, 0x1000, 0x5000, 0x1000, 0x1004).is_err());
        // Anything else is copied.
        assert_eq!(arm64_fix(0xd503_201f, 0, 8, 0, 4).unwrap(), 0xd503_201f);
    }
}
