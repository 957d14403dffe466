//! `hypclear reclaim`: where protected VMs are not offered (this x86 host,
//! an arm64 host without pKVM) it is a SKIP with the reason, exit 4 under
//! KTAP; on a pKVM host the protected run and its control must pass.
mod common;
use common::{hypclear, kvm_available, read_json, skip, text, tmp_json};

#[test]
fn reclaim_skips_with_the_reason_where_protected_vms_are_not_offered() {
    if cfg!(target_arch = "aarch64") {
        // Whether pKVM is on decides it there; see the test below.
        return;
    }
    let json = tmp_json("reclaim-skip");
    let o = hypclear(&[
        "--format",
        "ktap",
        "reclaim",
        "--mem",
        "32MB",
        "--seed",
        "1",
        "--json",
        json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    assert!(
        stdout.starts_with("KTAP version 1\n1..0 # SKIP protected VMs are pKVM's"),
        "{}",
        text(&o)
    );
    assert!(stdout.contains("this host is x86_64"), "{}", text(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("host: Linux "), "{}", text(&o));
    assert!(stderr.contains("reclaim: SKIP:"), "{}", text(&o));
    let v = read_json(&json);
    assert_eq!(v["command"], "reclaim");
    let why = v["report"]["outcome"]["skipped"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("kvm-arm.mode=protected"), "{v}");
    // Text: an environment error (exit 2) that says SKIP and why.
    let o = hypclear(&["reclaim", "--mem", "32MB"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("reclaim: SKIP") && stderr.contains("x86_64"),
        "{}",
        text(&o)
    );
}

#[test]
fn reclaim_rejects_options_it_does_not_take() {
    let o = hypclear(&["reclaim", "--cpl", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--cpl"),
        "{}",
        text(&o)
    );
    let o = hypclear(&["reclaim", "--format", "markdown"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn reclaim_on_arm64_passes_or_skips_visibly() {
    if !cfg!(target_arch = "aarch64") || !kvm_available("reclaim_on_arm64_passes_or_skips_visibly")
    {
        return;
    }
    let o = hypclear(&[
        "--timeout",
        "60",
        "--format",
        "ktap",
        "reclaim",
        "--mem",
        "32MB",
        "--seed",
        "1",
    ]);
    match o.status.code() {
        Some(4) => skip(&format!(
            "reclaim: {}",
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .nth(1)
                .unwrap_or_default()
        )),
        Some(0) => {
            let stdout = String::from_utf8_lossy(&o.stdout);
            assert!(
                stdout.contains("ok 1 reads zero (expected: yes)"),
                "{}",
                text(&o)
            );
            assert!(
                stdout.contains("ok 2 pattern kept (expected: yes)"),
                "{}",
                text(&o)
            );
        }
        _ => panic!("{}", text(&o)),
    }
}
