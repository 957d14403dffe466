//! Result files: checked before any work, written in one step (a
//! temporary file beside the target, renamed over it), so a reader or a
//! killed run never sees half a document.
use std::path::Path;

/// A result file that cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Found before the run, by [`precheck_output`].
    #[error("cannot write {path} (fix the path or its permissions; checked before the run)")]
    Unwritable {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("I/O error on {path}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Check, before any work (a check, a build), that an output file can be
/// written the way [`write_atomically`] writes it, leaving nothing behind:
/// a temporary file beside it can be made (and is removed again), and an
/// existing target is not a directory and opens for writing (untouched).
/// Exit 2 naming the path and the OS error otherwise, so a long run never
/// ends with its results lost, and a refused run leaves no empty file.
pub fn precheck_output(path: &Path) -> Result<(), FileError> {
    let err = |source| FileError::Unwritable {
        path: path.display().to_string(),
        source,
    };
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => {
            return Err(err(std::io::Error::from(std::io::ErrorKind::IsADirectory)));
        }
        // A device or a FIFO is written in place.
        Ok(m) if !m.is_file() => {
            return std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map(drop)
                .map_err(err);
        }
        Ok(_) => {
            std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(err)?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(e)),
    }
    temp_beside(path).map(drop).map_err(err)
}

/// A new temporary file in the target's directory (a rename from there is
/// atomic), named after it, readable as a file created normally would be.
fn temp_beside(path: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    use std::os::unix::fs::PermissionsExt;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(path.file_name().unwrap_or_default());
    prefix.push(".tmp-");
    tempfile::Builder::new()
        .prefix(&prefix)
        // The umask applies, as for File::create.
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)
}

/// Version of every JSON document hypclear writes (the `schema_version`
/// field). Bump it when a field changes meaning or disappears; adding fields
/// keeps it. Documents without the field are version 0 (before it existed)
/// and still load.
pub(crate) const SCHEMA_VERSION: u64 = 1;

/// Write `value` (a JSON object: a map or a struct) as pretty JSON to
/// `path`, stamped with [`SCHEMA_VERSION`]. It is serialized straight into
/// the file (no intermediate `Value` or `String`: a `run` document holds
/// tens of thousands of records).
pub fn write_json<T: serde::Serialize + ?Sized>(path: &Path, value: &T) -> Result<(), FileError> {
    #[derive(serde::Serialize)]
    struct Stamped<'a, T: ?Sized> {
        schema_version: u64,
        #[serde(flatten)]
        doc: &'a T,
    }
    let io = |source| FileError::Io {
        path: path.display().to_string(),
        source,
    };
    write_atomically(path, |w| {
        let doc = Stamped {
            schema_version: SCHEMA_VERSION,
            doc: value,
        };
        serde_json::to_writer_pretty(&mut *w, &doc).map_err(std::io::Error::other)?;
        w.write_all(b"\n")
    })
    .map_err(io)
}

/// Replace a regular file in one step: write a temporary file beside it,
/// then rename it over the target, so a reader (or a run killed by SIGKILL
/// or the OOM killer mid-write) sees the old or the new contents, never
/// half of them; a failed write removes the temporary file. Anything else
/// (a device, a FIFO) is written in place.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    use std::io::Write;
    let regular = match std::fs::metadata(path) {
        Ok(m) => m.is_file(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(e) => return Err(e),
    };
    if !regular || path.file_name().is_none() {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
        write(&mut w)?;
        return w.flush();
    }
    let tmp = temp_beside(path)?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, tmp);
    write(&mut w)?;
    let tmp = w
        .into_inner()
        .map_err(std::io::IntoInnerError::into_error)?;
    tmp.persist(path).map(drop).map_err(|e| e.error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_replaced_in_one_step_without_leftovers() {
        let dir = std::env::temp_dir().join(format!("hypclear-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("out.json");
        std::fs::write(&p, "old").unwrap();
        write_json(&p, &serde_json::json!({"cells": [1, 2]})).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        assert_eq!(v["cells"][1], 2);
        assert_eq!(v["schema_version"], SCHEMA_VERSION);
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["out.json"], "temporary file left behind");
        // A directory as the target: the error names it, nothing is left.
        assert!(write_json(&dir, &serde_json::json!({})).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
