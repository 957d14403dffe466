//! Result files and the files hypclear reads back.
//!
//! Writing: every target is checked before any work ([`precheck_output`]);
//! a regular file (or a new name) is replaced in one step: the document is
//! written to an unnamed `O_TMPFILE` in the target's directory (or, where
//! the filesystem has none, a new `.NAME.tmp-PID-N` created with
//! `O_CREAT|O_EXCL|O_NOFOLLOW`), which is then renamed over the target, so
//! a reader or a killed run never sees half a document and a planted
//! symlink is never written through. A FIFO, a terminal or `/dev/stdout`
//! is written in place, once, at the end (opened without blocking, so a
//! FIFO with no reader is refused instead of hanging). Temporary names of
//! processes that have ended are swept at a target's first write.
//!
//! Reading: every read is bounded ([`read_bounded`]), JSON is parsed with
//! duplicate keys refused ([`parse_json`]), and [`PrivateDir`] keeps a
//! per-user cache in a directory only that user can use.
use rustix::fs::{self as rfs, AtFlags, Mode, OFlags};
use rustix::io::Errno;
use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A file that cannot be written or read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Found before the run, by [`precheck_output`].
    #[error("cannot write {} (fix the path or its permissions; checked before the run)", path.display())]
    Unwritable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A target that can never hold the result, found before the run.
    #[error("cannot write {}: {why} (checked before the run; nothing was started)", path.display())]
    BadTarget { path: PathBuf, why: String },
    #[error("I/O error on {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read {}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{} is larger than {} MiB, the most hypclear reads from such a file; \
         is it the right file (not a device, a log or a concatenation)?",
        path.display(),
        limit >> 20
    )]
    TooLarge { path: PathBuf, limit: u64 },
    #[error("{} is not valid JSON: {detail}", path.display())]
    Malformed { path: PathBuf, detail: String },
}

/// The directory and the file name of a result target; a name ending in
/// `/` (or none at all, `..`) is refused: it can only be a directory.
fn split(path: &Path) -> Result<(PathBuf, OsString), FileError> {
    let bad = |why: &str| FileError::BadTarget {
        path: path.to_path_buf(),
        why: why.into(),
    };
    if path.as_os_str().as_bytes().ends_with(b"/") {
        return Err(bad(
            "a name ending in `/` names a directory, not a file; drop the `/` or name a file in it",
        ));
    }
    let name = path
        .file_name()
        .ok_or_else(|| bad("it names no file; name a file (e.g. out.json)"))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((dir, name.to_owned()))
}

/// Whether `path` is written in place (a FIFO, a terminal, `/dev/stdout`)
/// rather than replaced: anything but a regular file, and anything under
/// `/dev` or `/proc` (`/dev/stdout` redirected to a file is the shell's
/// file, never renamed over).
fn in_place(path: &Path) -> std::io::Result<bool> {
    if under_dev_or_proc(path) {
        return Ok(true);
    }
    match std::fs::metadata(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        meta => Ok(in_place_as(path, &meta)),
    }
}

/// [`in_place`] of a target already stat'ed (`meta`: its metadata, or
/// why there is none).
fn in_place_as(path: &Path, meta: &std::io::Result<std::fs::Metadata>) -> bool {
    under_dev_or_proc(path) || meta.as_ref().is_ok_and(|m| !m.is_file())
}

fn under_dev_or_proc(path: &Path) -> bool {
    path.starts_with("/dev") || path.starts_with("/proc")
}

/// In-place targets opened by [`precheck_output`] and kept open until
/// their one write: a FIFO's reader would see end of file if it were
/// closed in between.
static KEPT: std::sync::Mutex<Vec<(PathBuf, std::fs::File)>> = std::sync::Mutex::new(Vec::new());

/// Open an in-place target for writing without blocking (a FIFO without a
/// reader fails at once with ENXIO instead of hanging), then make it
/// blocking again so a slow reader is waited for.
fn open_in_place(path: &Path) -> std::io::Result<std::fs::File> {
    let flags = OFlags::WRONLY | OFlags::APPEND | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd = rfs::open(path, flags | OFlags::NONBLOCK, Mode::empty())?;
    rfs::fcntl_setfl(&fd, rfs::fcntl_getfl(&fd)? - OFlags::NONBLOCK)?;
    Ok(std::fs::File::from(fd))
}

fn take_kept(path: &Path) -> Option<std::fs::File> {
    let mut kept = KEPT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let i = kept.iter().position(|(p, _)| p == path)?;
    Some(kept.swap_remove(i).1)
}

/// How much [`precheck_output`] proves of a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precheck {
    /// Its kind alone, without making a file: a directory, a socket, a
    /// name ending in `/` or a FIFO without a reader is refused (one stat;
    /// a FIFO is opened and kept). run and verify check this much before
    /// their first VM and the rest while it boots.
    Kind,
    /// And that it can be written: an existing file opens for writing, a
    /// new name can be made in its directory (a temporary file, gone again).
    Writable,
}

/// Check, before any work (a check, a build), that an output file can be
/// written the way [`write_atomically`] writes it, leaving nothing behind:
/// a regular file or a new name in an existing writable directory, a FIFO
/// with a reader (kept open for the result), a terminal or `/dev/stdout`.
/// A directory, a name ending in `/`, a FIFO without a reader or a socket
/// exit 2 naming the path, so a long run never ends with its results lost.
/// `how` says how much of that is proved now ([`Precheck`]).
pub fn precheck_output(path: &Path, how: Precheck) -> Result<(), FileError> {
    use std::os::unix::fs::FileTypeExt;
    let bad = |why: &str| FileError::BadTarget {
        path: path.to_path_buf(),
        why: why.into(),
    };
    let unwritable = |source| FileError::Unwritable {
        path: path.to_path_buf(),
        source,
    };
    let (dir, name) = split(path)?;
    let meta = std::fs::metadata(path);
    let place = in_place_as(path, &meta);
    match meta {
        Ok(m) if m.is_dir() => Err(bad(
            "it is a directory; name a file in it (e.g. DIR/out.json)",
        )),
        Ok(m) if m.file_type().is_socket() => Err(bad(
            "it is a socket; name a regular file, a FIFO or /dev/stdout",
        )),
        Ok(m) if place => {
            let mut kept = KEPT
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if kept.iter().any(|(p, _)| p == path) {
                return Ok(());
            }
            let file = open_in_place(path).map_err(|e| match e.raw_os_error() {
                Some(libc::ENXIO) => bad(
                    "it is a FIFO with no reader; start the reader first (e.g. `cat FIFO &`) \
                     or name a file",
                ),
                _ => unwritable(e),
            })?;
            if m.file_type().is_fifo() {
                kept.push((path.to_path_buf(), file));
            }
            Ok(())
        }
        Ok(_) | Err(_) if how == Precheck::Kind => Ok(()),
        Ok(_) => {
            // An existing regular file must open for writing (untouched).
            std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(unwritable)?;
            probe(&dir, &name).map_err(unwritable)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            probe(&dir, &name).map_err(unwritable)
        }
        Err(e) => Err(unwritable(e)),
    }
}

/// A temporary file can be made in `dir` (and is gone again).
fn probe(dir: &Path, name: &OsStr) -> std::io::Result<()> {
    Temp::create(open_dir(dir)?, name).map(drop)
}

fn open_dir(dir: &Path) -> std::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    Ok(rfs::open(dir, flags, Mode::empty())?)
}

/// A temporary file in a directory, removed unless [`Temp::persist`]ed.
struct Temp {
    dir: OwnedFd,
    file: std::fs::File,
    /// The named fallback's name; None for an unnamed `O_TMPFILE`.
    named: Option<OsString>,
}

/// Numbers the temporary names of this process.
static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// `.NAME.tmp-PID-N`: the PID tells [`sweep_stale`] whose it is.
fn temp_name(name: &OsStr) -> OsString {
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut s = OsString::from(".");
    s.push(name);
    s.push(format!(".tmp-{}-{n}{nanos:x}", std::process::id()));
    s
}

/// Mode of new files; the umask applies, as for `File::create`.
const NEW_FILE_MODE: u32 = 0o666;

impl Temp {
    fn create(dir: OwnedFd, name: &OsStr) -> std::io::Result<Temp> {
        let mode = Mode::from_raw_mode(NEW_FILE_MODE);
        // Linking an unnamed file needs /proc/self/fd (or CAP_DAC_READ_SEARCH).
        if Path::new("/proc/self/fd").is_dir() {
            let flags = OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC;
            match rfs::openat(&dir, ".", flags, mode) {
                Ok(fd) => {
                    let file = std::fs::File::from(fd);
                    return Ok(Temp {
                        dir,
                        file,
                        named: None,
                    });
                }
                // The filesystem (or kernel) has no O_TMPFILE.
                Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL | Errno::NOENT) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let (file, tmp) = create_named(&dir, name)?;
        Ok(Temp {
            dir,
            file,
            named: Some(tmp),
        })
    }

    /// Give the file `name` in one step (replacing what was there).
    fn persist(mut self, name: &OsStr) -> std::io::Result<()> {
        let tmp = match self.named.take() {
            Some(tmp) => tmp,
            None => {
                let tmp = temp_name(name);
                let proc_fd = format!("/proc/self/fd/{}", self.file.as_raw_fd());
                rfs::linkat(
                    rfs::CWD,
                    proc_fd.as_str(),
                    &self.dir,
                    tmp.as_os_str(),
                    AtFlags::SYMLINK_FOLLOW,
                )?;
                tmp
            }
        };
        let renamed = rfs::renameat(&self.dir, tmp.as_os_str(), &self.dir, name);
        if renamed.is_err() {
            let _ = rfs::unlinkat(&self.dir, tmp.as_os_str(), AtFlags::empty());
        }
        Ok(renamed?)
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        if let Some(tmp) = &self.named {
            let _ = rfs::unlinkat(&self.dir, tmp.as_os_str(), AtFlags::empty());
        }
    }
}

/// A new `.NAME.tmp-PID-N` in `dir`: `O_EXCL|O_NOFOLLOW`, so nothing that
/// exists there (a planted symlink included) is opened.
fn create_named(dir: &OwnedFd, name: &OsStr) -> std::io::Result<(std::fs::File, OsString)> {
    let flags = OFlags::CREATE
        | OFlags::EXCL
        | OFlags::NOFOLLOW
        | OFlags::WRONLY
        | OFlags::NOCTTY
        | OFlags::CLOEXEC;
    let mut last = Errno::EXIST;
    for _ in 0..100 {
        let tmp = temp_name(name);
        match rfs::openat(
            dir,
            tmp.as_os_str(),
            flags,
            Mode::from_raw_mode(NEW_FILE_MODE),
        ) {
            Ok(fd) => return Ok((std::fs::File::from(fd), tmp)),
            Err(e @ Errno::EXIST) => last = e,
            Err(e) => return Err(e.into()),
        }
    }
    Err(last.into())
}

/// Remove the `.NAME.tmp-PID-N` files in `dir` whose process has ended (a
/// run killed between creating and renaming one): regular files of this
/// user only; those of running processes (another hypclear writing the
/// same target) and names without a PID are left alone.
fn sweep_stale(dirfd: &OwnedFd, dir: &Path, name: &OsStr) {
    let prefix = [b".", name.as_bytes(), b".tmp-"].concat();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let me = rustix::process::getpid();
    let uid = rustix::process::geteuid().as_raw();
    for e in entries.flatten() {
        let n = e.file_name();
        let Some(rest) = n.as_bytes().strip_prefix(&prefix[..]) else {
            continue;
        };
        let pid = std::str::from_utf8(rest.split(|&c| c == b'-').next().unwrap_or_default())
            .ok()
            .and_then(|s| s.parse::<i32>().ok())
            .and_then(rustix::process::Pid::from_raw);
        let Some(pid) = pid else { continue };
        let ended = matches!(rustix::process::test_kill_process(pid), Err(Errno::SRCH));
        if pid == me || !ended {
            continue;
        }
        let own_file =
            rfs::statat(dirfd, n.as_os_str(), AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| {
                rfs::FileType::from_raw_mode(st.st_mode) == rfs::FileType::RegularFile
                    && st.st_uid == uid
            });
        if own_file {
            let _ = rfs::unlinkat(dirfd, n.as_os_str(), AtFlags::empty());
        }
    }
}

/// Version of every JSON document hypclear writes (the `schema_version`
/// field). Bump it when a field changes meaning or disappears; adding fields
/// keeps it. Documents without the field are version 0 (before it existed)
/// and still load.
pub const SCHEMA_VERSION: u64 = 1;

/// Write `value` (a JSON object: a map or a struct) to `path`, stamped
/// with [`SCHEMA_VERSION`]: its fields and each element of its arrays on a
/// line of their own ([`outline`]). It is serialized straight into the file
/// (no intermediate `Value` or `String`: a `run` document holds tens of
/// thousands of records).
pub fn write_json<T: serde::Serialize + ?Sized>(path: &Path, value: &T) -> Result<(), FileError> {
    #[derive(serde::Serialize)]
    struct Stamped<'a, T: ?Sized> {
        schema_version: u64,
        #[serde(flatten)]
        doc: &'a T,
    }
    let io = |source| FileError::Io {
        path: path.to_path_buf(),
        source,
    };
    write_atomically(path, |w| {
        let doc = Stamped {
            schema_version: SCHEMA_VERSION,
            doc: value,
        };
        // Buffered here, in a concrete type: serde_json writes every token
        // on its own, and through `dyn Write` each was a call of its own.
        let mut w = std::io::BufWriter::with_capacity(1 << 16, w);
        outline::to_writer(&mut w, &doc).map_err(std::io::Error::other)?;
        w.write_all(b"\n")?;
        w.flush()
    })
    .map_err(io)
}

/// [`write_json`] of a result so far (a checkpoint): only a target that is
/// replaced in one step gets it; a FIFO or a terminal gets the final
/// document only, so its reader sees one document, not a stream of them.
pub fn write_json_checkpoint<T: serde::Serialize + ?Sized>(
    path: &Path,
    value: &T,
) -> Result<(), FileError> {
    match in_place(path) {
        Ok(true) => Ok(()),
        _ => write_json(path, value),
    }
}

/// Replace a regular file in one step: write a temporary file beside it,
/// then rename it over the target, so a reader (or a run killed by SIGKILL
/// or the OOM killer mid-write) sees the old or the new contents, never
/// half of them; a failed write (ENOSPC) leaves the old contents and no
/// temporary file. Anything else (a device, a FIFO) is written in place.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    if in_place(path)? {
        let file = match take_kept(path) {
            Some(f) => f,
            None => open_in_place(path)?,
        };
        let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
        write(&mut w)?;
        return w.flush();
    }
    let (dir, name) = split(path).map_err(std::io::Error::other)?;
    let dirfd = open_dir(&dir)?;
    sweep_once(path, &dirfd, &dir, &name);
    write_in(dirfd, &name, write)
}

/// Targets whose directory this process has swept: a listing of the
/// directory is done once per target, at its first write, not in the
/// precheck (`/tmp`'s few hundred entries took 0.15 ms there, on the way
/// to the first hypercall).
static SWEPT: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

fn sweep_once(path: &Path, dirfd: &OwnedFd, dir: &Path, name: &OsStr) {
    let mut swept = SWEPT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !swept.iter().any(|p| p == path) {
        sweep_stale(dirfd, dir, name);
        swept.push(path.to_path_buf());
    }
}

fn write_in(
    dir: OwnedFd,
    name: &OsStr,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let tmp = Temp::create(dir, name)?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, &tmp.file);
    write(&mut w)?;
    w.flush()?;
    drop(w);
    tmp.persist(name)
}

/// Read at most `limit` bytes of `path`: a larger file (or a device such as
/// /dev/zero, or an endless pipe) is refused after `limit + 1` bytes.
pub fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    let file = std::fs::File::open(path).map_err(|source| FileError::Unreadable {
        path: path.to_path_buf(),
        source,
    })?;
    read_limited(file, path, limit, 0)
}

/// Read at most `limit` bytes (more is [`FileError::TooLarge`]); `hint`: the
/// size expected, read in one call where it is right.
fn read_limited(file: impl Read, path: &Path, limit: u64, hint: u64) -> Result<Vec<u8>, FileError> {
    let mut bytes = Vec::with_capacity(usize::try_from(hint.min(limit) + 1).unwrap_or(0));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| FileError::Unreadable {
            path: path.to_path_buf(),
            source,
        })?;
    if bytes.len() as u64 > limit {
        return Err(FileError::TooLarge {
            path: path.to_path_buf(),
            limit,
        });
    }
    Ok(bytes)
}

/// Parse JSON, refusing an object that gives a key twice (serde_json keeps
/// the last one silently: `"schema_version": 1, "schema_version": 99`).
pub fn parse_json(path: &Path, bytes: &[u8]) -> Result<serde_json::Value, FileError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = serde::Deserialize::deserialize(&mut de).and_then(|Strict(v)| {
        de.end()?;
        Ok(v)
    });
    parsed.map_err(|e| FileError::Malformed {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })
}

/// A JSON value whose objects have no duplicate keys.
struct Strict(serde_json::Value);

impl<'de> serde::Deserialize<'de> for Strict {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Strict, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut v = Vec::new();
        while let Some(Strict(x)) = seq.next_element()? {
            v.push(x);
        }
        Ok(v.into())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut m = serde_json::Map::new();
        while let Some(k) = map.next_key::<String>()? {
            let Strict(v) = map.next_value()?;
            if m.contains_key(&k) {
                return Err(serde::de::Error::custom(format!(
                    "the key `{}` is given twice in one object (a hand-edited or concatenated \
                     file?); keep one",
                    k.escape_debug()
                )));
            }
            m.insert(k, v);
        }
        Ok(m.into())
    }
}

/// A directory only this user can use, for a per-user cache: created 0700,
/// an existing one must belong to the effective user (a directory shared
/// with, or planted by, someone else is refused) and loses any group or
/// other permission. Files in it are opened relative to it, without
/// following symlinks.
#[derive(Debug)]
pub struct PrivateDir {
    fd: OwnedFd,
    path: PathBuf,
}

impl PrivateDir {
    pub fn open(path: &Path) -> Result<PrivateDir, FileError> {
        let fail = |source: std::io::Error| FileError::Unwritable {
            path: path.to_path_buf(),
            source,
        };
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        // Made only where missing: an existing directory is opened in one
        // call (it is read before every `--cpl auto` VM).
        let fd = match rfs::open(path, flags, Mode::empty()) {
            Err(Errno::NOENT) => {
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).map_err(fail)?;
                }
                match rfs::mkdir(path, Mode::from_raw_mode(0o700)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(fail(e.into())),
                }
                rfs::open(path, flags, Mode::empty())
            }
            other => other,
        };
        let fd = fd.map_err(|e| fail(e.into()))?;
        let st = rfs::fstat(&fd).map_err(|e| fail(e.into()))?;
        let me = rustix::process::geteuid().as_raw();
        if st.st_uid != me {
            return Err(FileError::BadTarget {
                path: path.to_path_buf(),
                why: format!(
                    "the directory belongs to uid {}, not to this user (uid {me}); \
                     remove it or point XDG_CACHE_HOME at a directory of your own",
                    st.st_uid
                ),
            });
        }
        if st.st_mode & 0o077 != 0 {
            rfs::fchmod(&fd, Mode::from_raw_mode(0o700)).map_err(|e| fail(e.into()))?;
        }
        Ok(PrivateDir {
            fd,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The contents of `name`, None when it does not exist; refused when it
    /// is not a regular file of this user (a symlink, a device, a FIFO) or
    /// holds more than `limit` bytes.
    pub fn read(&self, name: &str, limit: u64) -> Result<Option<Vec<u8>>, FileError> {
        let path = self.path.join(name);
        let fail = |source: std::io::Error| FileError::Unreadable {
            path: path.clone(),
            source,
        };
        let flags =
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        let fd = match rfs::openat(&self.fd, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(e) => return Err(fail(e.into())),
        };
        let st = rfs::fstat(&fd).map_err(|e| fail(e.into()))?;
        let regular = rfs::FileType::from_raw_mode(st.st_mode) == rfs::FileType::RegularFile;
        if !regular || st.st_uid != rustix::process::geteuid().as_raw() {
            return Err(fail(std::io::Error::other(
                "not a regular file of this user; remove it",
            )));
        }
        let size = u64::try_from(st.st_size).unwrap_or(0);
        read_limited(std::fs::File::from(fd), &path, limit, size).map(Some)
    }

    /// Replace `name` in one step (see [`write_atomically`]).
    pub fn write(&self, name: &str, bytes: &[u8]) -> Result<(), FileError> {
        let io = |source| FileError::Io {
            path: self.path.join(name),
            source,
        };
        let dir = self.fd.as_fd().try_clone_to_owned().map_err(io)?;
        write_in(dir, OsStr::new(name), |w| w.write_all(bytes)).map_err(io)
    }
}

mod outline;
#[cfg(test)]
mod tests;
