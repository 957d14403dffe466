//! A cgroup memory limit is checked before anything is allocated: bench
//! and verify under a limit too small for what they touch exit 2 with a
//! message naming the need and the limit, instead of being OOM-killed
//! (issue 11: `bench -s 2GB` under a 3 GB limit died without a word).
//! Runs in a child cgroup of this process's own (v1 memory controller or
//! v2); prints SKIP where cgroups are not writable (not root, no
//! delegation). No /dev/kvm needed: the check comes before the VM.
mod common;
use common::*;
use std::path::PathBuf;

/// A child memory cgroup with a limit, removed again on drop.
struct Child {
    dir: PathBuf,
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// This process's memory cgroup directory and the limit file it uses.
fn own_memory_cgroup() -> Option<(PathBuf, &'static str)> {
    let cg = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for l in cg.lines() {
        let mut f = l.splitn(3, ':');
        let (_, ctrl, path) = (f.next()?, f.next()?, f.next()?);
        let rel = path.trim_start_matches('/');
        if ctrl.split(',').any(|c| c == "memory") {
            let d = PathBuf::from("/sys/fs/cgroup/memory").join(rel);
            if d.join("memory.limit_in_bytes").exists() {
                return Some((d, "memory.limit_in_bytes"));
            }
        }
        if ctrl.is_empty() {
            let d = PathBuf::from("/sys/fs/cgroup").join(rel);
            if d.join("cgroup.controllers").exists()
                && std::fs::read_to_string(d.join("cgroup.subtree_control"))
                    .is_ok_and(|s| s.split_whitespace().any(|c| c == "memory"))
            {
                return Some((d, "memory.max"));
            }
        }
    }
    None
}

fn child_cgroup(limit: u64) -> Result<(Child, &'static str), String> {
    let (parent, file) = own_memory_cgroup().ok_or("no memory cgroup of our own")?;
    let dir = parent.join(format!("hypclear-test-{}", std::process::id()));
    std::fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
    let child = Child { dir };
    std::fs::write(child.dir.join(file), limit.to_string()).map_err(|e| format!("{file}: {e}"))?;
    Ok((child, file))
}

#[test]
fn bench_under_a_cgroup_limit_exits_2_naming_need_and_limit() {
    const MB: u64 = 1 << 20;
    let (child, file) = match child_cgroup(256 * MB) {
        Ok(c) => c,
        Err(why) => {
            common::skip(&format!(
                "cgroup memory limit: cannot make a child cgroup ({why})"
            ));
            return;
        }
    };
    for args in [
        // Guest RAM for a 240 MB region (the host baseline runs on it):
        // ~260 MB.
        "bench memset -s 240MB -f all --sessions 1 --repeats 1 --config vanilla",
        "verify -r memset -s 200MB --mem 320MB --config vanilla",
    ] {
        // verify checks after reading the CPU through KVM.
        if args.starts_with("verify") && !kvm_available("cgroup memory limit, verify") {
            continue;
        }
        let script = format!(
            "echo $$ > '{}' && exec '{}' {args}",
            child.dir.join("cgroup.procs").display(),
            env!("CARGO_BIN_EXE_hypclear")
        );
        let out = std::process::Command::new("sh")
            .args(["-c", &script])
            .output()
            .expect("sh");
        assert_eq!(out.status.code(), Some(2), "{args}: {}", text(&out));
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains("not enough host memory"), "{args}: {e}");
        assert!(e.contains("needs"), "{args}: {e}");
        assert!(
            e.contains(&child.dir.display().to_string()) && e.contains(file),
            "{args}: the limit is not named: {e}"
        );
        assert!(
            out.stdout.is_empty(),
            "{args}: started before the check: {}",
            text(&out)
        );
    }
}
