//! Shared helpers for the integration tests, which boot real VMs.
#![allow(dead_code)]
pub(crate) mod picks;

use std::path::PathBuf;
use std::process::{Command, Output};

/// Whether the tests may use KVM: the device hypclear opens (`/dev/kvm`,
/// or `$HYPCLEAR_KVM_DEVICE`, so `HYPCLEAR_KVM_DEVICE=/nonexistent cargo
/// test` is a run without KVM). Without it they report SKIP and pass,
/// unless HYPCLEAR_REQUIRE_KVM=1 (CI), where they fail instead.
pub(crate) fn kvm_available(test: &str) -> bool {
    let dev = std::env::var("HYPCLEAR_KVM_DEVICE").unwrap_or_else(|_| "/dev/kvm".into());
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&dev)
    {
        Ok(_) => true,
        Err(e) => {
            if std::env::var("HYPCLEAR_REQUIRE_KVM").as_deref() == Ok("1") {
                panic!(
                    "{test}: {dev} is required (HYPCLEAR_REQUIRE_KVM=1) but cannot be opened: {e}"
                );
            }
            skip(&format!(
                "{test}: {dev} not usable ({e}); set HYPCLEAR_REQUIRE_KVM=1 to make this fail"
            ));
            false
        }
    }
}

/// Report a skipped test where the runner shows it: straight to the
/// process's stderr, past libtest's capture (eprintln! output appears only
/// for failing tests or with --nocapture, so a SKIP read as a plain `ok`).
pub(crate) fn skip(why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "SKIP {why}");
}

pub(crate) fn hypclear(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hypclear"))
        .args(args)
        .output()
        .expect("cannot run the hypclear binary")
}

pub(crate) fn text(o: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A fresh path for a JSON output file.
pub(crate) fn tmp_json(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hypclear-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join(format!("{name}.json"))
}

pub(crate) fn read_json(p: &PathBuf) -> serde_json::Value {
    let s = std::fs::read_to_string(p).expect("JSON file was not written");
    serde_json::from_str(&s).expect("JSON file does not parse")
}

/// `hypclear ARGS --json FILE`, which must exit 0: the JSON it wrote
/// and its output.
pub(crate) fn run_json(name: &str, args: &[&str]) -> (serde_json::Value, String) {
    let json = tmp_json(name);
    let mut all = args.to_vec();
    all.extend(["--json", json.to_str().expect("temp path is UTF-8")]);
    let out = hypclear(&all);
    assert_eq!(out.status.code(), Some(0), "{all:?}: {}", text(&out));
    (read_json(&json), text(&out))
}

pub(crate) fn hypclear_env(args: &[&str], key: &str, value: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hypclear"))
        .args(args)
        .env(key, value)
        .output()
        .expect("cannot run the hypclear binary")
}
