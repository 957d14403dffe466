//! CLI behaviour: exit codes, usage errors before any VM, JSON schema,
//! reproducible load addresses, privilege levels and backings.
mod common;
use common::*;
use std::process::Command;

#[test]
fn usage_errors_exit_2_with_a_fix() {
    for (args, needle) in [
        (
            vec!["verify", "--routine", "clear_page", "--size", "4097"],
            "whole pages",
        ),
        (
            vec!["verify", "--routine", "memset", "--size", "1GB"],
            "--mem",
        ),
        (vec!["verify", "--routine", "nosuch"], "invalid value"),
        (vec!["verify", "--variant", "nosuch"], "unknown variant"),
        (vec!["--mem", "3MB"], "--mem"),
        // Issue 38: wrapped in footprint(), passed, failed in the VM (exit 1).
        (
            vec!["verify", "-s", "18446744073709551615"],
            "larger than the largest guest RAM",
        ),
        (
            vec!["bench", "memset", "-s", "18446744073709547520"],
            "larger than the largest guest RAM",
        ),
        (
            vec!["bench", "memcpy", "-s", "64GB", "--vcpus", "8"],
            "more than the largest guest RAM",
        ),
        (vec!["--mem", "1.5GB"], "1536MB"),
        (vec!["--timeout", "0"], "--timeout"),
        #[cfg(target_arch = "x86_64")]
        (
            vec!["bench", "memset", "-s", "4MB", "--dc-zva", "both"],
            "arm64 option",
        ),
        #[cfg(target_arch = "x86_64")]
        (vec!["verify", "--no-dc-zva"], "arm64 option"),
        #[cfg(target_arch = "aarch64")]
        (vec!["verify", "--dc-zva", "both"], "only bench"),
        #[cfg(target_arch = "aarch64")]
        (
            vec![
                "bench", "memset", "-s", "4MB", "--dc-zva", "on", "--cpl", "3",
            ],
            "--cpl 3",
        ),
        (
            vec!["bench", "memset", "-s", "4MB", "--explain", "--no-host"],
            "cannot be used with",
        ),
        (
            vec!["bench", "memset", "-s", "4MB", "--explain=some"],
            "invalid value 'some'",
        ),
    ] {
        // The footprint check plans the suite for the CPU, read through KVM.
        if args.contains(&"1GB") && !kvm_available("usage error verify --size 1GB") {
            continue;
        }
        let out = hypclear(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// `--el`: a usage error on x86_64 (before any VM, no KVM needed) and with
/// EL0 (`--cpl 3`); on aarch64 `--el 2` either runs or exits 2 naming what
/// the host lacks.
#[test]
fn el_option_exits_2_where_el2_cannot_be() {
    let out = hypclear(&["--el", "3", "info"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    if cfg!(target_arch = "x86_64") {
        for args in [
            vec!["--el", "2", "info"],
            vec!["verify", "--el", "1", "-r", "memset"],
            vec!["selftest", "--el", "auto"],
        ] {
            let out = hypclear(&args);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("--el is an arm64 option"), "{args:?}: {err}");
        }
        return;
    }
    let out = hypclear(&["--el", "2", "--cpl", "3", "selftest"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("runs under EL1"));
    if !kvm_available("--el 2 on this host") {
        return;
    }
    let args = [
        "--el", "2", "verify", "-r", "memset", "--size", "4KB", "--mem", "32MB",
    ];
    let out = hypclear(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => assert!(
            text(&out).contains("guest at EL2 (nVHE, E2H=0"),
            "{}",
            text(&out)
        ),
        Some(2) => assert!(
            err.contains("a guest at EL2") && err.contains("KVM_CAP_ARM_EL2"),
            "{err}"
        ),
        c => panic!("--el 2 exited {c:?}: {}", text(&out)),
    }
}

#[test]
fn missing_kvm_device_is_an_environment_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_hypclear"))
        .env("HYPCLEAR_KVM_DEVICE", "/nonexistent/kvm")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/nonexistent/kvm") && err.contains("modprobe"),
        "{err}"
    );
}

#[test]
fn run_json_has_the_documented_fields() {
    if !kvm_available("run json") {
        return;
    }
    let json = tmp_json("run");
    let out = hypclear(&[
        "verify",
        "--routine",
        "memset",
        "--size",
        "4097",
        "--config",
        "vanilla",
        "--seed",
        "99",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let d = read_json(&json);
    assert_eq!(d["schema_version"], 1, "schema_version missing: {d}");
    for k in [
        "arch",
        "cpu_model",
        "kernel",
        "kvm_flavour",
        "counter_khz",
        "git_commit",
    ] {
        assert!(!d["host"][k].is_null(), "host.{k} missing: {d}");
    }
    let load = d["guest"]["load_address"]
        .as_u64()
        .expect("guest.load_address");
    assert_eq!(load % 4096, 0);
    assert!(d["guest"]["privilege"]["name"].is_string());
    let c = &d["checks"][0];
    for k in [
        "routine",
        "variant",
        "size",
        "dst_offset",
        "src_offset",
        "verdict",
        "first_bad_offset",
    ] {
        assert!(c.get(k).is_some(), "check field {k} missing: {c}");
    }
    assert_eq!(d["summary"]["failed"], 0);
    assert_eq!(
        d["summary"]["passed"].as_u64().unwrap(),
        d["checks"].as_array().unwrap().len() as u64
    );
}

fn load_address(seed: &str) -> u64 {
    let json = tmp_json(&format!("info-{seed}"));
    let out = hypclear(&[
        "info",
        "--config",
        "vanilla",
        "--seed",
        seed,
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    read_json(&json)["guest"]["load_address"].as_u64().unwrap()
}

#[test]
fn seed_reproduces_the_load_address() {
    if !kvm_available("seed") {
        return;
    }
    let a = load_address("5");
    assert_eq!(a, load_address("5"));
    let others: Vec<u64> = ["6", "7", "8"].iter().map(|s| load_address(s)).collect();
    assert!(
        others.iter().any(|o| *o != a),
        "load address never changes: {a:#x} {others:?}"
    );
}

#[test]
fn info_shows_alias_table_and_privilege() {
    if !kvm_available("info") {
        return;
    }
    let out = hypclear(&["info"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("__pi_memset_"), "{s}");
    assert!(s.contains("privilege"), "{s}");
    assert!(
        s.contains("vanilla configuration") && s.contains("memset configuration"),
        "{s}"
    );
    // Without a tree no version table stands in: the pick is unknown.
    assert!(
        s.contains("kernel would run") && s.contains("unknown: no --kernel-tree"),
        "{s}"
    );
}

#[test]
fn both_privilege_levels_verify() {
    if !kvm_available("cpl") {
        return;
    }
    for cpl in ["0", "3"] {
        let out = hypclear(&[
            "verify",
            "--cpl",
            cpl,
            "--routine",
            "memset,clear_page",
            "--size",
            "4096",
            "--config",
            "memset",
        ]);
        assert_eq!(out.status.code(), Some(0), "cpl {cpl}: {}", text(&out));
        let s = String::from_utf8_lossy(&out.stdout);
        assert!(
            s.contains(if cpl == "0" { "CPL0" } else { "CPL3" }) || s.contains("EL"),
            "{s}"
        );
    }
}

#[test]
fn backings_verify_or_explain() {
    if !kvm_available("backing") {
        return;
    }
    for backing in ["anon", "thp", "hugetlb"] {
        let out = hypclear(&[
            "verify",
            "--backing",
            backing,
            "--prefault",
            "--mem",
            "64MB",
            "--routine",
            "clear_pages",
            "--config",
            "vanilla",
        ]);
        match out.status.code() {
            Some(0) => {}
            Some(2) if backing == "hugetlb" => {
                let err = String::from_utf8_lossy(&out.stderr);
                assert!(err.contains("nr_hugepages"), "{err}");
            }
            _ => panic!("{backing}: {}", text(&out)),
        }
    }
}

/// Issue 38: `--json FIFO` (no reader) hung for ever in open, SIGINT
/// ignored; `--json new.json/` passed the precheck, ran the whole run and
/// lost its results. Each target that cannot hold the result exits 2 at
/// once, before any VM (no KVM needed): its kind is checked first by every
/// command (run and verify leave only the probe file to the first VM's boot).
#[test]
fn output_targets_that_cannot_hold_the_result_exit_2_before_any_vm() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let slash = format!("{}/new.json/", dir.path().display());
    let d = dir.path().to_str().unwrap();
    for (args, needle) in [
        (
            vec!["verify", "--json", fifo.to_str().unwrap()],
            "no reader",
        ),
        (vec!["run", "--json", &slash], "ending in `/`"),
        (vec!["verify", "--json", d], "directory"),
        (
            vec!["bench", "memset", "-s", "4MB", "--csv", &slash],
            "ending in `/`",
        ),
        (
            vec!["bench", "memset", "-s", "4MB", "--plot", d],
            "directory",
        ),
    ] {
        let t = std::time::Instant::now();
        let mut child = Command::new(env!("CARGO_BIN_EXE_hypclear"))
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        while child.try_wait().unwrap().is_none() {
            if t.elapsed() > std::time::Duration::from_secs(10) {
                let _ = child.kill();
                panic!("{args:?}: still running after 10 s");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(needle) && err.contains("before the run"),
            "{args:?}: {err}"
        );
        assert!(
            t.elapsed() < std::time::Duration::from_secs(3),
            "{args:?}: slow"
        );
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "left files"
    );
}
