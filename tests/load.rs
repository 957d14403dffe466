//! Numbers that hold under load (issue 26): the same small bench quiet and
//! with a busy loop beside it (a spinning thread this test starts and
//! stops). Under the sample rule every cell still has its undisturbed
//! runs on both sides (>= 3 a side), or says it could not get them; and
//! the loaded guest/host agrees with the quiet one.
//!
//! The agreement criterion, measured here (2 cores shared with other
//! builds, load average 8-10, 20 pairs of this bench with a `sh` busy
//! loop): the loaded estimate fell inside the quiet 95% interval in 15 of
//! 20 pairs, which is what two independent estimates of similar precision
//! give (a 95% interval holds another estimate only ~83% of the time), and
//! the two intervals overlapped in 20 of 20. So the test asks for the
//! overlap: a loaded run that moves guest/host (the preempted-runs bias
//! this rule removes moved it by a factor 0.55-0.78 at 256 MB) fails it.
mod common;
use common::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// 4 MB passes (~0.15 ms) fit between the time slices of a busy
/// machine; 8 sessions give the interval some width to trust.
fn bench(name: &str) -> serde_json::Value {
    let args = [
        "bench",
        "clear_pages",
        "-f",
        "erms",
        "-s",
        "4MB",
        "-k",
        "4MB",
        "--config",
        "vanilla",
        "--sessions",
        "8",
        "--seed",
        "1",
    ];
    run_json(name, &args).0
}

/// A thread spinning until dropped.
struct Hog {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Hog {
    fn start() -> Hog {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut x = 0u64;
            while !s.load(Ordering::Relaxed) {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        });
        Hog {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The paired guest/host of the only cell, after checking it has its runs.
fn measured_ratio(d: &serde_json::Value, what: &str) -> (f64, f64, f64) {
    let cells = d["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 1, "{what}: {d}");
    let c = &cells[0];
    assert_eq!(c["state"]["state"], "measured", "{what}: {}", c["state"]);
    for side in ["guest_bytes_per_sec", "host_bytes_per_sec"] {
        let n = c[side]["n"].as_u64().unwrap();
        assert!(n >= 3, "{what}: {side} n = {n}");
    }
    // The same rule on both sides: no disturbed run is in the figures.
    for side in ["guest", "host"] {
        let used = c[side]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["disturbed"] == false)
            .count();
        assert_eq!(used, 8 * 3, "{what}: {side} undisturbed runs");
    }
    let r = &c["guest_host"];
    let lo = r["interval"][0].as_f64().unwrap();
    let hi = r["interval"][1].as_f64().unwrap();
    (r["estimate"].as_f64().unwrap(), lo, hi)
}

/// One quiet and one loaded bench: whether their guest/host intervals
/// overlap, and both said.
fn pair(attempt: u32) -> (bool, String) {
    let quiet = bench(&format!("load-quiet-{attempt}"));
    let loaded = {
        let _hog = Hog::start();
        bench(&format!("load-hog-{attempt}"))
    };
    let (q, qlo, qhi) = measured_ratio(&quiet, "quiet");
    let (l, llo, lhi) = measured_ratio(&loaded, "busy loop");
    let said = format!(
        "guest/host quiet {q:.3} [{qlo:.3}, {qhi:.3}], busy loop {l:.3} [{llo:.3}, {lhi:.3}]"
    );
    eprintln!("{said}");
    (llo <= qhi && qlo <= lhi, said)
}

/// A bias (the preempted runs kept moved guest/host by 0.55-0.78x) moves
/// every pair; two 95% intervals of an unbiased pair miss each other now
/// and then when the machine is busy besides (other builds on both cores),
/// so a pair that misses is measured once more and both must miss to fail.
#[test]
fn a_busy_loop_beside_the_bench_changes_neither_the_runs_nor_guest_host() {
    if !kvm_available("bench under load") {
        return;
    }
    let (ok, first) = pair(1);
    if ok {
        return;
    }
    let (ok, second) = pair(2);
    assert!(
        ok,
        "guest/host moved under load twice: {first}; then {second}"
    );
}
