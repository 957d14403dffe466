//! Results are never lost or misreported (issue 25): every termination
//! path leaves whole JSON marked partial with its reason (or no file),
//! KTAP marks a cut run as failed, and every write to stdout is checked.
//! The case numbers are the issue's.
mod common;
use common::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A generous bound for the start of a run (catches a hang, not a speed).
const START: Duration = Duration::from_secs(60);

fn spawn(args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_hypclear"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run the hypclear binary")
}

/// Whether process `pid` has a handler for `sig` (SigCgt in /proc/PID/status).
fn catches(pid: u32, sig: libc::c_int) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .is_some_and(|m| m & (1 << (sig - 1)) != 0)
}

/// Send `sig` to `child` once it can take SIGINT (the command's start:
/// before it, any program dies of any signal) and `delay` later.
fn signal_after(child: &std::process::Child, sig: libc::c_int, delay: Duration) {
    let t = Instant::now();
    while !catches(child.id(), libc::SIGINT) {
        assert!(t.elapsed() < START, "the command never started");
        std::thread::sleep(Duration::from_micros(200));
    }
    std::thread::sleep(delay);
    // SAFETY: kill(2) on our own child's pid, which has not been reaped.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, sig) }, 0);
}

/// Case 1: SIGTERM (what `timeout` and CI runners send) and SIGHUP stop a
/// run like Ctrl-C: exit 128 + the signal, the JSON whole and partial,
/// naming the signal.
#[test]
fn sigterm_and_sighup_leave_partial_json_naming_the_signal() {
    if !kvm_available("SIGTERM/SIGHUP partial JSON") {
        return;
    }
    for (sig, name, code) in [
        (libc::SIGTERM, "SIGTERM", 143),
        (libc::SIGHUP, "SIGHUP", 129),
    ] {
        let json = tmp_json(&format!("signal-{name}"));
        let _ = std::fs::remove_file(&json);
        let child = spawn(&["run", "--json", json.to_str().unwrap()]);
        signal_after(&child, sig, Duration::from_millis(300));
        let out = child.wait_with_output().unwrap();
        let what = format!("{name}: {}", text(&out));
        assert_eq!(out.status.code(), Some(code), "{what}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("interrupted ({name})")), "{what}");
        if err.contains("nothing was written") {
            assert!(!json.exists(), "{what}: a file although nothing was taken");
            continue;
        }
        let doc = read_json(&json);
        assert_eq!(doc["partial"], true, "{what}");
        assert_eq!(doc["partial_reason"], name, "{what}");
    }
}

/// Case 2: a watchdog timeout at boot is a guest failure with a record in
/// the JSON, not a lost result.
#[test]
fn a_timeout_at_boot_leaves_json_with_the_failure() {
    if !kvm_available("timeout at boot") {
        return;
    }
    let json = tmp_json("boot-timeout");
    let _ = std::fs::remove_file(&json);
    let out = hypclear(&[
        "run",
        "--timeout",
        "0.000001",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let doc = read_json(&json);
    assert_eq!(doc["partial"], true, "{doc}");
    assert_eq!(doc["failure"]["kind"], "timeout", "{doc}");
    let reason = doc["partial_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("guest failure (Timeout)"), "{reason}");
}

/// Case 3: a KTAP run cut by SIGINT says so and fails the cut test, so
/// kunit.py never reads it as a complete, passing run.
#[test]
fn an_interrupted_ktap_run_fails_the_cut_test() {
    if !kvm_available("interrupted KTAP") {
        return;
    }
    let child = spawn(&["run", "--format", "ktap"]);
    signal_after(&child, libc::SIGINT, Duration::from_millis(300));
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    let ktap = String::from_utf8_lossy(&out.stdout);
    if ktap.is_empty() {
        // Stopped before any check: nothing to report, said on stderr.
        assert!(text(&out).contains("nothing was written"), "{}", text(&out));
        return;
    }
    assert!(ktap.contains("# interrupted: SIGINT"), "{ktap}");
    let totals = ktap.lines().last().unwrap_or_default();
    assert!(totals.starts_with("# Totals:"), "{ktap}");
    assert!(!totals.contains(" fail:0 "), "{totals}");
}

/// Case 4: a full stdout is exit 1 with one message, for every command
/// that prints results (man and completions in the test below).
#[test]
fn a_full_stdout_is_exit_1_with_one_message() {
    if !kvm_available("stdout to /dev/full") {
        return;
    }
    for args in [
        &["run"][..],
        &["verify", "--routine", "memset", "--config", "vanilla"],
        &["selftest"],
        &["run", "--format", "ktap"],
    ] {
        full_stdout(args);
    }
}

#[test]
fn man_and_completions_to_a_full_stdout_exit_1_without_a_panic() {
    full_stdout(&["man"]);
    full_stdout(&["completions", "bash"]);
    full_stdout(&["--help"]);
}

fn full_stdout(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_hypclear"))
        .args(args)
        .stdout(std::fs::File::create("/dev/full").expect("/dev/full"))
        .output()
        .expect("cannot run the hypclear binary");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert_eq!(
        err.matches("cannot write standard output").count(),
        1,
        "{args:?}: {err}"
    );
    assert!(!err.contains("panicked"), "{args:?}: {err}");
}

/// Case 4, EPIPE: a reader that went away ends the run quietly with
/// SIGPIPE's status, and the JSON is still written.
#[test]
fn a_closed_stdout_ends_quietly_with_141_and_keeps_the_json() {
    if !kvm_available("closed stdout") {
        return;
    }
    let json = tmp_json("closed-stdout");
    let _ = std::fs::remove_file(&json);
    // The reader is gone before the child starts, so its first write
    // already fails (closing it after the spawn raced with that write on a
    // loaded machine: the run finished before it noticed).
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_hypclear"))
        .args(["run", "--json", json.to_str().unwrap()])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("cannot run the hypclear binary");
    assert_eq!(out.status.code(), Some(141), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(!err.contains("cannot write"), "{err}");
    let doc = read_json(&json);
    assert_eq!(doc["partial"], true, "{doc}");
    assert_eq!(doc["partial_reason"], "EPIPE: standard output closed");
}

/// The host's online CPUs, as the test sees them.
fn online_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }).unwrap_or(0)
}

/// Case 7: info's CPU count is the host's, not the process's affinity (a
/// `taskset` here).
#[test]
fn info_counts_the_hosts_cpus_not_its_affinity() {
    if !kvm_available("info CPU count") {
        return;
    }
    let cpus = online_cpus();
    if cpus < 2 {
        common::skip("info CPU count: one online CPU, an affinity cannot narrow it");
        return;
    }
    let json = tmp_json("info-cpus");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hypclear"));
    cmd.args(["info", "--json", json.to_str().unwrap()]);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            match libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            }
        });
    }
    let out = cmd.output().expect("cannot run the hypclear binary");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let doc = read_json(&json);
    assert_eq!(doc["host"]["cpus"], cpus, "{}", doc["host"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains(&format!("({cpus} CPUs)")), "{table}");
}

/// Case 8: a run refused with exit 2 after its options were read leaves
/// no file at a new `--json` path (it left a 0-byte one).
#[test]
fn an_exit_2_leaves_no_file_at_a_new_json_path() {
    if !kvm_available("exit 2 leaves no file") {
        return;
    }
    for (i, args) in [
        &["verify", "--routine", "memset", "--size", "1GB"][..],
        &["bench", "memset", "-s", "64GB"],
        &["selftest", "--hostile", "--case", "nosuch"],
    ]
    .into_iter()
    .enumerate()
    {
        let json = tmp_json(&format!("exit2-{i}"));
        let _ = std::fs::remove_file(&json);
        let out = hypclear(&[args, &["--json", json.to_str().unwrap()]].concat());
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(!json.exists(), "{args:?} left {}", json.display());
        let dir = json.parent().unwrap();
        let stray: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .contains(&format!("exit2-{i}"))
            })
            .collect();
        assert!(stray.is_empty(), "{args:?}: {stray:?}");
    }
}

/// Case 8: `blob -o` is probed before the build: a directory that does not
/// exist is named at once (it failed after the build, in objcopy).
#[test]
fn blob_output_is_probed_before_the_build() {
    let out = hypclear(&[
        "blob",
        "--kernel-tree",
        "/nonexistent/linux",
        "-o",
        "/nonexistent/dir/x.blob",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot write /nonexistent/dir/x.blob"),
        "{err}"
    );
    assert!(
        !err.contains("/nonexistent/linux"),
        "the tree came first: {err}"
    );
}

fn mem_total() -> u64 {
    let m = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    m.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Case 10: RLIMIT_AS (`ulimit -v`) is part of the memory check and named,
/// before anything is allocated (a raw ENOMEM after seconds before).
#[test]
fn the_memory_check_names_rlimit_as() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hypclear"));
    cmd.args(["bench", "memset", "-s", "1GB"]);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            let r = libc::rlimit {
                rlim_cur: 900_000 << 10,
                rlim_max: libc::RLIM_INFINITY,
            };
            match libc::setrlimit(libc::RLIMIT_AS, &r) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            }
        });
    }
    let t = Instant::now();
    let out = cmd.output().expect("cannot run the hypclear binary");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("RLIMIT_AS (ulimit -v)"), "{err}");
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
}

/// Case 10: `--mem` beyond the host's memory is refused (234GB passed on
/// a 23 GB host), unless HYPCLEAR_MEM_OVERCOMMIT=1.
#[test]
fn mem_beyond_the_host_is_refused() {
    let mb = mem_total() / (1 << 20);
    let mem = format!("{}MB", (mb + 2) / 2 * 2 + 2);
    if mb == 0 || mb + 4 > 234 << 10 {
        common::skip(&format!(
            "--mem beyond the host: MemTotal {mb} MB unreadable or above --mem's range"
        ));
        return;
    }
    let out = hypclear(&["run", "--mem", &mem]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("MemTotal"), "{mem}: {err}");
}

/// Case 11: a missing --kernel-config is named once with a fix, a garbage
/// one is refused before any build, and an OS error is printed once.
#[test]
fn kernel_configs_are_checked_and_errors_said_once() {
    let dir = tmp_json("kconfig").with_extension("d");
    std::fs::create_dir_all(&dir).unwrap();
    let garbage = dir.join("garbage.config");
    std::fs::write(&garbage, "CONFIG_A=y\nthis is not a config\n").unwrap();
    for (args, needle) in [
        (
            vec![
                "run",
                "--kernel-tree",
                "/nonexistent",
                "--kernel-config",
                "/nonexistent/cfg",
            ],
            "`defconfig`",
        ),
        (
            vec![
                "run",
                "--kernel-tree",
                "/nonexistent",
                "--kernel-config",
                garbage.to_str().unwrap(),
            ],
            "line 2",
        ),
        (
            vec!["info", "--blob", "/nonexistent/k.blob"],
            "/nonexistent/k.blob",
        ),
    ] {
        let out = hypclear(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(err.matches("(os error").count() <= 1, "{args:?}: {err}");
    }
}

/// Case 9: compare and blob refuse the common options that do not apply
/// to them (exit 2 naming each), instead of taking them silently.
#[test]
fn options_that_do_not_apply_are_refused_by_name() {
    for (args, named) in [
        (
            &[
                "compare",
                "/nonexistent.json",
                "--json",
                "/tmp/x.json",
                "--mem",
                "0",
            ][..],
            "--mem, --json",
        ),
        (
            &["compare", "/nonexistent.json", "--timeout", "nan"],
            "--timeout",
        ),
        (
            &[
                "blob",
                "--kernel-tree",
                "/nonexistent",
                "-o",
                "/tmp/x.blob",
                "--seed",
                "1",
            ],
            "--seed",
        ),
        (&["man", "--mem", "1GB"], "--mem"),
        (&["--seed", "1", "completions", "bash"], "--seed"),
    ] {
        let out = hypclear(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("does not take {named}")),
            "{args:?}: {err}"
        );
    }
}

/// Case 8: output paths are probed before any build: a --kernel-tree run
/// with an unwritable --json fails on the path first.
#[test]
fn json_paths_are_probed_before_the_kernel_build() {
    let out = hypclear(&[
        "run",
        "--kernel-tree",
        "/nonexistent/linux",
        "--json",
        "/nonexistent/dir/r.json",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot write /nonexistent/dir/r.json"),
        "{err}"
    );
}
