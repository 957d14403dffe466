//! [`kernel_picks`] on synthetic x86 trees: small sources in the shape of
//! the kernel's (`SYM_FUNC_START`, `ALTERNATIVE`, `ALTERNATIVE_2`, the C
//! `alternative_call_2`; written for these tests, not copied from Linux),
//! assembled here into relocatable objects that go through the one
//! alternatives parser ([`Image::from_elf`]) as kbuild's objects do.
use super::*;
use crate::alternatives::Layout;
use object::write::{Object as WObject, Relocation, Symbol, SymbolId, SymbolSection};
use object::{
    Architecture, BinaryFormat, Endianness, RelocationFlags, SectionKind, SymbolFlags, SymbolKind,
    SymbolScope,
};
use std::collections::BTreeMap;

/// Feature numbers as a tree's asm/cpufeatures.h gives them.
const CPUFEATURES: &str = "\
#define X86_FEATURE_REP_GOOD\t( 3*32+16) /* \"rep_good\" */
#define X86_FEATURE_ALWAYS\t( 3*32+21)
#define X86_FEATURE_ERMS\t( 9*32+ 9)
#define X86_FEATURE_AVX512F\t( 9*32+16)
#define X86_FEATURE_FSRS\t(12*32+11)
#define X86_FEATURE_FSRM\t(18*32+ 4)
";

/// 6.x asm/page_64.h: clear_page() chooses in C.
const PAGE_64_H: &str = "static inline void clear_page(void *page)\n{\n\
    \talternative_call_2(clear_page_orig,\n\
    \t\t\t   clear_page_rep, X86_FEATURE_REP_GOOD,\n\
    \t\t\t   clear_page_erms, X86_FEATURE_ERMS,\n\
    \t\t\t   \"=D\" (page),\n\t\t\t   \"D\" (page)\n\
    \t\t\t   : \"cc\", \"memory\", \"rax\", \"rcx\");\n}\n";

/// 6.x clear_page_64.S: three out-of-line routines.
const CLEAR_PAGE_6X: &str = "
SYM_FUNC_START(clear_page_rep)
	rep stosq
	RET
SYM_FUNC_START(clear_page_orig)
	RET
SYM_FUNC_START(clear_page_erms)
	rep stosb
	RET
";

/// copy_page_64.S, the same in 6.1, 6.12 and 7.x.
const COPY_PAGE: &str = r#"
SYM_FUNC_START(copy_page)
	ALTERNATIVE "jmp copy_page_regs", "", X86_FEATURE_REP_GOOD
	rep movsq
	RET
SYM_FUNC_START_LOCAL(copy_page_regs)
	RET
"#;

/// 6.1-like memset_64.S and memcpy_64.S: REP_GOOD, then ERMS jumping to
/// its own routine.
const STRING_61: &str = r#"
SYM_FUNC_START(__memset)
	ALTERNATIVE_2 "jmp memset_orig", "", X86_FEATURE_REP_GOOD, "jmp memset_erms", X86_FEATURE_ERMS
	rep stosq
	RET
SYM_FUNC_START_LOCAL(memset_erms)
	rep stosb
	RET
SYM_FUNC_START_LOCAL(memset_orig)
	RET
SYM_FUNC_START(__memcpy)
	ALTERNATIVE_2 "jmp memcpy_orig", "", X86_FEATURE_REP_GOOD, "jmp memcpy_erms", X86_FEATURE_ERMS
	rep movsq
	RET
SYM_FUNC_START_LOCAL(memcpy_erms)
	rep movsb
	RET
SYM_FUNC_START_LOCAL(memcpy_orig)
	RET
"#;

/// 6.12-like (and 7.x) memset_64.S and memcpy_64.S: one feature each.
const STRING_612: &str = r#"
SYM_FUNC_START(__memset)
	ALTERNATIVE "jmp memset_orig", "", X86_FEATURE_FSRS
	rep stosb
	RET
SYM_FUNC_START_LOCAL(memset_orig)
	RET
SYM_FUNC_START(__memcpy)
	ALTERNATIVE "jmp memcpy_orig", "", X86_FEATURE_FSRM
	rep movsb
	RET
SYM_FUNC_START_LOCAL(memcpy_orig)
	RET
"#;

/// 7.x: clear_pages() is inline asm in asm/page_64.h, compiled out of line
/// by hypclear's shim into two functions that each carry its site.
const CLEAR_PAGES_7X: &str = r#"
SYM_FUNC_START(clear_page_inline)
	ALTERNATIVE_2 "call __clear_pages_unrolled", "shrq $3, %rcx; rep stosq", X86_FEATURE_REP_GOOD, "rep stosb", X86_FEATURE_ERMS
	RET
SYM_FUNC_START(clear_pages_inline)
	ALTERNATIVE_2 "call __clear_pages_unrolled", "shrq $3, %rcx; rep stosq", X86_FEATURE_REP_GOOD, "rep stosb", X86_FEATURE_ERMS
	RET
SYM_FUNC_START(__clear_pages_unrolled)
	RET
"#;

/// amd.c's init_amd(), with and without the 6.12 implication.
const AMD_612: &str = "static void init_amd(struct cpuinfo_x86 *c)\n{\n\
    \tif (c->x86 >= 0x10)\n\t\tset_cpu_cap(c, X86_FEATURE_REP_GOOD);\n\n\
    \tif (cpu_has(c, X86_FEATURE_FSRM))\n\t\tset_cpu_cap(c, X86_FEATURE_FSRS);\n}\n";
const AMD_61: &str = "static void init_amd(struct cpuinfo_x86 *c)\n{\n\
    \tif (c->x86 >= 0x10)\n\t\tset_cpu_cap(c, X86_FEATURE_REP_GOOD);\n}\n";

/// One instruction of a snippet: its bytes and, for a `jmp`/`call`, the
/// function its rel32 goes to.
fn insn(text: &str) -> (Vec<u8>, Option<String>) {
    let t = text.trim();
    if let Some(f) = t.strip_prefix("jmp ") {
        return (vec![0xe9, 0, 0, 0, 0], Some(f.trim().into()));
    }
    if let Some(f) = t.strip_prefix("call ") {
        return (vec![0xe8, 0, 0, 0, 0], Some(f.trim().into()));
    }
    let bytes: &[u8] = match t {
        "" => &[],
        "RET" => &[0xc3],
        "rep stosb" => &[0xf3, 0xaa],
        "rep stosq" => &[0xf3, 0x48, 0xab],
        "rep movsb" => &[0xf3, 0xa4],
        "rep movsq" => &[0xf3, 0x48, 0xa5],
        "shrq $3, %rcx" => &[0x48, 0xc1, 0xe9, 0x03],
        other => panic!("the snippet assembler does not know `{other}`"),
    };
    (bytes.to_vec(), None)
}

/// Bytes with the rel32 fields (offset, function) in them.
#[derive(Default)]
struct Code {
    bytes: Vec<u8>,
    relocs: Vec<(u64, String)>,
}

impl Code {
    /// Append `;`-separated instructions.
    fn push(&mut self, text: &str) {
        for i in text.split(';') {
            let (b, target) = insn(i);
            if let Some(t) = target {
                self.relocs.push((self.bytes.len() as u64 + 1, t));
            }
            self.bytes.extend(b);
        }
    }
}

/// A snippet assembled: functions, alternative entries (orig offset,
/// replacement offset, feature, lengths) and the two code sections.
#[derive(Default)]
struct Unit {
    text: Code,
    repl: Code,
    functions: Vec<(String, u64)>,
    entries: Vec<(u64, u64, u16, u8, u8)>,
}

/// The comma-separated arguments of a macro line, quotes removed.
fn args(line: &str) -> Vec<String> {
    let (mut out, mut cur, mut quoted) = (Vec::new(), String::new(), false);
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur).trim().to_string()),
            _ => cur.push(c),
        }
    }
    out.push(cur.trim().to_string());
    out
}

impl Unit {
    fn line(&mut self, line: &str, names: &FeatureNames) {
        let l = line.trim();
        let func = l
            .strip_prefix("SYM_FUNC_START(")
            .or_else(|| l.strip_prefix("SYM_FUNC_START_LOCAL("));
        if let Some(f) = func {
            let name = f.trim_end_matches(')').to_string();
            self.functions.push((name, self.text.bytes.len() as u64));
        } else if let Some(a) = l.strip_prefix("ALTERNATIVE_2 ") {
            self.alternative(&args(a), names);
        } else if let Some(a) = l.strip_prefix("ALTERNATIVE ") {
            self.alternative(&args(a), names);
        } else if !l.is_empty() {
            self.text.push(l);
        }
    }

    /// `orig, repl1, FEATURE1[, repl2, FEATURE2]`: the original padded to
    /// the longest replacement with NOPs, one entry per replacement.
    fn alternative(&mut self, a: &[String], names: &FeatureNames) {
        let at = self.text.bytes.len() as u64;
        self.text.push(&a[0]);
        let mut alts = Vec::new();
        for pair in a[1..].chunks(2) {
            let from = self.repl.bytes.len() as u64;
            self.repl.push(&pair[0]);
            let len = self.repl.bytes.len() as u64 - from;
            let f = pair[1].strip_prefix("X86_FEATURE_").expect("a feature");
            let n = names
                .number(&f.to_ascii_lowercase())
                .expect("a known feature");
            alts.push((from, n, len as u8));
        }
        let longest = alts.iter().map(|a| u64::from(a.2)).max().unwrap_or(0);
        while (self.text.bytes.len() as u64 - at) < longest {
            self.text.bytes.push(0x90);
        }
        let orig_len = (self.text.bytes.len() as u64 - at) as u8;
        for (from, n, len) in alts {
            self.entries.push((at, from, n, orig_len, len));
        }
    }
}

/// The x86 relocatable object of `src` with `layout`'s entries.
fn assemble(src: &str, layout: Layout) -> Vec<u8> {
    let names = FeatureNames::parse_x86(CPUFEATURES);
    let mut u = Unit::default();
    for l in src.lines() {
        u.line(l, &names);
    }
    let mut o = WObject::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
    let text = o.add_section(vec![], b".text".to_vec(), SectionKind::Text);
    let repl = o.add_section(vec![], b".altinstr_replacement".to_vec(), SectionKind::Text);
    let alt = o.add_section(
        vec![],
        b".altinstructions".to_vec(),
        SectionKind::ReadOnlyData,
    );
    o.append_section_data(text, &u.text.bytes, 16);
    o.append_section_data(repl, &u.repl.bytes, 1);
    let mut syms: BTreeMap<String, SymbolId> = BTreeMap::new();
    let ends: Vec<u64> = u.functions.iter().skip(1).map(|f| f.1).collect();
    for (i, (name, at)) in u.functions.iter().enumerate() {
        let end = ends.get(i).copied().unwrap_or(u.text.bytes.len() as u64);
        let id = o.add_symbol(symbol(name, Some(text), *at, end - at));
        syms.insert(name.clone(), id);
    }
    for (sec, code) in [(text, &u.text), (repl, &u.repl)] {
        for (at, target) in &code.relocs {
            let id = *syms
                .entry(target.clone())
                .or_insert_with(|| o.add_symbol(symbol(target, None, 0, 0)));
            o.add_relocation(sec, pc32(*at, id, -4)).unwrap();
        }
    }
    let (text_sym, repl_sym) = (o.section_symbol(text), o.section_symbol(repl));
    for (i, &(orig, from, n, ol, rl)) in u.entries.iter().enumerate() {
        let mut e = vec![0u8; 8];
        e.extend(n.to_le_bytes());
        if layout == Layout::X86FtFlags {
            e.extend(0u16.to_le_bytes());
        }
        e.extend([ol, rl]);
        let base = (i * layout.entry_size()) as u64;
        o.append_section_data(alt, &e, 1);
        o.add_relocation(alt, pc32(base, text_sym, orig as i64))
            .unwrap();
        o.add_relocation(alt, pc32(base + 4, repl_sym, from as i64))
            .unwrap();
    }
    o.write().unwrap()
}

fn symbol(name: &str, section: Option<object::write::SectionId>, value: u64, size: u64) -> Symbol {
    Symbol {
        name: name.as_bytes().to_vec(),
        value,
        size,
        kind: if section.is_some() {
            SymbolKind::Text
        } else {
            SymbolKind::Unknown
        },
        scope: SymbolScope::Linkage,
        weak: false,
        section: section.map_or(SymbolSection::Undefined, SymbolSection::Section),
        flags: SymbolFlags::None,
    }
}

fn pc32(offset: u64, symbol: SymbolId, addend: i64) -> Relocation {
    Relocation {
        offset,
        symbol,
        addend,
        flags: RelocationFlags::Elf {
            r_type: object::elf::R_X86_64_PC32,
        },
    }
}

/// A synthetic tree: its routines' sources, the C that chooses
/// clear_page (6.x) and its amd.c.
struct Tree {
    asm: String,
    layout: Layout,
    page_64_h: Option<&'static str>,
    amd_c: &'static str,
}

impl Tree {
    fn v61() -> Tree {
        Tree {
            asm: [STRING_61, COPY_PAGE, CLEAR_PAGE_6X].concat(),
            layout: Layout::X86Cpuid16,
            page_64_h: Some(PAGE_64_H),
            amd_c: AMD_61,
        }
    }

    fn v612() -> Tree {
        Tree {
            asm: [STRING_612, COPY_PAGE, CLEAR_PAGE_6X].concat(),
            layout: Layout::X86FtFlags,
            page_64_h: Some(PAGE_64_H),
            amd_c: AMD_612,
        }
    }

    fn v7x() -> Tree {
        Tree {
            asm: [STRING_612, COPY_PAGE, CLEAR_PAGES_7X].concat(),
            layout: Layout::X86FtFlags,
            page_64_h: None,
            amd_c: AMD_612,
        }
    }

    /// "clear_page rep (REP_GOOD, ...), memset orig (no FSRS), ..." on `cpu`.
    fn picks(&self, cpu: &GuestCpu) -> Vec<Pick> {
        let img = Image::from_elf(&assemble(&self.asm, self.layout), None).expect("parses");
        let names = FeatureNames::parse_x86(CPUFEATURES);
        let amd = Vendor::Amd.setup_file();
        let setup = CpuSetup {
            files: vec![amd.into()],
            implied: crate::setup::parse(self.amd_c, "init_amd", amd).expect("init_amd"),
        };
        let choice = self
            .page_64_h
            .and_then(|h| CallChoice::parse(h, "clear_page", "asm/page_64.h"));
        let code = TreeCode {
            arch: Arch::X86_64,
            link_config: LinkConfig::Vanilla,
            clear_page: match self.page_64_h {
                Some(_) => ClearPageShape::OutOfLine,
                None => ClearPageShape::Inline,
            },
            img: &img,
            names: &names,
            clear_page_choice: choice.as_ref(),
            cpu_setup: Some(&setup),
        };
        kernel_picks(&code, cpu).expect("applies")
    }

    /// The variant of each family, in clear_page, memset, memcpy,
    /// copy_page order ("?" where unknown).
    fn variants(&self, cpu: &GuestCpu) -> [String; 4] {
        let p = self.picks(cpu);
        let v = |f: Family| match &p.iter().find(|p| p.family == f).expect("picked").decision {
            Decision::Builtin { variant, .. } => variant.to_string(),
            _ => "?".into(),
        };
        [
            v(Family::ClearPage),
            v(Family::Memset),
            v(Family::Memcpy),
            v(Family::CopyPage),
        ]
    }
}

fn cpu(vendor: Option<Vendor>, features: &[&str]) -> GuestCpu {
    GuestCpu {
        features: features.iter().map(|s| s.to_string()).collect(),
        vendor,
    }
}

/// This EPYC's guest under PVM: KVM hides ERMS and FSRM; REP_GOOD is
/// synthesized for AMD family >= 0x10.
fn pvm_guest() -> GuestCpu {
    cpu(Some(Vendor::Amd), &["always", "rep_good"])
}

#[test]
fn a_61_like_tree_picks_by_rep_good_and_erms() {
    let t = Tree::v61();
    // What the hand table said for 6.1 on this guest, now read from the tree.
    assert_eq!(
        t.variants(&pvm_guest()),
        ["rep", "rep_good", "rep_good", "rep"]
    );
    let line = picks_line(&t.picks(&pvm_guest()));
    assert!(
        line.starts_with("clear_page rep (REP_GOOD, alternative_call_2 in asm/page_64.h), memset rep_good (REP_GOOD)"),
        "{line}"
    );
    let host = cpu(Some(Vendor::Amd), &["erms", "fsrm", "rep_good"]);
    assert_eq!(t.variants(&host), ["erms", "erms", "fsrm", "rep"]);
    let none = cpu(None, &[]);
    assert_eq!(t.variants(&none), ["orig", "orig", "orig", "regs"]);
    let line = picks_line(&t.picks(&none));
    assert!(line.contains("memset orig (no REP_GOOD, ERMS)"), "{line}");
}

#[test]
fn a_612_like_tree_picks_by_fsrs_and_fsrm() {
    let t = Tree::v612();
    assert_eq!(t.variants(&pvm_guest()), ["rep", "orig", "orig", "rep"]);
    let line = picks_line(&t.picks(&pvm_guest()));
    assert!(
        line.contains("memset orig (no FSRS), memcpy orig (no FSRM), copy_page rep (REP_GOOD)"),
        "{line}"
    );
    // The host's view: amd.c's FSRM -> FSRS gives memset its FSRS path,
    // and the line says where FSRS came from.
    let host = cpu(Some(Vendor::Amd), &["erms", "fsrm", "rep_good"]);
    assert_eq!(t.variants(&host), ["erms", "erms", "fsrm", "rep"]);
    let line = picks_line(&t.picks(&host));
    assert!(
        line.contains("memset erms (FSRS (arch/x86/kernel/cpu/amd.c sets it from FSRM))"),
        "{line}"
    );
    // Intel without FSRS: no such rule runs for it.
    let intel = cpu(Some(Vendor::Intel), &["erms", "fsrm", "rep_good"]);
    let p = picks_for_vendor_files(&Tree::v612(), &intel);
    assert_eq!(p[1], "memset orig (no FSRS)");
    // The same tree without the implication (a tree between the FSRS
    // memset and amd.c's rule): AMD with FSRM keeps memset_orig.
    let mut no_rule = Tree::v612();
    no_rule.amd_c = AMD_61;
    assert_eq!(no_rule.variants(&host)[1], "orig");
}

/// Picks of `t` on `c` with both amd.c and intel.c read (intel.c with no
/// implication), as text.
fn picks_for_vendor_files(t: &Tree, c: &GuestCpu) -> Vec<String> {
    let img = Image::from_elf(&assemble(&t.asm, t.layout), None).unwrap();
    let names = FeatureNames::parse_x86(CPUFEATURES);
    let (amd, intel) = (Vendor::Amd.setup_file(), Vendor::Intel.setup_file());
    let setup = CpuSetup {
        files: vec![amd.into(), intel.into()],
        implied: crate::setup::parse(t.amd_c, "init_amd", amd).unwrap(),
    };
    let choice = CallChoice::parse(PAGE_64_H, "clear_page", "asm/page_64.h");
    let code = TreeCode {
        arch: Arch::X86_64,
        link_config: LinkConfig::Vanilla,
        clear_page: ClearPageShape::OutOfLine,
        img: &img,
        names: &names,
        clear_page_choice: choice.as_ref(),
        cpu_setup: Some(&setup),
    };
    let p = kernel_picks(&code, c).unwrap();
    p.iter().map(Pick::to_string).collect()
}

#[test]
fn a_7x_like_tree_picks_its_inline_clear_pages_path() {
    let t = Tree::v7x();
    assert_eq!(t.variants(&pvm_guest()), ["rep", "orig", "orig", "rep"]);
    let host = cpu(Some(Vendor::Amd), &["erms", "fsrm", "rep_good"]);
    assert_eq!(t.variants(&host), ["erms", "erms", "fsrm", "rep"]);
    let none = cpu(None, &[]);
    assert_eq!(t.variants(&none), ["orig", "orig", "orig", "regs"]);
    let line = picks_line(&t.picks(&none));
    assert!(
        line.starts_with("clear_page orig (no REP_GOOD, ERMS)"),
        "{line}"
    );
}

#[test]
fn shapes_the_reading_does_not_know_are_unknown() {
    // clear_page() not chosen by alternative_call_2: unknown, not guessed.
    let mut t = Tree::v612();
    t.page_64_h =
        Some("static inline void clear_page(void *page)\n{\n\tmemset(page, 0, 4096);\n}\n");
    assert_eq!(t.variants(&pvm_guest())[0], "?");
    let line = picks_line(&t.picks(&pvm_guest()));
    assert!(
        line.starts_with("clear_page unknown (asm/page_64.h's choice"),
        "{line}"
    );
    // A memset path no built-in follows (an AVX-512 routine).
    let mut t = Tree::v612();
    t.asm = t.asm.replace(
        r#"ALTERNATIVE "jmp memset_orig", "", X86_FEATURE_FSRS"#,
        r#"ALTERNATIVE "jmp memset_orig", "jmp memset_avx512", X86_FEATURE_AVX512F"#,
    ) + "SYM_FUNC_START_LOCAL(memset_avx512)\n\tRET\n";
    let avx = cpu(Some(Vendor::Amd), &["avx512f", "rep_good"]);
    let p = t.picks(&avx);
    assert_eq!(
        p[1].to_string(),
        "memset unknown (memset_avx512, AVX512F: no built-in runs this path)"
    );
    assert_eq!(t.variants(&pvm_guest())[1], "orig");
}

#[test]
fn without_the_trees_cpu_setup_the_picks_are_unknown() {
    let t = Tree::v612();
    let img = Image::from_elf(&assemble(&t.asm, t.layout), None).unwrap();
    let names = FeatureNames::parse_x86(CPUFEATURES);
    let mut code = TreeCode {
        arch: Arch::X86_64,
        link_config: LinkConfig::Vanilla,
        clear_page: ClearPageShape::OutOfLine,
        img: &img,
        names: &names,
        clear_page_choice: None,
        cpu_setup: None,
    };
    let p = kernel_picks(&code, &pvm_guest()).unwrap();
    assert_eq!(p.len(), 4);
    assert!(
        p.iter()
            .all(|p| matches!(&p.decision, Decision::Unknown { why } if why.contains("CPU-setup"))),
        "{p:?}"
    );
    // Read, but not the guest vendor's file: unknown as well.
    let setup = CpuSetup::default();
    code.cpu_setup = Some(&setup);
    let p = kernel_picks(&code, &pvm_guest()).unwrap();
    assert!(
        matches!(&p[1].decision, Decision::Unknown { why } if why.contains("init_amd")),
        "{p:?}"
    );
    // The memset configuration has no clear_page of its own.
    code.link_config = LinkConfig::Memset;
    code.cpu_setup = None;
    let p = kernel_picks(&code, &pvm_guest()).unwrap();
    assert!(p.iter().all(|p| p.family != Family::ClearPage));
}
