//! gen-hyprel for the hypclear blob: the relocation policy and the
//! relocation list.
//!
//! The arm64 kernel links its nVHE hyp at one address and runs it at another;
//! `gen-hyprel` walks the hyp object's relocations at build time and emits a
//! list of the absolute 64-bit words the kernel must fix up. The blob here is
//! linked at address 0 with `--emit-relocs` and loaded at a randomized address,
//! so `build.rs` runs [`police`] on it:
//!
//! * relocations in `.pi.text` (the `__pi_` routines) must be PC-relative;
//! * absolute 64-bit relocations elsewhere (the alias table) are collected
//!   into `.hyp.reloc`, a list of little-endian `u32` blob offsets, which the
//!   host applies by adding the load address;
//! * any other relocation type, and any undefined symbol, is an error naming
//!   the symbol, the section and the offset.

use object::read::elf::ElfFile64;
use object::{Object, ObjectSection, ObjectSymbol, RelocationFlags, RelocationTarget};
use std::fmt;

/// Name of the section holding the relocation list.
pub const RELOC_SECTION: &str = ".hyp.reloc";
/// Output section holding the `__pi_` routines.
pub(crate) const PI_TEXT_SECTION: &str = ".pi.text";

/// How a relocation type is treated by the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RelocClass {
    /// Relative to the place: the same after any load offset.
    PcRelative,
    /// The low 12 bits of an address (aarch64 `:lo12:`): position
    /// independent as long as the load offset is page aligned.
    PageOffset,
    /// A 64-bit absolute address: goes into the relocation list.
    Abs64,
    /// Anything else: not allowed in the blob.
    Forbidden,
}

/// Classify an ELF relocation type for a machine (`e_machine`).
pub(crate) fn classify(
    machine: object::elf::Machine,
    r_type: object::elf::RelocationType,
) -> RelocClass {
    use object::elf;
    match machine {
        elf::EM_X86_64 => match r_type {
            elf::R_X86_64_PC32 | elf::R_X86_64_PLT32 | elf::R_X86_64_PC64 => RelocClass::PcRelative,
            elf::R_X86_64_64 => RelocClass::Abs64,
            _ => RelocClass::Forbidden,
        },
        elf::EM_AARCH64 => match r_type {
            // What the kernel's gen-hyprel accepts as position independent:
            // PC-relative data, PLT32, branches, ADR/ADRP/literal loads and
            // the MOVW_PREL group relocations. (It also lets ABS32 through
            // for kCFI type hashes; the blob has no kCFI, so ABS32 stays
            // forbidden here.)
            elf::R_AARCH64_PREL32
            | elf::R_AARCH64_PREL64
            | elf::R_AARCH64_PREL16
            | elf::R_AARCH64_PLT32
            | elf::R_AARCH64_MOVW_PREL_G0
            | elf::R_AARCH64_MOVW_PREL_G0_NC
            | elf::R_AARCH64_MOVW_PREL_G1
            | elf::R_AARCH64_MOVW_PREL_G1_NC
            | elf::R_AARCH64_MOVW_PREL_G2
            | elf::R_AARCH64_MOVW_PREL_G2_NC
            | elf::R_AARCH64_MOVW_PREL_G3
            | elf::R_AARCH64_CALL26
            | elf::R_AARCH64_JUMP26
            | elf::R_AARCH64_CONDBR19
            | elf::R_AARCH64_TSTBR14
            | elf::R_AARCH64_LD_PREL_LO19
            | elf::R_AARCH64_ADR_PREL_LO21
            | elf::R_AARCH64_ADR_PREL_PG_HI21
            | elf::R_AARCH64_ADR_PREL_PG_HI21_NC => RelocClass::PcRelative,
            elf::R_AARCH64_ADD_ABS_LO12_NC
            | elf::R_AARCH64_LDST8_ABS_LO12_NC
            | elf::R_AARCH64_LDST16_ABS_LO12_NC
            | elf::R_AARCH64_LDST32_ABS_LO12_NC
            | elf::R_AARCH64_LDST64_ABS_LO12_NC
            | elf::R_AARCH64_LDST128_ABS_LO12_NC => RelocClass::PageOffset,
            elf::R_AARCH64_ABS64 => RelocClass::Abs64,
            _ => RelocClass::Forbidden,
        },
        _ => RelocClass::Forbidden,
    }
}

/// One broken rule, with everything needed to find the culprit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub section: String,
    pub offset: u64,
    pub symbol: String,
    pub what: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at {}+{:#x} (symbol `{}`)",
            self.what, self.section, self.offset, self.symbol
        )
    }
}

/// Why the blob cannot be used.
#[derive(Debug)]
pub enum PolicyError {
    /// Not a 64-bit little-endian ELF the policy understands.
    Parse(String),
    /// Rule violations, all of them.
    Violations(Vec<Violation>),
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyError::Parse(e) => write!(f, "cannot parse the blob ELF: {e}"),
            PolicyError::Violations(v) => {
                writeln!(f, "the blob breaks the hyp relocation policy:")?;
                for x in v {
                    writeln!(f, "  - {x}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for PolicyError {}

type Elf<'a> = ElfFile64<'a, object::Endianness>;

/// Check a blob linked at address 0 with `--emit-relocs` and return the
/// offsets of the absolute 64-bit words the loader must relocate, sorted.
pub fn police(elf_bytes: &[u8]) -> Result<Vec<u32>, PolicyError> {
    let file = Elf::parse(elf_bytes).map_err(|e| PolicyError::Parse(e.to_string()))?;
    let machine = file.elf_header().e_machine.get(file.endian());
    let mut violations = undefined_symbols(&file);
    let mut abs = Vec::new();
    for section in file.sections() {
        // Only what is loaded into the guest matters (debug info is not).
        let alloc = match section.flags() {
            object::SectionFlags::Elf { sh_flags, .. } => {
                sh_flags.0 & object::elf::SHF_ALLOC.0 != 0
            }
            _ => true,
        };
        if !alloc {
            continue;
        }
        let sname = section.name().unwrap_or("?").to_string();
        let in_pi = sname == PI_TEXT_SECTION;
        for (offset, reloc) in section.relocations() {
            let r_type = match reloc.flags() {
                RelocationFlags::Elf { r_type } => r_type,
                _ => object::elf::RelocationType(u32::MAX),
            };
            match rule(classify(machine, r_type), in_pi, offset, r_type) {
                Ok(Some(o)) => abs.push(o),
                Ok(None) => {}
                Err(what) => violations.push(Violation {
                    section: sname.clone(),
                    // --emit-relocs keeps r_offset as a virtual address; show it
                    // relative to its section like a partial-link listing would.
                    offset: offset.wrapping_sub(section.address()),
                    symbol: target_name(&file, reloc.target()),
                    what,
                }),
            }
        }
    }
    if !violations.is_empty() {
        return Err(PolicyError::Violations(violations));
    }
    abs.sort_unstable();
    abs.dedup();
    Ok(abs)
}

/// Every named undefined symbol: the blob must be self-contained.
fn undefined_symbols(file: &Elf) -> Vec<Violation> {
    file.symbols()
        .filter(|sym| sym.is_undefined() && !sym.name().unwrap_or("").is_empty())
        .map(|sym| Violation {
            section: "*UND*".into(),
            offset: 0,
            symbol: sym.name().unwrap_or("?").into(),
            what: "undefined symbol".into(),
        })
        .collect()
}

/// The name a violation shows for a relocation's target.
fn target_name(file: &Elf, target: RelocationTarget) -> String {
    match target {
        RelocationTarget::Symbol(idx) => file
            .symbol_by_index(idx)
            .ok()
            .and_then(|s| s.name().ok().map(str::to_string))
            .unwrap_or_else(|| format!("#{}", idx.0)),
        RelocationTarget::Section(idx) => file
            .section_by_index(idx)
            .ok()
            .and_then(|s| s.name().ok().map(str::to_string))
            .unwrap_or_else(|| "?".into()),
        _ => "?".into(),
    }
}

/// gen-hyprel's rule for one relocation of class `class` at `offset`
/// (`in_pi`: in the `__pi_` routines' section): `Some` absolute word for
/// the loader, `None` nothing to do, or why it breaks the policy.
fn rule(
    class: RelocClass,
    in_pi: bool,
    offset: u64,
    r_type: object::elf::RelocationType,
) -> Result<Option<u32>, String> {
    match class {
        RelocClass::PcRelative | RelocClass::PageOffset => Ok(None),
        RelocClass::Abs64 if !in_pi => match u32::try_from(offset) {
            Ok(o) if o % 8 == 0 => Ok(Some(o)),
            _ => Err("absolute 64-bit relocation that is misaligned or beyond 4 GiB".into()),
        },
        RelocClass::Abs64 => {
            Err("absolute relocation in a __pi_ routine (must be PC-relative)".into())
        }
        RelocClass::Forbidden => Err(format!("forbidden relocation type {}", r_type.0)),
    }
}

/// Encode a relocation list as the `.hyp.reloc` section contents.
pub(crate) fn encode(offsets: &[u32]) -> Vec<u8> {
    offsets.iter().flat_map(|o| o.to_le_bytes()).collect()
}

/// Decode `.hyp.reloc` section contents.
pub fn decode(bytes: &[u8]) -> Option<Vec<u32>> {
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    Some(
        bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::write::{Object as WObject, Relocation, Symbol, SymbolSection};
    use object::{
        Architecture, BinaryFormat, Endianness, SectionKind, SymbolFlags, SymbolKind, SymbolScope,
    };

    /// A relocatable x86_64 object with `.pi.text` and `.data`, and the
    /// given relocations: (section is .pi.text?, offset, r_type, symbol defined?).
    fn object(relocs: &[(bool, u64, u32, bool)]) -> Vec<u8> {
        let mut o = WObject::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
        let pi = o.add_section(
            vec![],
            PI_TEXT_SECTION.as_bytes().to_vec(),
            SectionKind::Text,
        );
        o.append_section_data(pi, &[0x90; 64], 16);
        let data = o.add_section(vec![], b".data".to_vec(), SectionKind::Data);
        o.append_section_data(data, &[0; 64], 8);
        let defined = o.add_symbol(Symbol {
            name: b"__pi_ok".to_vec(),
            value: 0,
            size: 64,
            kind: SymbolKind::Text,
            scope: SymbolScope::Linkage,
            weak: false,
            section: SymbolSection::Section(pi),
            flags: SymbolFlags::None,
        });
        let needs_undefined = relocs.iter().any(|r| !r.3);
        let undefined = o.add_symbol(Symbol {
            name: if needs_undefined {
                b"missing".to_vec()
            } else {
                b"unused".to_vec()
            },
            value: 0,
            size: 0,
            kind: if needs_undefined {
                SymbolKind::Unknown
            } else {
                SymbolKind::Data
            },
            scope: SymbolScope::Linkage,
            weak: false,
            section: if needs_undefined {
                SymbolSection::Undefined
            } else {
                SymbolSection::Section(data)
            },
            flags: SymbolFlags::None,
        });
        for &(in_pi, offset, r_type, def) in relocs {
            o.add_relocation(
                if in_pi { pi } else { data },
                Relocation {
                    offset,
                    symbol: if def { defined } else { undefined },
                    addend: 0,
                    flags: RelocationFlags::Elf {
                        r_type: object::elf::RelocationType(r_type),
                    },
                },
            )
            .unwrap();
        }
        o.write().unwrap()
    }

    const ABS64: u32 = 1;
    const PC32: u32 = 2;
    const ABS32: u32 = 10;

    #[test]
    fn absolute_words_outside_pi_text_become_the_list() {
        let elf = object(&[
            (false, 8, ABS64, true),
            (false, 0, ABS64, true),
            (true, 4, PC32, true),
        ]);
        assert_eq!(police(&elf).unwrap(), vec![0, 8]);
        assert_eq!(decode(&encode(&[0, 8, 4096])).unwrap(), vec![0, 8, 4096]);
        assert!(decode(&[1, 2, 3]).is_none());
    }

    #[test]
    fn violations_name_symbol_section_and_offset() {
        let elf = object(&[
            (true, 16, ABS64, true),
            (false, 24, ABS32, true),
            (false, 32, ABS64, false),
        ]);
        let Err(PolicyError::Violations(v)) = police(&elf) else {
            panic!("policy accepted a bad object");
        };
        let text: Vec<String> = v.iter().map(|x| x.to_string()).collect();
        assert!(
            text.iter()
                .any(|t| t.contains("absolute relocation in a __pi_ routine")
                    && t.contains(".pi.text+0x10")
                    && t.contains("__pi_ok")),
            "{text:?}"
        );
        assert!(
            text.iter()
                .any(|t| t.contains("forbidden relocation type 10") && t.contains(".data+0x18")),
            "{text:?}"
        );
        assert!(
            text.iter()
                .any(|t| t.contains("undefined symbol") && t.contains("missing")),
            "{text:?}"
        );
    }

    /// An aarch64 object whose `.pi.text` carries `types`, one every 4 bytes.
    fn aarch64_object(types: &[object::elf::RelocationType]) -> Vec<u8> {
        let mut o = WObject::new(BinaryFormat::Elf, Architecture::Aarch64, Endianness::Little);
        let pi = o.add_section(
            vec![],
            PI_TEXT_SECTION.as_bytes().to_vec(),
            SectionKind::Text,
        );
        o.append_section_data(pi, &[0; 64], 16);
        let sym = o.add_symbol(Symbol {
            name: b"__pi_memset".to_vec(),
            value: 0,
            size: 64,
            kind: SymbolKind::Text,
            scope: SymbolScope::Linkage,
            weak: false,
            section: SymbolSection::Section(pi),
            flags: SymbolFlags::None,
        });
        for (i, &r_type) in types.iter().enumerate() {
            o.add_relocation(
                pi,
                Relocation {
                    offset: 4 * i as u64,
                    symbol: sym,
                    addend: 0,
                    flags: RelocationFlags::Elf { r_type },
                },
            )
            .unwrap();
        }
        o.write().unwrap()
    }

    #[test]
    fn aarch64_kernel_relocations_in_pi_text() {
        use object::elf;
        let ok = aarch64_object(&[
            elf::R_AARCH64_PLT32,
            elf::R_AARCH64_CALL26,
            elf::R_AARCH64_JUMP26,
            elf::R_AARCH64_MOVW_PREL_G0,
            elf::R_AARCH64_MOVW_PREL_G1_NC,
            elf::R_AARCH64_MOVW_PREL_G2,
            elf::R_AARCH64_MOVW_PREL_G3,
            elf::R_AARCH64_PREL32,
        ]);
        assert_eq!(police(&ok).unwrap(), Vec::<u32>::new());
        let bad = aarch64_object(&[elf::R_AARCH64_CALL26, elf::R_AARCH64_MOVW_UABS_G1]);
        let Err(PolicyError::Violations(v)) = police(&bad) else {
            panic!("policy accepted MOVW_UABS_G1");
        };
        assert_eq!(v.len(), 1, "{v:?}");
        let t = v[0].to_string();
        assert!(
            t.contains(&format!(
                "forbidden relocation type {}",
                elf::R_AARCH64_MOVW_UABS_G1.0
            )) && t.contains(".pi.text+0x4")
                && t.contains("__pi_memset"),
            "{t}"
        );
    }

    #[test]
    fn aarch64_classes() {
        use object::elf;
        let m = elf::EM_AARCH64;
        assert_eq!(classify(m, elf::R_AARCH64_ABS64), RelocClass::Abs64);
        assert_eq!(classify(m, elf::R_AARCH64_CALL26), RelocClass::PcRelative);
        assert_eq!(
            classify(m, elf::R_AARCH64_ADD_ABS_LO12_NC),
            RelocClass::PageOffset
        );
        assert_eq!(classify(m, elf::R_AARCH64_ABS32), RelocClass::Forbidden);
        for r in [
            elf::R_AARCH64_PLT32,
            elf::R_AARCH64_JUMP26,
            elf::R_AARCH64_MOVW_PREL_G0,
            elf::R_AARCH64_MOVW_PREL_G0_NC,
            elf::R_AARCH64_MOVW_PREL_G1,
            elf::R_AARCH64_MOVW_PREL_G1_NC,
            elf::R_AARCH64_MOVW_PREL_G2,
            elf::R_AARCH64_MOVW_PREL_G2_NC,
            elf::R_AARCH64_MOVW_PREL_G3,
        ] {
            assert_eq!(classify(m, r), RelocClass::PcRelative, "type {}", r.0);
        }
        // Absolute MOVW groups are not position independent.
        assert_eq!(
            classify(m, elf::R_AARCH64_MOVW_UABS_G0),
            RelocClass::Forbidden
        );
        let x = elf::EM_X86_64;
        assert_eq!(classify(x, elf::R_X86_64_PLT32), RelocClass::PcRelative);
        assert_eq!(classify(x, elf::R_X86_64_PC32), RelocClass::PcRelative);
        assert_eq!(classify(x, elf::R_X86_64_32), RelocClass::Forbidden);
        assert_eq!(
            classify(elf::EM_X86_64, elf::R_X86_64_32S),
            RelocClass::Forbidden
        );
    }
}
