//! KTAP version 1 output, as the kernel documents it
//! (Documentation/dev-tools/ktap.rst), so kernel CI (KernelCI, LKFT, LAVA,
//! kselftest runners, `kunit.py parse`) reads hypclear's results natively.
//!
//! The model is a tree of [`Test`]s; [`Document::render`] writes the version
//! line, the plan, nested subtests indented by two spaces each level, result
//! lines `ok N name` / `not ok N name` with `# SKIP reason` directives, and
//! diagnostic lines `# ...` directly before the result they belong to.
//! Everything that comes from elsewhere (names, reasons, diagnostics, and in
//! particular text a guest produced) is sanitized here: no `#` in a name, no
//! newline or control character anywhere.

/// Exit status kselftest uses for "skipped" (tools/testing/selftests/kselftest.h).
pub const KSFT_SKIP: i32 = 4;

/// How one test ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    Fail,
    /// Not run, with the reason (e.g. "no CLZERO on this CPU").
    Skip(String),
}

impl Outcome {
    /// Pass or fail.
    pub fn of(passed: bool) -> Outcome {
        if passed { Outcome::Pass } else { Outcome::Fail }
    }
}

/// One KTAP test: a leaf, or a parent whose result follows from its subtests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Test {
    pub name: String,
    /// The leaf's own outcome; ignored for a parent (see [`Test::outcome`]).
    pub leaf: Outcome,
    /// Diagnostic lines printed right before the result line.
    pub diagnostics: Vec<String>,
    pub subtests: Vec<Test>,
}

/// Leaf counts, as kselftest's `# Totals:` line and `kunit.py parse` count them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub pass: u64,
    pub fail: u64,
    pub skip: u64,
}

impl Test {
    pub fn leaf(name: impl Into<String>, outcome: Outcome) -> Test {
        Test {
            name: name.into(),
            leaf: outcome,
            diagnostics: Vec::new(),
            subtests: Vec::new(),
        }
    }

    pub fn parent(name: impl Into<String>, subtests: Vec<Test>) -> Test {
        Test {
            name: name.into(),
            leaf: Outcome::Pass,
            diagnostics: Vec::new(),
            subtests,
        }
    }

    pub fn with_diagnostics(mut self, lines: impl IntoIterator<Item = String>) -> Test {
        self.diagnostics.extend(lines);
        self
    }

    /// A parent fails if any subtest fails; it is skipped when every subtest
    /// was skipped (the reason of the first), otherwise it passes. This is
    /// the "bubbling up" rule of ktap.rst.
    pub fn outcome(&self) -> Outcome {
        if self.subtests.is_empty() {
            return self.leaf.clone();
        }
        let outcomes: Vec<Outcome> = self.subtests.iter().map(Test::outcome).collect();
        if outcomes.contains(&Outcome::Fail) {
            Outcome::Fail
        } else if let Some(Outcome::Skip(reason)) = outcomes
            .first()
            .filter(|_| outcomes.iter().all(|o| matches!(o, Outcome::Skip(_))))
        {
            Outcome::Skip(reason.clone())
        } else {
            Outcome::Pass
        }
    }

    /// Counts of the leaves under this test (the test itself if it is one).
    pub fn counts(&self) -> Counts {
        if self.subtests.is_empty() {
            let mut c = Counts::default();
            match self.leaf {
                Outcome::Pass => c.pass = 1,
                Outcome::Fail => c.fail = 1,
                Outcome::Skip(_) => c.skip = 1,
            }
            return c;
        }
        self.subtests
            .iter()
            .map(Test::counts)
            .fold(Counts::default(), |a, b| Counts {
                pass: a.pass + b.pass,
                fail: a.fail + b.fail,
                skip: a.skip + b.skip,
            })
    }
}

/// A whole KTAP document: the top-level tests, or nothing ran at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Document {
    Tests(Vec<Test>),
    /// `1..0 # SKIP reason`: e.g. no /dev/kvm on this machine.
    SkipAll(String),
}

impl Document {
    /// Leaf counts over the whole document.
    pub fn counts(&self) -> Counts {
        match self {
            Document::Tests(tests) => Test::parent("", tests.clone()).counts(),
            Document::SkipAll(_) => Counts::default(),
        }
    }

    /// The KTAP text, ending with kselftest's `# Totals:` line.
    pub fn render(&self) -> String {
        let mut out = String::from("KTAP version 1\n");
        match self {
            Document::SkipAll(reason) => {
                out.push_str(&format!("1..0 # SKIP {}\n", sanitize_text(reason)));
            }
            Document::Tests(tests) => {
                render_level(&mut out, tests, 0, false);
                let c = self.counts();
                out.push_str(&format!(
                    "# Totals: pass:{} fail:{} xfail:0 xpass:0 skip:{} error:0\n",
                    c.pass, c.fail, c.skip
                ));
            }
        }
        out
    }
}

fn render_level(out: &mut String, tests: &[Test], depth: usize, version_line: bool) {
    let indent = "  ".repeat(depth);
    if version_line {
        out.push_str(&format!("{indent}KTAP version 1\n"));
    }
    out.push_str(&format!("{indent}1..{}\n", tests.len()));
    for (i, t) in tests.iter().enumerate() {
        if !t.subtests.is_empty() {
            render_level(out, &t.subtests, depth + 1, true);
        }
        for d in &t.diagnostics {
            out.push_str(&format!("{indent}# {}\n", diagnostic(d)));
        }
        let name = sanitize_name(&t.name);
        let line = match t.outcome() {
            Outcome::Pass => format!("ok {} {name}", i + 1),
            Outcome::Fail => format!("not ok {} {name}", i + 1),
            Outcome::Skip(reason) => {
                format!("ok {} {name} # SKIP {}", i + 1, sanitize_text(&reason))
            }
        };
        out.push_str(&indent);
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

/// A diagnostic line's text. One that would read as kselftest's
/// `# Totals:` line, which only [`Document::render`] writes, shows its
/// colon escaped (a guest's or a file's text must not forge the counts).
fn diagnostic(text: &str) -> String {
    let t = sanitize_text(text);
    match t.strip_prefix("Totals:") {
        Some(rest) => format!("Totals\\x3a{rest}"),
        None => t,
    }
}

/// A test name: any text but `#` and line breaks (ktap.rst); control
/// characters and runs of white space become one space.
pub(crate) fn sanitize_name(name: &str) -> String {
    let cleaned = sanitize_text(name).replace('#', "_");
    if cleaned.is_empty() {
        "unnamed".to_string()
    } else {
        cleaned
    }
}

/// Diagnostic or directive text: one line, printable characters only
/// (runs of white space become one space; other control characters and
/// bidi overrides are shown escaped by [`crate::text::sanitize_str`]).
pub(crate) fn sanitize_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = false;
    for ch in text.chars() {
        if ch.is_whitespace() {
            space = !out.is_empty();
        } else {
            if space {
                out.push(' ');
                space = false;
            }
            out.push(ch);
        }
    }
    crate::text::sanitize_str(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Document {
        Document::Tests(vec![
            Test::parent(
                "vanilla",
                vec![
                    Test::parent(
                        "memset",
                        vec![
                            Test::leaf("erms", Outcome::Pass),
                            Test::leaf("orig", Outcome::Fail)
                                .with_diagnostics(["first bad offset 7".to_string()]),
                        ],
                    ),
                    Test::parent(
                        "clear_page",
                        vec![Test::leaf("clzero", Outcome::Skip("no CLZERO".into()))],
                    ),
                ],
            ),
            Test::leaf("memset", Outcome::Pass),
        ])
    }

    #[test]
    fn renders_nested_ktap_with_bubbled_results() {
        let text = sample().render();
        let want = "KTAP version 1\n\
                    1..2\n  \
                    KTAP version 1\n  \
                    1..2\n    \
                    KTAP version 1\n    \
                    1..2\n    \
                    ok 1 erms\n    \
                    # first bad offset 7\n    \
                    not ok 2 orig\n  \
                    not ok 1 memset\n    \
                    KTAP version 1\n    \
                    1..1\n    \
                    ok 1 clzero # SKIP no CLZERO\n  \
                    ok 2 clear_page # SKIP no CLZERO\n\
                    not ok 1 vanilla\n\
                    ok 2 memset\n\
                    # Totals: pass:2 fail:1 xfail:0 xpass:0 skip:1 error:0\n";
        assert_eq!(text, want);
        assert_eq!(
            sample().counts(),
            Counts {
                pass: 2,
                fail: 1,
                skip: 1
            }
        );
    }

    #[test]
    fn skip_all_plan() {
        let d = Document::SkipAll("/dev/kvm\nmissing".into());
        assert_eq!(d.render(), "KTAP version 1\n1..0 # SKIP /dev/kvm missing\n");
        assert_eq!(d.counts(), Counts::default());
    }

    #[test]
    fn hostile_text_cannot_forge_lines() {
        let t = Test::leaf(
            "a#b\nok 9 forged",
            Outcome::Skip("x\r\n\x1b[2Jnot ok 3".into()),
        )
        .with_diagnostics([
            "line\nok 1 fake\x07".to_string(),
            " Totals: pass:99 fail:0".to_string(),
        ]);
        let text = Document::Tests(vec![t]).render();
        assert_eq!(text.matches("# Totals:").count(), 1, "{text}");
        assert!(text.contains("\n# Totals\\x3a pass:99 fail:0\n"), "{text}");
        for line in text.lines() {
            assert!(!line.starts_with("ok 9"), "{text}");
            assert!(!line.starts_with("not ok 3"), "{text}");
            assert!(!line.chars().any(|c| c.is_control()), "{text:?}");
        }
        assert!(
            text.contains("ok 1 a_b ok 9 forged # SKIP x \\x1b[2Jnot ok 3"),
            "{text}"
        );
    }

    #[test]
    fn partial_skips_do_not_skip_the_parent() {
        let p = Test::parent(
            "p",
            vec![
                Test::leaf("a", Outcome::Skip("r".into())),
                Test::leaf("b", Outcome::Pass),
            ],
        );
        assert_eq!(p.outcome(), Outcome::Pass);
        assert_eq!(Test::parent("e", vec![]).outcome(), Outcome::Pass);
    }
}
