//! The variant catalogue, generated at build time: a routine variant is its
//! `guest/<arch>/lib/<file>.S` plus one `HYP_ALIAS` line in
//! `guest/<arch>/aliases.h`, nothing else.
//!
//! Each routine file starts its contract comment with three lines:
//!
//! ```text
//!  * Variant:  <family> <name>
//!  * Requires: <CpuCaps feature> | -
//!  * Follows:  <kernel file, routine, versions, path> | none (not kernel code)
//! ```
//!
//! A memcpy that is also memmove (safe for overlapping buffers either
//! way, as arm64's `memcpy.S` is) says so on a fourth line,
//! `* Overlap:  memmove`; the suite then checks overlapping copies too.
//!
//! The alias list decides which variants exist and their order; the header
//! gives their family, name, requirement and the kernel code they follow.
//! Every alias must be declared by exactly one header and every header must
//! have its alias (`<family>_<name>`, `-` written `_`), except
//! `clear_pages_<v>`, the page-extent entry of `clear_page_<v>`.
//!
//! Used by the guest's build script; it takes text, not files.

use std::fmt::Write as _;

/// A routine family: the routines with a variant list of their own
/// (`clear_pages` shares clear_page's variants, so it is not one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    ClearPage,
    Memset,
    Memcpy,
    CopyPage,
}

impl Family {
    pub const ALL: [Family; 4] = [
        Family::ClearPage,
        Family::Memset,
        Family::Memcpy,
        Family::CopyPage,
    ];

    /// The name in headers, alias names and output (`clear_page`).
    pub fn name(self) -> &'static str {
        match self {
            Family::ClearPage => "clear_page",
            Family::Memset => "memset",
            Family::Memcpy => "memcpy",
            Family::CopyPage => "copy_page",
        }
    }

    /// The family called `name`, if there is one.
    pub fn from_name(name: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// As its name (`"clear_page"`), as the JSON always had it.
impl serde::Serialize for Family {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A variant of a routine family on this architecture: `family` + `_` +
/// `name` (with `-` as `_`) is its alias in `guest/<arch>/aliases.h`.
/// The built-in tables are generated from the guest sources
/// (this module).
#[derive(Debug, Clone, Copy)]
pub struct VariantDef {
    pub family: Family,
    pub name: &'static str,
    /// CPU feature (as named by the architecture's `CpuCaps`) the variant needs.
    pub requires: Option<&'static str>,
    /// The kernel code it follows (file, routine, versions, path taken);
    /// `None`: not kernel code, a hypclear comparison point.
    pub kernel: Option<&'static str>,
    /// The kernel paths it runs, as a tree's code names them (`Paths:`):
    /// a function (`memset_orig`) or a function with the alternative it
    /// takes (`memset+fsrs`), leading `_` and `__pi_` dropped. A kernel
    /// blob's path is lined up with the built-in that lists it.
    pub paths: &'static [&'static str],
    /// A memcpy that is memmove too: overlapping copies are checked.
    pub memmove: bool,
}

/// What a routine file's header declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub family: Family,
    pub name: String,
    /// A `CpuCaps` feature name, or `None` for `-`.
    pub requires: Option<String>,
    /// The kernel code it follows, or `None` for `none (...)`.
    pub follows: Option<String>,
    /// `Paths: memset+fsrs memset_erms` (optional): the kernel paths it runs.
    pub paths: Vec<String>,
    /// `Overlap: memmove`: overlapping buffers are copied correctly.
    pub memmove: bool,
}

/// The alias-table name of variant `name` of `family` (`copy_page`,
/// `ldp-stnp` -> `copy_page_ldp_stnp`): the one spelling, for the
/// catalogue, the guest command and the tests.
pub fn alias_name(family: &str, name: &str) -> String {
    format!("{family}_{}", name.replace('-', "_"))
}

impl Header {
    /// The alias-table name of the variant.
    pub fn alias(&self) -> String {
        alias_name(self.family.name(), &self.name)
    }
}

/// Why the catalogue cannot be built; each names the file and the fix.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CatalogError {
    #[error(
        "{origin}: the contract comment must start with `Variant: <family> <name>`, `Requires: <feature>|-` and `Follows: <kernel code>|none (...)`; {what}"
    )]
    Header { origin: String, what: String },
    #[error(
        "alias `{alias}` in {aliases} has no routine file declaring it (add `Variant: <family> <name>` to its lib/*.S header, or remove the alias line)"
    )]
    Undeclared { alias: String, aliases: String },
    #[error(
        "{origin} declares variant `{alias}` but {aliases} has no `HYP_ALIAS({alias}, ...)` line: add one"
    )]
    NoAlias {
        origin: String,
        alias: String,
        aliases: String,
    },
    #[error("{first} and {second} both declare variant `{alias}`: rename one")]
    Duplicate {
        alias: String,
        first: String,
        second: String,
    },
}

/// The value after `key:` on the first of the header's first 12 lines (in
/// the `*` comment) that has the key, unless it is empty.
fn header_field(text: &str, key: &str) -> Option<String> {
    text.lines()
        .take(12)
        .find_map(|l| {
            l.trim_start()
                .strip_prefix('*')
                .map(str::trim)
                .and_then(|l| l.strip_prefix(key))
                .and_then(|l| l.strip_prefix(':'))
                .map(|v| v.trim().to_string())
        })
        .filter(|v| !v.is_empty())
}

/// A family, variant or feature name: lowercase letters, digits, `_` and
/// `-` (which the callers refuse where it does not belong).
fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// A `Paths:` entry: `<function>` or `<function>+<feature>`, neither with
/// a `-`.
fn is_path(p: &str) -> bool {
    let (f, feature) = p.split_once('+').unwrap_or((p, "x"));
    is_name(f) && !f.contains('-') && is_name(feature) && !feature.contains('-')
}

/// The header of one routine file (`origin` names it in errors).
pub fn parse_header(text: &str, origin: &str) -> Result<Header, CatalogError> {
    let err = |what: String| CatalogError::Header {
        origin: origin.to_string(),
        what,
    };
    let field = |key: &str| -> Result<String, CatalogError> {
        header_field(text, key).ok_or_else(|| err(format!("`{key}:` is missing or empty")))
    };
    let variant = field("Variant")?;
    let mut words = variant.split_whitespace();
    let (Some(family), Some(name), None) = (words.next(), words.next(), words.next()) else {
        return Err(err(format!(
            "`Variant: {variant}` is not `<family> <name>`"
        )));
    };
    if !is_name(family) || !is_name(name) || family.contains('-') {
        return Err(err(format!(
            "`Variant: {variant}`: names are lowercase letters, digits, `_` (and `-` in the variant name)"
        )));
    }
    let requires = match field("Requires")?.as_str() {
        "-" => None,
        f if is_name(f) => Some(f.to_string()),
        f => return Err(err(format!("`Requires: {f}` is not a feature name or `-`"))),
    };
    let follows = field("Follows")?;
    let follows = (!follows.starts_with("none")).then_some(follows);
    let paths: Vec<String> = field("Paths")
        .map(|v| v.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    if let Some(p) = paths.iter().find(|p| !is_path(p)) {
        return Err(err(format!(
            "`Paths: {p}` is not `<function>` or `<function>+<feature>` (lowercase, `_`)"
        )));
    }
    if !paths.is_empty() && follows.is_none() {
        return Err(err("`Paths:` without kernel code in `Follows:`".into()));
    }
    let memmove = match field("Overlap") {
        Ok(v) if v.split_whitespace().next() == Some("memmove") => true,
        Ok(v) => return Err(err(format!("`Overlap: {v}` is not `memmove`"))),
        Err(_) => false,
    };
    let Some(family) = Family::from_name(family) else {
        return Err(err(format!(
            "`Variant: {variant}`: `{family}` is not a routine family ({})",
            Family::ALL.map(Family::name).join(", ")
        )));
    };
    Ok(Header {
        family,
        name: name.to_string(),
        requires,
        follows,
        paths,
        memmove,
    })
}

/// The variants in alias-list order, checked against each other.
pub fn catalog(
    headers: &[(String, Header)],
    aliases: &[String],
    aliases_origin: &str,
) -> Result<Vec<Header>, CatalogError> {
    for (i, (origin, h)) in headers.iter().enumerate() {
        if let Some((first, _)) = headers[..i].iter().find(|(_, o)| o.alias() == h.alias()) {
            return Err(CatalogError::Duplicate {
                alias: h.alias(),
                first: first.clone(),
                second: origin.clone(),
            });
        }
        if !aliases.contains(&h.alias()) {
            return Err(CatalogError::NoAlias {
                origin: origin.clone(),
                alias: h.alias(),
                aliases: aliases_origin.to_string(),
            });
        }
    }
    let mut out = Vec::new();
    for alias in aliases {
        if let Some((_, h)) = headers.iter().find(|(_, h)| &h.alias() == alias) {
            out.push(h.clone());
            continue;
        }
        let extent_of = alias
            .strip_prefix("clear_pages_")
            .map(|v| format!("clear_page_{v}"));
        if !extent_of.is_some_and(|a| headers.iter().any(|(_, h)| h.alias() == a)) {
            return Err(CatalogError::Undeclared {
                alias: alias.clone(),
                aliases: aliases_origin.to_string(),
            });
        }
    }
    Ok(out)
}

/// Rust source of a `&[VariantDef]` expression for `variants`.
pub fn render(variants: &[Header], sources: &str) -> String {
    let opt = |v: &Option<String>| match v {
        Some(s) => format!("Some({s:?})"),
        None => "None".to_string(),
    };
    let mut s = format!("// Generated by build.rs from {sources}: do not edit.\n&[\n");
    for v in variants {
        let _ = writeln!(
            s,
            "    VariantDef {{ family: Family::{:?}, name: {:?}, requires: {}, kernel: {}, paths: &{:?}, memmove: {} }},",
            v.family,
            v.name,
            opt(&v.requires),
            opt(&v.follows),
            v.paths,
            v.memmove
        );
    }
    s.push_str("]\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(variant: &str, requires: &str, follows: &str) -> String {
        format!(
            "/* SPDX-License-Identifier: MIT */\n/*\n * Variant:  {variant}\n * Requires: {requires}\n * Follows:  {follows}\n *\n * text\n */\n"
        )
    }

    #[test]
    fn paths_name_kernel_functions_and_their_alternatives() {
        let with = |paths: &str, follows: &str| {
            let text = file("memset erms", "-", follows)
                .replace(" *\n * text", &format!(" * Paths:    {paths}\n *\n * text"));
            parse_header(&text, "m.S")
        };
        let h = with("memset+fsrs memset_erms", "arch/x86/lib/memset_64.S").unwrap();
        assert_eq!(h.paths, ["memset+fsrs", "memset_erms"]);
        assert!(with("memset+FSRS", "k").is_err(), "features are lowercase");
        assert!(with("memset+", "k").is_err());
        assert!(with("memset-erms", "k").is_err());
        assert!(with("memset_orig", "none (not kernel code)").is_err());
        assert!(
            parse_header(&file("memset nt", "-", "k"), "n.S")
                .unwrap()
                .paths
                .is_empty()
        );
    }

    #[test]
    fn a_header_gives_family_name_requirement_and_kernel_code() {
        let h = parse_header(
            &file("copy_page ldp-stnp", "mops", "arch/arm64/lib/copy_page.S"),
            "x.S",
        )
        .unwrap();
        assert_eq!(h.family, Family::CopyPage);
        assert_eq!(h.name, "ldp-stnp");
        assert_eq!(h.alias(), "copy_page_ldp_stnp");
        assert_eq!(h.requires.as_deref(), Some("mops"));
        assert_eq!(h.follows.as_deref(), Some("arch/arm64/lib/copy_page.S"));
        assert!(!h.memmove);
        let h = parse_header(&file("memset nt", "-", "none (not kernel code)"), "y.S").unwrap();
        assert_eq!((h.requires, h.follows), (None, None));
        let text = file("memcpy g", "-", "x").replace(
            " *\n * text",
            " * Overlap:  memmove (x1 may overlap)\n * text",
        );
        assert!(parse_header(&text, "z.S").unwrap().memmove);
        let bad = text.replace("memmove (x1", "forward (x1");
        assert!(
            parse_header(&bad, "z.S")
                .unwrap_err()
                .to_string()
                .contains("Overlap: forward")
        );
    }

    #[test]
    fn a_bad_header_names_the_file_and_the_line() {
        for (text, what) in [
            (file("memset", "-", "x"), "not `<family> <name>`"),
            (file("memset a b", "-", "x"), "not `<family> <name>`"),
            (file("Memset a", "-", "x"), "lowercase"),
            (file("memset a", "a b", "x"), "Requires: a b"),
            (
                file("memmove a", "-", "x"),
                "`memmove` is not a routine family",
            ),
            (
                "/*\n * Requires: -\n */".to_string(),
                "`Variant:` is missing",
            ),
            (file("memset a", "-", ""), "`Follows:` is missing"),
        ] {
            let e = parse_header(&text, "lib/x.S").unwrap_err().to_string();
            assert!(e.contains("lib/x.S") && e.contains(what), "{e}");
        }
    }

    fn h(family: &str, name: &str) -> (String, Header) {
        (
            format!("lib/{family}_{name}.S"),
            Header {
                family: Family::from_name(family).unwrap(),
                name: name.into(),
                requires: None,
                follows: None,
                paths: Vec::new(),
                memmove: false,
            },
        )
    }

    #[test]
    fn the_alias_list_orders_the_variants_and_both_sides_must_agree() {
        let hs = [h("memset", "b"), h("clear_page", "a"), h("memset", "a")];
        let al = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let ok = catalog(
            &hs,
            &al(&["clear_page_a", "clear_pages_a", "memset_a", "memset_b"]),
            "aliases.h",
        )
        .unwrap();
        let names: Vec<_> = ok.iter().map(Header::alias).collect();
        assert_eq!(names, ["clear_page_a", "memset_a", "memset_b"]);
        // An alias nobody declares, a header without its alias, a duplicate.
        let e = catalog(
            &hs,
            &al(&["clear_page_a", "memset_a", "memset_b", "memset_c"]),
            "al",
        );
        assert!(matches!(e, Err(CatalogError::Undeclared { alias, .. }) if alias == "memset_c"));
        let e = catalog(&hs, &al(&["clear_page_a", "memset_a"]), "al");
        assert!(matches!(e, Err(CatalogError::NoAlias { alias, .. }) if alias == "memset_b"));
        let e = catalog(&hs, &al(&["clear_pages_b"]), "al");
        assert!(matches!(e, Err(CatalogError::NoAlias { .. })));
        let dup = [h("memset", "a"), h("memset", "a")];
        let e = catalog(&dup, &al(&["memset_a"]), "al");
        assert!(matches!(e, Err(CatalogError::Duplicate { .. })));
    }

    #[test]
    fn render_writes_one_definition_per_variant() {
        let mut v = h("memset", "x").1;
        v.requires = Some("erms".into());
        v.follows = Some("arch/x86/lib/memset_64.S \"q\"".into());
        v.paths = vec!["memset+fsrs".into(), "memset_erms".into()];
        let s = render(&[v], "guest");
        assert!(s.contains(
            r#"VariantDef { family: Family::Memset, name: "x", requires: Some("erms"), kernel: Some("arch/x86/lib/memset_64.S \"q\""), paths: &["memset+fsrs", "memset_erms"], memmove: false },"#
        ), "{s}");
    }
}
