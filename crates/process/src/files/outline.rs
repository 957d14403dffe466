//! JSON laid out for both readers: the document's fields, and each element
//! of its arrays (a check record, a session's run), one to a line, each
//! element compact on its line. Fully pretty JSON spent a line on every
//! field of every record: a default `run` wrote 26 MB for 55,000 checks and
//! the checkpoints rewrote it every second.
use serde_json::ser::Formatter;
use std::io::{self, Write};

/// Levels laid out a line per value: the root object and the arrays and
/// objects directly in it.
const LINED: usize = 2;

#[derive(Debug, Default)]
pub(super) struct Outline {
    /// Containers open around the next value.
    depth: usize,
    /// The innermost open container has a value (so its end goes on a
    /// line of its own).
    has_value: bool,
}

impl Outline {
    /// A new line indented for `depth`, or a space between compact values.
    fn break_at<W: ?Sized + Write>(w: &mut W, depth: usize, first: bool) -> io::Result<()> {
        if depth <= LINED {
            w.write_all(b"\n")?;
            (0..depth).try_for_each(|_| w.write_all(b"  "))
        } else if first {
            Ok(())
        } else {
            w.write_all(b" ")
        }
    }

    fn open<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(bracket)
    }

    fn close<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        let depth = self.depth;
        self.depth = depth.saturating_sub(1);
        if self.has_value && depth <= LINED {
            Self::break_at(w, self.depth, false)?;
        }
        w.write_all(bracket)
    }

    fn element<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if !first {
            w.write_all(b",")?;
        }
        Self::break_at(w, self.depth, first)
    }
}

impl Formatter for Outline {
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"[")
    }

    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"]")
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.element(w, first)
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"{")
    }

    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"}")
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.element(w, first)
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

/// Serialize `value` into `w` with the [`Outline`] layout.
pub(super) fn to_writer<W: Write, T: serde::Serialize + ?Sized>(
    w: W,
    value: &T,
) -> serde_json::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(w, Outline::default());
    value.serialize(&mut ser)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outline(v: &serde_json::Value) -> String {
        let mut out = Vec::new();
        to_writer(&mut out, v).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn fields_and_records_get_a_line_each_and_parse_back() {
        let v = serde_json::json!({
            "a": 1,
            "empty": [],
            "none": {},
            "host": {"arch": "x86_64", "cpus": 2},
            "checks": [{"size": 0, "breakdown": {"x": 0, "y": [1, 2]}}, {"size": 1}],
        });
        let text = outline(&v);
        assert_eq!(
            text,
            // (a Value's keys come sorted)
            "{\n  \"a\": 1,\n  \"checks\": [\n    {\"breakdown\": {\"x\": 0, \"y\": [1, 2]}, \
             \"size\": 0},\n    {\"size\": 1}\n  ],\n  \"empty\": [],\n  \"host\": {\n    \
             \"arch\": \"x86_64\",\n    \"cpus\": 2\n  },\n  \"none\": {}\n}"
        );
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn scalars_and_deep_documents_round_trip() {
        for v in [
            serde_json::json!(null),
            serde_json::json!("a \"quoted\"\nline"),
            serde_json::json!([[[[1]]], {"k": [{"deep": [[], {}]}]}]),
        ] {
            let text = outline(&v);
            assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), v);
        }
    }
}
