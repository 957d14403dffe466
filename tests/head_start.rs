//! The head start on the first VM (`vmm::prewarm`): made on another CPU
//! when there is one, never when told not to or when there is none, and
//! the same checks pass either way.
mod common;
use common::*;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output};

const VERIFY: &[&str] = &[
    "verify",
    "--routine",
    "memset,memcpy",
    "--size",
    "4097",
    "--config",
    "vanilla",
    "--seed",
    "5",
];

/// The CPUs this test process may run on.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is the empty set; sched_getaffinity
    // writes at most its size; CPU_ISSET reads indices below CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
            0
        );
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// KVM (see `kvm_available`) and a second CPU for the helper: with one,
/// there is no head start to test (`one_cpu_gets_no_head_start` covers it).
fn kvm_and_two_cpus(test: &str) -> bool {
    if !kvm_available(test) {
        return false;
    }
    if allowed_cpus().len() < 2 {
        common::skip(&format!("{test}: this test runs on one CPU"));
        return false;
    }
    true
}

/// `verify` with `--json`; its output and `summary.first_vm_made_ahead`.
fn verify(name: &str, cmd: impl FnOnce(&mut Command)) -> (Output, bool) {
    let json = tmp_json(name);
    let mut c = Command::new(env!("CARGO_BIN_EXE_hypclear"));
    c.args(VERIFY).args(["--json", json.to_str().unwrap()]);
    cmd(&mut c);
    let out = c.output().expect("cannot run the hypclear binary");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let d = read_json(&json);
    assert_eq!(d["summary"]["failed"], 0, "{d}");
    let ahead = d["summary"]["first_vm_made_ahead"]
        .as_bool()
        .unwrap_or_else(|| panic!("summary.first_vm_made_ahead missing: {d}"));
    (out, ahead)
}

#[test]
fn the_first_vm_is_made_ahead_when_there_is_another_cpu() {
    if !kvm_and_two_cpus("head start") {
        return;
    }
    let (on, ahead) = verify("head-start-on", |_| {});
    assert!(
        ahead,
        "two CPUs, no HYPCLEAR_PREWARM: made ahead\n{}",
        text(&on)
    );
    let (off, ahead) = verify("head-start-off", |c| {
        c.env("HYPCLEAR_PREWARM", "0");
    });
    assert!(!ahead, "HYPCLEAR_PREWARM=0: not made ahead\n{}", text(&off));
    // The same checks, with the same verdicts, either way.
    let table = |o: &Output| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.contains("vanilla ┆"))
            .map(|l| {
                // Drop the timing column, which differs run to run.
                let cells: Vec<&str> = l.split('┆').collect();
                cells[..cells.len().saturating_sub(2)].join("|")
            })
            .collect::<Vec<_>>()
    };
    assert!(!table(&on).is_empty(), "{}", text(&on));
    assert_eq!(table(&on), table(&off));
}

#[test]
fn one_cpu_gets_no_head_start() {
    if !kvm_available("head start on one CPU") {
        return;
    }
    let cpu = allowed_cpus()[0];
    let (out, ahead) = verify("head-start-one-cpu", |c| {
        // SAFETY: only sched_setaffinity (async-signal-safe) runs between
        // fork and exec.
        unsafe {
            c.pre_exec(move || {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    });
    assert!(!ahead, "one CPU: nothing to overlap\n{}", text(&out));
}

#[test]
fn info_says_whether_the_first_vm_was_made_ahead() {
    if !kvm_available("head start in info") {
        return;
    }
    let out = hypclear(&["info", "--config", "vanilla", "--cpl", "3"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let s = String::from_utf8_lossy(&out.stdout);
    let row = s
        .lines()
        .find(|l| l.contains("head start"))
        .unwrap_or_else(|| panic!("no head start row\n{s}"));
    if allowed_cpus().len() >= 2 {
        assert!(row.contains("made on another CPU"), "{row}");
    }
    let out = hypclear_env(
        &["info", "--config", "vanilla", "--cpl", "3"],
        "HYPCLEAR_PREWARM",
        "0",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("off (HYPCLEAR_PREWARM=0)"),
        "{}",
        text(&out)
    );
}

/// `Cpus_allowed_list` of every thread of `pid` (empty once it exited).
fn threads_cpus(pid: u32) -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("status")).ok())
        .filter_map(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|v| v.trim().to_string())
        })
        .collect()
}

/// The main thread is held on its CPU only for the head start: the threads
/// `run` starts for its other configuration, and the main thread itself,
/// have the process's whole CPU mask while the suite runs.
#[test]
fn no_thread_keeps_the_head_start_pin() {
    if !kvm_and_two_cpus("head start pin") {
        return;
    }
    let mine = std::fs::read_to_string("/proc/self/status")
        .expect("own status")
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string())
        .expect("Cpus_allowed_list");
    let mut child = Command::new(env!("CARGO_BIN_EXE_hypclear"))
        .args(["run", "--seed", "3"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("cannot run the hypclear binary");
    // The last view with both configurations' threads running.
    let mut seen: Vec<String> = Vec::new();
    while child.try_wait().expect("wait").is_none() {
        let now = threads_cpus(child.id());
        if now.len() >= 2 {
            seen = now;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(child.wait().expect("wait").success());
    assert!(
        seen.len() >= 2,
        "never saw the second configuration's thread"
    );
    assert!(
        seen.iter().all(|c| *c == mine),
        "threads {seen:?}, process mask {mine}"
    );
}
