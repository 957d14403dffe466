//! What a tree's CPU-setup C adds to the features CPUID reports, read from
//! the tree: a statement of a vendor's `init_<vendor>()` (x86
//! arch/x86/kernel/cpu/<vendor>.c) of the shape
//! `if (cpu_has(c, X86_FEATURE_A)) set_cpu_cap(c, X86_FEATURE_B);` at the
//! function's top level says that every such CPU with A also has B (6.12's
//! amd.c: FSRM implies FSRS; 6.1 has no such statement).
//!
//! Only that shape is read: a statement nested in another condition (a
//! family check, a block, an `#ifdef`) applies to some CPUs or
//! configurations only, and conditions on
//! anything but one feature are not features' business (x86 REP_GOOD is
//! synthesized from family and signature: a documented CPU rule in
//! `hypclear_arch::x86_64::kernel`). A vendor whose function cannot be
//! found is recorded as not read, and what a CPU of it runs is unknown.
use crate::arch::x86_64::kernel::Vendor;
use crate::tree::Arch;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::Path;

/// One feature the setup code sets whenever another is present.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Implied {
    /// The file it is read from (`arch/x86/kernel/cpu/amd.c`): only a CPU
    /// of that vendor runs it.
    pub file: String,
    /// The feature tested (lowercase, as the tree's feature names).
    pub when: String,
    /// The feature set.
    pub sets: String,
}

/// Why a CPU's setup rules are not known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetupUnknown {
    #[error("the tree's {function}() in {file} could not be read")]
    NotRead {
        file: &'static str,
        function: &'static str,
    },
    #[error(
        "the blob file does not record the tree's CPU-setup rules (made by an older hypclear; \
         make it again)"
    )]
    NotRecorded,
}

/// A tree's CPU-setup rules, as a kernel blob file records them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuSetup {
    /// The setup files whose setup function was read.
    pub files: Vec<String>,
    pub implied: Vec<Implied>,
}

impl CpuSetup {
    /// Read the rules of the tree at `root` for `arch` (arm64 has none: its
    /// capabilities are detected from ID registers and MIDR lists).
    pub fn read(root: &Path, arch: Arch) -> CpuSetup {
        let mut setup = CpuSetup::default();
        if arch != Arch::X86_64 {
            return setup;
        }
        for v in Vendor::ALL {
            let Ok(c) = std::fs::read_to_string(root.join(v.setup_file())) else {
                continue;
            };
            if let Some(implied) = parse(&c, v.setup_function(), v.setup_file()) {
                setup.files.push(v.setup_file().to_string());
                setup.implied.extend(implied);
            }
        }
        setup
    }

    /// `features` as a CPU of `vendor` has them after its setup code, and
    /// the rules that added some; `Err` when that code was not read.
    pub fn apply(
        &self,
        vendor: Option<Vendor>,
        features: &BTreeSet<String>,
    ) -> Result<(BTreeSet<String>, Vec<&Implied>), SetupUnknown> {
        let mut out = features.clone();
        let Some(v) = vendor else {
            return Ok((out, Vec::new()));
        };
        if !self.files.iter().any(|f| f == v.setup_file()) {
            return Err(SetupUnknown::NotRead {
                file: v.setup_file(),
                function: v.setup_function(),
            });
        }
        let mut used = Vec::new();
        // To a fixed point: a set feature may imply another.
        while let Some(i) = self
            .implied
            .iter()
            .filter(|i| i.file == v.setup_file())
            .find(|i| out.contains(&i.when) && !out.contains(&i.sets))
        {
            out.insert(i.sets.clone());
            used.push(i);
        }
        Ok((out, used))
    }
}

/// The feature implications at the top level of C function `function` in
/// `c`; `None` when the function is not there.
pub(crate) fn parse(c: &str, function: &str, file: &str) -> Option<Vec<Implied>> {
    let statements = top_statements(&strip_comments(c), function)?;
    Some(
        statements
            .iter()
            .filter_map(|s| implication(s))
            .map(|(when, sets)| Implied {
                file: file.to_string(),
                when,
                sets,
            })
            .collect(),
    )
}

/// `c` without its `/* */` and `//` comments (a brace in a comment must
/// not count).
fn strip_comments(c: &str) -> String {
    let mut out = String::with_capacity(c.len());
    let mut rest = c;
    while let Some(i) = rest.find('/') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(t) = tail.strip_prefix("/*") {
            rest = t.find("*/").map_or("", |e| &t[e + 2..]);
            out.push(' ');
        } else if tail.starts_with("//") {
            rest = tail.find('\n').map_or("", |e| &tail[e..]);
        } else {
            out.push('/');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

/// The statements directly in the body of `function` (not in a nested
/// block), whitespace collapsed; `None` when its definition is not found.
fn top_statements(c: &str, function: &str) -> Option<Vec<String>> {
    let at = c.find(&format!("void {function}("))?;
    let body = &c[at..];
    let body = &body[body.find('{')? + 1..];
    let (mut depth, mut cur, mut out) = (0usize, String::new(), Vec::new());
    for ch in body.chars() {
        match (ch, depth) {
            ('}', 0) => return Some(out),
            ('{', _) => {
                depth += 1;
                cur.clear();
            }
            ('}', _) => {
                depth -= 1;
                cur.clear();
            }
            (';', 0) => {
                out.push(cur.split_whitespace().collect::<Vec<_>>().join(" "));
                cur.clear();
            }
            (_, 0) => cur.push(ch),
            _ => {}
        }
    }
    None
}

/// `if (cpu_has(c, X86_FEATURE_A)) set_cpu_cap(c, X86_FEATURE_B)` as
/// `("a", "b")`.
fn implication(statement: &str) -> Option<(String, String)> {
    let s: String = statement.chars().filter(|c| !c.is_whitespace()).collect();
    let rest = s.strip_prefix("if(cpu_has(c,X86_FEATURE_")?;
    let (when, rest) = rest.split_once("))")?;
    let sets = rest
        .strip_prefix("set_cpu_cap(c,X86_FEATURE_")?
        .strip_suffix(')')?;
    let ident = |f: &str| !f.is_empty() && f.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    (ident(when) && ident(sets)).then(|| (when.to_ascii_lowercase(), sets.to_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A vendor setup function in the kernel's shape (written for this
    /// test): one top-level implication, others nested or not on a feature.
    const AMD_LIKE: &str = "static void init_amd_zen(struct cpuinfo_x86 *c)\n{\n\
        \tif (cpu_has(c, X86_FEATURE_A))\n\t\tset_cpu_cap(c, X86_FEATURE_B);\n}\n\n\
        static void init_amd(struct cpuinfo_x86 *c)\n{\n\
        \t/* a brace in a comment { does not nest */\n\
        \tif (c->x86 >= 0x10)\n\t\tset_cpu_cap(c, X86_FEATURE_REP_GOOD);\n\n\
        \t/* One feature implies another */\n\
        \tif (cpu_has(c, X86_FEATURE_FSRM))\n\t\tset_cpu_cap(c, X86_FEATURE_FSRS);\n\n\
        \tif (cpu_has(c, X86_FEATURE_XMM2)) {\n\
        \t\tset_cpu_cap(c, X86_FEATURE_LFENCE_RDTSC);\n\t}\n\
        \tswitch (c->x86) {\n\tcase 0x17:\n\
        \t\tif (cpu_has(c, X86_FEATURE_C)) set_cpu_cap(c, X86_FEATURE_D);\n\t}\n\
        \tif (cpu_has(c, X86_FEATURE_E)) set_cpu_cap(c, X86_FEATURE_F); // one line\n}\n";

    fn set(l: &[&str]) -> BTreeSet<String> {
        l.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn only_top_level_single_feature_implications_are_read() {
        let got = parse(AMD_LIKE, "init_amd", "amd.c").expect("init_amd");
        let pairs: Vec<(&str, &str)> = got
            .iter()
            .map(|i| (i.when.as_str(), i.sets.as_str()))
            .collect();
        assert_eq!(pairs, [("fsrm", "fsrs"), ("e", "f")]);
        assert!(parse(AMD_LIKE, "init_intel", "intel.c").is_none());
        // A tree without the statement (6.1-like) implies nothing.
        let old = AMD_LIKE.replace("X86_FEATURE_FSRM))", "X86_FEATURE_FSRM) && 0)");
        let got = parse(&old, "init_amd", "amd.c").expect("init_amd");
        assert!(got.iter().all(|i| i.when != "fsrm"), "{got:?}");
    }

    #[test]
    fn a_cpu_gets_its_own_vendors_implications_only() {
        let file = Vendor::Amd.setup_file();
        let setup = CpuSetup {
            files: vec![file.into()],
            implied: parse(AMD_LIKE, "init_amd", file).expect("init_amd"),
        };
        let (f, used) = setup.apply(Some(Vendor::Amd), &set(&["fsrm"])).unwrap();
        assert!(f.contains("fsrs") && used.len() == 1);
        let (f, used) = setup.apply(Some(Vendor::Amd), &set(&["erms"])).unwrap();
        assert!(!f.contains("fsrs") && used.is_empty());
        // No setup code of its vendor: CPUID's features as they are.
        let (f, _) = setup.apply(None, &set(&["fsrm"])).unwrap();
        assert!(!f.contains("fsrs"));
        // A vendor whose setup code was not read: unknown, with the file.
        let e = setup
            .apply(Some(Vendor::Intel), &set(&["fsrm"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("init_intel") && e.contains("intel.c"), "{e}");
    }
}
