//! The watchdog counts the vCPU's progress, not wall time: a run stopped
//! (SIGSTOP, as a frozen cgroup or a descheduled CI runner would) for
//! longer than `--timeout` and continued passes, and a real hang is still
//! cut at `--timeout` of CPU time, stopped or not, and says so.
mod common;
use common::*;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Each stop is longer than the timeout (1 s) by this much.
const STOP: Duration = Duration::from_millis(2500);

/// `hypclear ARGS`, its stdout and stderr in files under `dir` (a stopped
/// reader of a pipe would stop it too).
fn spawn(dir: &Path, args: &[&str]) -> Child {
    let file = |name: &str| std::fs::File::create(dir.join(name)).expect("output file");
    Command::new(env!("CARGO_BIN_EXE_hypclear"))
        .args(args)
        .stdout(Stdio::from(file("stdout")))
        .stderr(Stdio::from(file("stderr")))
        .spawn()
        .expect("cannot run the hypclear binary")
}

/// After each of `pauses` (while the child still runs) stop the child for
/// `STOP`, then continue it; how many stops there were.
fn stop_and_continue(child: &mut Child, pauses: &[Duration]) -> usize {
    let pid = libc::pid_t::try_from(child.id()).expect("pid");
    let mut stops = 0;
    for pause in pauses {
        std::thread::sleep(*pause);
        if child.try_wait().expect("try_wait").is_some() {
            break;
        }
        // The child is not reaped yet (try_wait said so): `pid` is still
        // it, not a recycled number.
        // SAFETY: kill has no memory preconditions.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
        std::thread::sleep(STOP);
        // SAFETY: as above; a stopped child cannot have exited.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
        stops += 1;
    }
    stops
}

fn finish(child: Child, dir: &Path) -> (Option<i32>, String, String) {
    let out = child.wait_with_output().expect("wait");
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).expect("output");
    (out.status.code(), read("stdout"), read("stderr"))
}

#[test]
fn a_run_stopped_for_longer_than_the_timeout_passes() {
    if !kvm_available("watchdog_stopped_run") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = spawn(dir.path(), &["run", "--seed", "1", "--timeout", "1"]);
    // `run` takes about 3 s of progress here, most of it in the guest: three
    // stops, each 2.5 s, one of them at least inside a command's wait.
    let pauses = [400, 500, 500].map(Duration::from_millis);
    let stops = stop_and_continue(&mut child, &pauses);
    let (code, stdout, stderr) = finish(child, dir.path());
    let all = format!("{stops} stops; status {code:?}\n{stdout}\n{stderr}");
    assert!(
        stops >= 1,
        "the run ended before it could be stopped: {all}"
    );
    assert_eq!(code, Some(0), "{all}");
    assert!(stdout.contains("hypclear run: PASS"), "{all}");
    assert!(!all.contains("no progress"), "{all}");
}

#[test]
fn a_hang_is_cut_at_the_timeout_of_cpu_time_though_stopped_meanwhile() {
    if !kvm_available("watchdog_stopped_hang") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("spin.json");
    let json_arg = json.to_str().expect("temp path is UTF-8");
    let args = [
        "selftest",
        "--hostile",
        "--case",
        "spin",
        "--seed",
        "1",
        "--timeout",
        "1",
        "--json",
        json_arg,
    ];
    let mut child = spawn(dir.path(), &args);
    let stops = stop_and_continue(&mut child, &[Duration::from_millis(500)]);
    let (code, stdout, stderr) = finish(child, dir.path());
    let all = format!("{stops} stops; status {code:?}\n{stdout}\n{stderr}");
    assert_eq!(stops, 1, "{all}");
    assert_eq!(code, Some(0), "{all}");
    let doc = read_json(&json);
    let case = &doc["cases"][0];
    assert_eq!(case["kind"], "timeout", "{case}");
    let seen = case["observed"].as_str().unwrap_or_default();
    assert!(
        seen.contains("no progress for 1.0 s of vCPU CPU time"),
        "{seen}"
    );
    // The 2.5 s stop came on top of the second of CPU time.
    let took = case["seconds"].as_f64().unwrap_or_default();
    assert!(took >= 1.0 + STOP.as_secs_f64(), "{took} s: {case}");
}
