//! The `--cpl auto` cache as an attacker sharing `XDG_CACHE_HOME` would
//! meet it (issue 38): a symlink planted for the cache file or its
//! directory is never written through, and a cache file that is a device
//! (/dev/zero) is never read without bound. Each runs `hypclear info`,
//! which takes the `--cpl auto` decision and caches it.
mod common;

use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// `hypclear info` with `XDG_CACHE_HOME=xdg`, and how long it took.
fn info(xdg: &Path) -> (Output, Duration) {
    let t = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_hypclear"))
        .arg("info")
        .env("XDG_CACHE_HOME", xdg)
        .env("HYPCLEAR_PROGRESS", "0")
        .output()
        .expect("run hypclear info");
    (out, t.elapsed())
}

const VICTIM: &str = "a file the user can write, not hypclear's\n";

#[test]
fn a_planted_cache_file_symlink_is_not_written_through() {
    if !common::kvm_available("a_planted_cache_file_symlink_is_not_written_through") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("hypclear");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, VICTIM).unwrap();
    symlink(&victim, dir.join("cpl-auto.json")).unwrap();
    let (out, _) = info(tmp.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), VICTIM);
}

#[test]
fn a_planted_cache_directory_symlink_is_not_used() {
    if !common::kvm_available("a_planted_cache_directory_symlink_is_not_used") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    symlink(&elsewhere, tmp.path().join("hypclear")).unwrap();
    let (out, _) = info(tmp.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written: Vec<_> = std::fs::read_dir(&elsewhere).unwrap().collect();
    assert!(written.is_empty(), "wrote through the symlink: {written:?}");
}

#[test]
fn a_cache_file_that_is_dev_zero_is_not_read_without_bound() {
    if !common::kvm_available("a_cache_file_that_is_dev_zero_is_not_read_without_bound") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // A first run makes the directory (0700, the user's) and its file.
    let (out, quick) = info(tmp.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = tmp.path().join("hypclear/cpl-auto.json");
    assert!(file.exists(), "the first run cached nothing");
    std::fs::remove_file(&file).unwrap();
    symlink("/dev/zero", &file).unwrap();
    let (out, took) = info(tmp.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Unbounded, it read for ever (1 GB RSS in 10 s); bounded, it decides
    // afresh as on a miss: a few times the first run at most.
    let limit = quick * 4 + Duration::from_secs(10);
    assert!(took < limit, "took {took:?} (first run {quick:?})");
}
