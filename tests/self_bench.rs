//! The C helpers `ci/self-bench.sh` compiles beside hypclear's own figures:
//! the machine's first-hypercall floor (`ci/kvm-floor.c`) and its memcmp
//! bandwidth (`ci/memcmp-bw.c`). Built with the system C compiler and run as
//! the script runs them; their output is what the script parses.
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Compile `ci/<name>.c` for `test` (each test its own executable: they run
/// in parallel); None (SKIP) without a C compiler, which `.ci/run` always
/// installs.
fn build(name: &str, test: &str) -> Option<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("ci/{name}.c"));
    let dir = std::env::temp_dir().join(format!("hypclear-self-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let out = dir.join(test);
    match Command::new("cc")
        .args(["-O2", "-Wall", "-Werror", "-o"])
        .arg(&out)
        .arg(&src)
        .output()
    {
        Ok(o) if o.status.success() => Some(out),
        Ok(o) => panic!(
            "ci/{name}.c does not compile:\n{}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => {
            common::skip(&format!("{name}: no C compiler (cc): {e}"));
            None
        }
    }
}

/// `ci/kvm-floor.c` built for `test`, when KVM and a C compiler are there.
fn floor(test: &str) -> Option<PathBuf> {
    if !common::kvm_available(test) {
        return None;
    }
    build("kvm-floor", test)
}

#[test]
fn kvm_floor_times_each_step_to_the_first_exit() {
    let Some(floor) = floor("kvm_floor_times_each_step_to_the_first_exit") else {
        return;
    };
    let o = Command::new(&floor)
        .arg((64u64 << 20).to_string())
        .output()
        .expect("run kvm-floor");
    let text = common::text(&o);
    assert!(o.status.success(), "{text}");
    // "<total> create_vm <ms> memslot <ms> vcpu <ms> run <ms>"
    let out = String::from_utf8_lossy(&o.stdout);
    let w: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(w.len(), 9, "{text}");
    assert_eq!(
        [w[1], w[3], w[5], w[7]],
        ["create_vm", "memslot", "vcpu", "run"],
        "{text}"
    );
    let ms = |s: &str| s.parse::<f64>().unwrap_or_else(|_| panic!("{s:?}: {text}"));
    let total = ms(w[0]);
    let steps: f64 = [w[2], w[4], w[6], w[8]].into_iter().map(ms).sum();
    assert!(total > 0.0, "{text}");
    assert!(
        [w[2], w[4], w[6], w[8]].into_iter().all(|s| ms(s) >= 0.0),
        "{text}"
    );
    // The steps are consecutive: they add up to the total (each printed to
    // a microsecond; opening /dev/kvm is in the total and the first step).
    assert!((total - steps).abs() < 0.005, "{text}");
}

#[test]
fn kvm_floor_names_the_step_that_failed() {
    let Some(floor) = floor("kvm_floor_names_the_step_that_failed") else {
        return;
    };
    // No guest RAM can be mapped for a size of zero.
    let o = Command::new(&floor)
        .arg("0")
        .output()
        .expect("run kvm-floor");
    let text = common::text(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(o.stdout.is_empty(), "{text}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("kvm-floor: mmap guest RAM failed"),
        "{text}"
    );
}

#[test]
fn memcmp_bw_prints_each_size_and_its_bandwidth() {
    let Some(bw) = build("memcmp-bw", "memcmp_bw_prints_each_size_and_its_bandwidth") else {
        return;
    };
    let o = Command::new(&bw)
        .args(["4096", "65536"])
        .output()
        .expect("run memcmp-bw");
    let text = common::text(&o);
    assert!(o.status.success(), "{text}");
    let out = String::from_utf8_lossy(&o.stdout);
    let rows: Vec<(u64, f64)> = out
        .lines()
        .map(|l| {
            let (s, g) = l.split_once(' ').unwrap_or_else(|| panic!("{l:?}: {text}"));
            (
                s.parse().unwrap_or_else(|_| panic!("{l:?}: {text}")),
                g.parse().unwrap_or_else(|_| panic!("{l:?}: {text}")),
            )
        })
        .collect();
    assert_eq!(
        rows.iter().map(|r| r.0).collect::<Vec<_>>(),
        [4096, 65536],
        "{text}"
    );
    assert!(rows.iter().all(|r| r.1 > 0.0), "{text}");
}
