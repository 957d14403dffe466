//! The one sanitizer for text hypclear did not write itself: strings from
//! input files (`compare`'s JSON, kernel trees) and from the guest (its log
//! lines) pass [`sanitize`] / [`sanitize_str`] before any terminal, KTAP,
//! rst, markdown or CSV output, so a file or a guest cannot move the
//! cursor, retitle the terminal, reorder text (bidi overrides) or forge a
//! line (a newline inside a table cell).
use std::borrow::Cow;

/// Whether `c` must not reach a terminal as is: C0 and C1 controls (ESC,
/// CSI, CR, LF, NUL, BEL, DEL…), the bidi embeddings, overrides, isolates
/// and marks, and the Unicode line and paragraph separators.
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// Bytes made safe: one line of printable text, each unsafe character shown
/// as `\xNN` (below U+0100) or `\u{NNNN}`, and each byte that is not UTF-8
/// as `\xNN`. The result contains no unsafe character, so sanitizing again
/// changes nothing.
pub fn sanitize(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        push_clean(&mut out, chunk.valid());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// [`sanitize`] for a string; borrows it when there is nothing to escape
/// (the common case: no copy per table cell).
pub fn sanitize_str(text: &str) -> Cow<'_, str> {
    if text.chars().any(unsafe_char) {
        let mut out = String::with_capacity(text.len() + 8);
        push_clean(&mut out, text);
        Cow::Owned(out)
    } else {
        Cow::Borrowed(text)
    }
}

fn push_clean(out: &mut String, text: &str) {
    for c in text.chars() {
        if unsafe_char(c) {
            let n = c as u32;
            if n < 0x100 {
                out.push_str(&format!("\\x{n:02x}"));
            } else {
                out.push_str(&format!("\\u{{{n:04x}}}"));
            }
        } else {
            out.push(c);
        }
    }
}

/// A list for a message, bounded: the first [`LIST_MAX`] items joined with
/// `sep`, then "and N more", so a damaged input with thousands of items
/// gives a message a person reads, not a megabyte.
pub fn bounded_list<S: AsRef<str>>(items: &[S], sep: &str) -> String {
    let mut out = items
        .iter()
        .take(LIST_MAX)
        .map(|s| s.as_ref())
        .collect::<Vec<_>>()
        .join(sep);
    if items.len() > LIST_MAX {
        out.push_str(&format!("{sep}and {} more", items.len() - LIST_MAX));
    }
    out
}

/// Items [`bounded_list`] names before "and N more".
pub const LIST_MAX: usize = 10;

/// `text` cut to at most `max` characters (for `max` of 30 or more), the
/// cut marked with the whole length: a damaged input's megabyte string
/// gives a message a person reads. Clipping again changes nothing.
pub fn clip(text: &str, max: usize) -> Cow<'_, str> {
    if text.chars().nth(max).is_none() {
        return Cow::Borrowed(text);
    }
    let tail = format!("... ({} bytes)", text.len());
    let keep = max.saturating_sub(tail.chars().count());
    let cut = text.char_indices().nth(keep).map_or(text.len(), |(i, _)| i);
    Cow::Owned(format!("{}{tail}", &text[..cut]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_escape_and_bidi_characters_are_shown_escaped() {
        let s = sanitize(b"a\x1b]0;x\x07\r\nhypclear run: PASS\0\xc2\x9b\xe2\x80\xae\xff");
        assert!(!s.chars().any(unsafe_char), "{s:?}");
        assert!(s.contains("\\x1b") && s.contains("\\x0d") && s.contains("\\x0a"));
        assert!(s.contains("\\x9b") && s.contains("\\u{202e}") && s.ends_with("\\xff"));
        for c in ['\u{2028}', '\u{2067}', '\u{200f}', '\u{061c}', '\x7f'] {
            assert!(unsafe_char(c), "{c:?}");
        }
        // Idempotent, and clean text is borrowed unchanged.
        assert_eq!(sanitize_str(&s), s);
        assert!(matches!(sanitize_str("erms 4KB ü"), Cow::Borrowed(_)));
        assert_eq!(sanitize_str("x\n(I) forged row"), "x\\x0a(I) forged row");
    }

    #[test]
    fn lists_stop_after_ten_items() {
        let items: Vec<String> = (0..18_724).map(|i| format!("cell {i}")).collect();
        let s = bounded_list(&items, "; ");
        assert!(s.starts_with("cell 0; cell 1;") && s.ends_with("; cell 9; and 18714 more"));
        assert_eq!(bounded_list(&items[..3], ", "), "cell 0, cell 1, cell 2");
    }

    #[test]
    fn clip_cuts_at_a_character_and_says_how_long() {
        assert!(matches!(clip("abc", 3), Cow::Borrowed("abc")));
        let long = "äöü".repeat(100);
        let c = clip(&long, 40);
        assert_eq!(c, format!("{}... (600 bytes)", &long[..2 * 25]));
        assert_eq!(c.chars().count(), 40);
        assert!(matches!(clip(&c, 40), Cow::Borrowed(_)));
    }
}
