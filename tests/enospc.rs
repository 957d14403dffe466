//! A full filesystem under `--json` (issue 38): every write of the result
//! fails with ENOSPC, and hypclear says so truthfully (nothing could be
//! written, the file holds what was there before) without touching the
//! file it had. Needs a small tmpfs, so root (as CI is); elsewhere a
//! visible SKIP.
mod common;

use std::path::Path;
use std::process::Command;

/// A tmpfs of 64 KiB mounted at `dir`, unmounted on drop.
struct Tmpfs<'a>(&'a Path);

impl<'a> Tmpfs<'a> {
    fn mount(dir: &'a Path) -> Option<Tmpfs<'a>> {
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k", "hypclear-test"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Tmpfs(dir))
    }
}

impl Drop for Tmpfs<'_> {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0).status();
    }
}

/// Fill the filesystem of `dir` until a write fails with ENOSPC.
fn fill(dir: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(dir.join("filler")).unwrap();
    let block = [0u8; 4096];
    loop {
        match f.write_all(&block).and_then(|_| f.sync_all()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => return,
            Err(e) => panic!("filling the tmpfs: {e}"),
        }
    }
}

const BEFORE: &str = "{\"what\": \"the result of an earlier run\"}\n";

#[test]
fn a_full_filesystem_keeps_the_old_file_and_says_so() {
    if !common::kvm_available("a_full_filesystem_keeps_the_old_file_and_says_so") {
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        common::skip(
            "a_full_filesystem_keeps_the_old_file_and_says_so: needs root to mount a tmpfs",
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let Some(_fs) = Tmpfs::mount(tmp.path()) else {
        common::skip("a_full_filesystem_keeps_the_old_file_and_says_so: mount -t tmpfs failed");
        return;
    };
    let json = tmp.path().join("out.json");
    std::fs::write(&json, BEFORE).unwrap();
    fill(tmp.path());
    let out = Command::new(env!("CARGO_BIN_EXE_hypclear"))
        .args(["bench", "memset", "-s", "64KB", "-k", "64KB"])
        .args(["--sessions", "1", "--repeats", "1", "--json"])
        .arg(&json)
        .env("HYPCLEAR_PROGRESS", "0")
        .output()
        .expect("run hypclear bench");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        matches!(out.status.code(), Some(1 | 2)),
        "exit {:?}: {err}",
        out.status
    );
    assert!(
        err.contains("no checkpoint could be written either")
            && err.contains("holds what was there before the run"),
        "{err}"
    );
    assert!(!err.contains("killed"), "{err}");
    assert_eq!(std::fs::read_to_string(&json).unwrap(), BEFORE);
}
