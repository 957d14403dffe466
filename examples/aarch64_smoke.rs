//! aarch64 end-to-end smoke test of the hypclear library with real KVM:
//! boots the blob at EL1 and at EL0 in both link configurations, runs every
//! alias-table routine the CPU supports on many sizes/offsets and checks
//! the guest memory from the host (target bytes, guard bytes, return
//! values, per-call steps), checks the deliberately broken selftest
//! routines are broken as documented, that "fault" is reported as an
//! exception with a sensible description, "hang" as a timeout and a bad
//! table index as a rejected command, and prints a few timings.
//!
//!   aarch64_smoke [--quick]
//!
//! Prints "N passed, N failed" at the end; exits 1 on any failure.
#[cfg(target_arch = "aarch64")]
fn main() -> std::process::ExitCode {
    smoke::main()
}

#[cfg(not(target_arch = "aarch64"))]
fn main() {
    eprintln!("aarch64_smoke runs on aarch64 hosts only");
}

#[cfg(target_arch = "aarch64")]
mod smoke {
    use hypclear::blob::{Blob, LinkConfig};
    use hypclear::error::Error;
    use hypclear::vmm::{self, Command, FailureKind, Privilege, Vm, VmOptions};
    use hypclear::{abi, arch, memory};
    use std::process::ExitCode;
    use std::time::{Duration, Instant};

    const T: Duration = Duration::from_secs(20);
    const GUARD: u64 = 256;

    struct Tally {
        passed: u64,
        failed: u64,
    }

    impl Tally {
        fn check(&mut self, ok: bool, what: &str) {
            if ok {
                self.passed += 1;
            } else {
                self.failed += 1;
                println!("  FAIL: {what}");
            }
        }
    }

    fn pattern(addr: u64, salt: u8) -> u8 {
        let b = ((addr.wrapping_mul(0x9e37) >> 7) as u8) ^ salt;
        if b == 0 || b == 0x5a { 0x3c } else { b }
    }

    fn fill_pattern(v: &Vm, gpa: u64, len: u64, salt: u8) {
        let s = v.ram.slice_mut(gpa, len).expect("slice");
        for (i, b) in s.iter_mut().enumerate() {
            *b = pattern(gpa + i as u64, salt);
        }
    }

    /// First offset in [gpa, gpa+len) that is not the pattern.
    fn pattern_intact(v: &Vm, gpa: u64, len: u64, salt: u8) -> Option<u64> {
        let s = v.ram.slice(gpa, len).expect("slice");
        s.iter()
            .enumerate()
            .find(|(i, b)| **b != pattern(gpa + *i as u64, salt))
            .map(|(i, _)| i as u64)
    }

    fn first_not(v: &Vm, gpa: u64, len: u64, val: u8) -> Option<u64> {
        let s = v.ram.slice(gpa, len).expect("slice");
        s.iter().position(|b| *b != val).map(|i| i as u64)
    }

    /// A seed whose load address is 2 MiB aligned (the arm64 Image protocol
    /// linux-loader's PE loader enforces), until vmm::load_address honours
    /// arch::LOAD_ALIGN itself.
    fn aligned_seed(config: LinkConfig, from: u64) -> u64 {
        let size = Blob::get(config).expect("blob").size;
        (from..)
            .find(|s| vmm::load_address(*s, size).is_ok_and(|a| a % arch::LOAD_ALIGN == 0))
            .expect("some seed")
    }

    fn new_vm(config: LinkConfig, privilege: Privilege, vcpus: u64, seed: u64) -> Vm {
        let kvm = vmm::open_kvm().expect("open /dev/kvm");
        let opts = VmOptions {
            mem: 64 << 20,
            backing: memory::Backing::Anon,
            prefault: false,
            privilege,
            config,
            vcpus,
            seed: aligned_seed(config, seed),
        };
        Vm::new(kvm, &opts).expect("Vm::new")
    }

    fn call(v: &mut Vm, cpu: usize, c: &Command) -> hypclear::error::Result<vmm::CallResult> {
        v.vcpu(cpu).expect("vcpu").call(c, T)
    }

    /// memset-like check of one alias on one (dst offset, len, fill).
    fn memset_case(v: &mut Vm, t: &mut Tally, idx: u64, name: &str, off: u64, len: u64, fill: u8) {
        let dst = arch::ARENA_BASE + 0x1000 + off;
        fill_pattern(v, dst - GUARD, len + 2 * GUARD, 0x11);
        let c = Command {
            table: 0,
            index: idx,
            a0: dst,
            a1: u64::from(fill),
            a2: len,
            count: 1,
            ..Default::default()
        };
        let what = format!("{name}(dst+{off}, {fill:#x}, {len})");
        match call(v, 0, &c) {
            Ok(r) => {
                t.check(r.ret == dst, &format!("{what}: returned {:#x}", r.ret));
                let bad = first_not(v, dst, len, fill);
                t.check(bad.is_none(), &format!("{what}: byte {bad:?} not set"));
                let g0 = pattern_intact(v, dst - GUARD, GUARD, 0x11);
                let g1 = pattern_intact(v, dst + len, GUARD, 0x11);
                t.check(
                    g0.is_none() && g1.is_none(),
                    &format!("{what}: guard changed {g0:?} {g1:?}"),
                );
            }
            Err(e) => t.check(false, &format!("{what}: {e}")),
        }
    }

    fn memcpy_case(
        v: &mut Vm,
        t: &mut Tally,
        idx: u64,
        name: &str,
        doff: u64,
        soff: u64,
        len: u64,
    ) {
        let dst = arch::ARENA_BASE + 0x1000 + doff;
        let src = arch::ARENA_BASE + (8 << 20) + soff;
        fill_pattern(v, dst - GUARD, len + 2 * GUARD, 0x22);
        fill_pattern(v, src, len, 0x33);
        let c = Command {
            table: 0,
            index: idx,
            a0: dst,
            a1: src,
            a2: len,
            count: 1,
            ..Default::default()
        };
        let what = format!("{name}(dst+{doff}, src+{soff}, {len})");
        match call(v, 0, &c) {
            Ok(r) => {
                t.check(r.ret == dst, &format!("{what}: returned {:#x}", r.ret));
                let same = v.ram.slice(dst, len).unwrap() == v.ram.slice(src, len).unwrap();
                t.check(same, &format!("{what}: copy differs"));
                let g = pattern_intact(v, dst - GUARD, GUARD, 0x22).or(pattern_intact(
                    v,
                    dst + len,
                    GUARD,
                    0x22,
                ));
                t.check(g.is_none(), &format!("{what}: guard changed"));
                t.check(
                    pattern_intact(v, src, len, 0x33).is_none(),
                    &format!("{what}: source changed"),
                );
            }
            Err(e) => t.check(false, &format!("{what}: {e}")),
        }
    }

    fn page_case(v: &mut Vm, t: &mut Tally, idx: u64, name: &str, pages: u64, copy: bool) {
        let dst = arch::ARENA_BASE + 0x10_0000;
        let src = arch::ARENA_BASE + (8 << 20);
        let len = pages * abi::PAGE_SIZE;
        fill_pattern(v, dst - 4096, len + 8192, 0x44);
        fill_pattern(v, src, len, 0x55);
        let c = Command {
            table: 0,
            index: idx,
            a0: dst,
            a1: if copy { src } else { pages },
            count: 1,
            ..Default::default()
        };
        let what = format!("{name}(npages/len {pages})");
        match call(v, 0, &c) {
            Ok(_) => {
                let ok = if copy {
                    v.ram.slice(dst, len).unwrap() == v.ram.slice(src, len).unwrap()
                } else {
                    first_not(v, dst, len, 0).is_none()
                };
                t.check(ok, &format!("{what}: wrong contents"));
                let g = pattern_intact(v, dst - 4096, 4096, 0x44).or(pattern_intact(
                    v,
                    dst + len,
                    4096,
                    0x44,
                ));
                t.check(g.is_none(), &format!("{what}: guard changed"));
            }
            Err(e) => t.check(false, &format!("{what}: {e}")),
        }
    }

    fn routines(
        config: LinkConfig,
        privilege: Privilege,
        caps: &arch::CpuCaps,
        t: &mut Tally,
        quick: bool,
    ) {
        let mut v = new_vm(config, privilege, 2, 1);
        println!(
            "== {config} blob at {} ({}), loaded at {:#x}, counter {} kHz",
            arch::privilege_name(privilege),
            arch::kvm_flavour(),
            v.loaded.base,
            v.counter_khz
        );
        let t0 = Instant::now();
        let r = v.vcpu(0).unwrap().start(T);
        t.check(r.is_ok(), &format!("start: {r:?}"));
        if r.is_err() {
            return;
        }
        println!("  vCPU 0 ready after {:?}", t0.elapsed());
        let sizes: &[u64] = if quick {
            &[0, 1, 3, 8, 17, 64, 65, 300, 4096, 70001]
        } else {
            &[
                0,
                1,
                2,
                3,
                4,
                7,
                8,
                15,
                16,
                17,
                31,
                32,
                33,
                63,
                64,
                65,
                127,
                128,
                255,
                256,
                257,
                300,
                511,
                4095,
                4096,
                4097,
                65536,
                70001,
                (2 << 20) - 1,
                2 << 20,
                (2 << 20) + 1,
            ]
        };
        let offs: &[u64] = if quick {
            &[0, 1, 63]
        } else {
            &[0, 1, 7, 8, 15, 16, 31, 63]
        };
        let aliases = v.blob.aliases.clone();
        for (i, a) in aliases.iter().enumerate() {
            let idx = i as u64;
            let needs_mops = a.name.ends_with("_mops");
            if needs_mops && !caps.has("mops") {
                println!("  skip {} (no MOPS)", a.name);
                continue;
            }
            let before = (t.passed, t.failed);
            if a.name.starts_with("memset_") {
                for &len in sizes {
                    for &off in offs {
                        for fill in [0u8, 0x5a] {
                            memset_case(&mut v, t, idx, &a.name, off, len, fill);
                        }
                    }
                }
            } else if a.name.starts_with("memcpy_") {
                for &len in sizes {
                    for &off in offs {
                        memcpy_case(&mut v, t, idx, &a.name, off, (off * 7) % 64, len);
                    }
                }
            } else if a.name.starts_with("clear_pages_") {
                for n in [0, 1, 3, 64] {
                    page_case(&mut v, t, idx, &a.name, n, false);
                }
            } else if a.name.starts_with("clear_page_") {
                page_case(&mut v, t, idx, &a.name, 1, false);
            } else if a.name.starts_with("copy_page_") {
                page_case(&mut v, t, idx, &a.name, 1, true);
            }
            println!(
                "  {:<24} {:>5} checks, {} failed",
                a.name,
                t.passed + t.failed - before.0 - before.1,
                t.failed - before.1
            );
        }

        // Steps: memset 8 pages one call each, a0 advancing by a page.
        if let Some(idx) = v.blob.alias_index("memset_generic") {
            let dst = arch::ARENA_BASE + 0x20_0000;
            fill_pattern(&v, dst, 9 * 4096, 0x66);
            let c = Command {
                table: 0,
                index: idx,
                a0: dst,
                a0_step: 4096,
                a1: 0x5a,
                a2: 100,
                count: 8,
                ..Default::default()
            };
            let r = call(&mut v, 0, &c);
            let ok = r.is_ok()
                && (0..8).all(|p| first_not(&v, dst + p * 4096, 100, 0x5a).is_none())
                && (0..8)
                    .all(|p| pattern_intact(&v, dst + p * 4096 + 100, 4096 - 100, 0x66).is_none());
            t.check(ok, &format!("stepped memset: {r:?}"));
            if let Ok(r) = r {
                t.check(
                    r.ret == dst + 7 * 4096,
                    "stepped memset returns the last dst",
                );
            }
        }

        // Timing of 2 MiB clears and copies (functional under emulation).
        for name in [
            "memset_generic",
            "memset_mops",
            "clear_pages_dczva",
            "clear_pages_stnp",
            "memcpy_generic",
            "copy_page_ldp_stnp",
        ] {
            let Some(idx) = v.blob.alias_index(name) else {
                continue;
            };
            if name.ends_with("_mops") && !caps.has("mops") {
                continue;
            }
            let dst = arch::ARENA_BASE + (16 << 20);
            let src = arch::ARENA_BASE + (32 << 20);
            let (a1, a2, count, step) = match name {
                n if n.starts_with("memset") => (0, 2 << 20, 8, 0),
                n if n.starts_with("clear_pages") => (512, 0, 8, 0),
                n if n.starts_with("memcpy") => (src, 2 << 20, 8, 0),
                _ => (src, 0, 512, 4096),
            };
            let c = Command {
                table: 0,
                index: idx,
                a0: dst,
                a0_step: step,
                a1,
                a1_step: step,
                a2,
                count,
            };
            match call(&mut v, 0, &c) {
                Ok(r) => {
                    let ns = v.ticks_to_ns(r.ticks());
                    let bytes = if name.starts_with("copy_page") {
                        2 << 20
                    } else {
                        8 * (2u64 << 20)
                    };
                    println!(
                        "  time {name:<20} {:>8.1} us for {} MiB ({:.2} GB/s)",
                        ns / 1e3,
                        bytes >> 20,
                        bytes as f64 / ns
                    );
                    t.check(r.t1 >= r.t0, "counter runs forward");
                }
                Err(e) => t.check(false, &format!("timing {name}: {e}")),
            }
        }

        // vCPU 1 has its own mailbox and stack.
        if let Some(idx) = v.blob.alias_index("memset_generic") {
            let dst = arch::ARENA_BASE + 0x40_0000;
            let c = Command {
                table: 0,
                index: idx,
                a0: dst,
                a1: 0x77,
                a2: 5000,
                count: 1,
                ..Default::default()
            };
            let r = call(&mut v, 1, &c);
            t.check(
                r.is_ok() && first_not(&v, dst, 5000, 0x77).is_none(),
                &format!("vCPU 1 memset: {r:?}"),
            );
            let mb1 = arch::mailbox_gpa(1);
            t.check(
                v.ram.read_u64(mb1 + abi::MB_RES_ID).unwrap() == 1,
                "vCPU 1 answered in its own mailbox",
            );
            let r = v.vcpu(1).unwrap().exit(T);
            t.check(r.is_ok(), &format!("vCPU 1 exit: {r:?}"));
        }
        let r = v.vcpu(0).unwrap().exit(T);
        t.check(r.is_ok(), &format!("exit: {r:?}"));
    }

    fn selftests(privilege: Privilege, t: &mut Tally) {
        let config = LinkConfig::Vanilla;
        let el = arch::privilege_name(privilege);
        println!("== selftests at {el}");
        let len = 4096u64;
        for (name, expect_at, expect_val) in [
            ("short", len - 1, None),
            ("overrun", len, Some(0x5au8)),
            ("wrong_value", len / 2, Some(0xa5u8)),
        ] {
            let mut v = new_vm(config, privilege, 1, 7);
            let idx = v.blob.selftest_index(name).expect("selftest row");
            let dst = arch::ARENA_BASE + 0x1000;
            fill_pattern(&v, dst - 4096, len + 8192, 0x77);
            let c = Command {
                table: abi::TABLE_SELFTEST,
                index: idx,
                a0: dst,
                a1: 0x5a,
                a2: len,
                count: 1,
                ..Default::default()
            };
            let r = call(&mut v, 0, &c);
            t.check(r.is_ok(), &format!("selftest {name}: {r:?}"));
            // Exactly one byte is off, at the documented place.
            let s = v.ram.slice(dst - 4096, len + 8192).unwrap().to_vec();
            let mut bad = Vec::new();
            for (i, b) in s.iter().enumerate() {
                let a = dst - 4096 + i as u64;
                let inside = a >= dst && a < dst + len;
                let want = if inside { 0x5a } else { pattern(a, 0x77) };
                if *b != want {
                    bad.push((a - dst, *b));
                }
            }
            let ok =
                bad.len() == 1 && bad[0].0 == expect_at && expect_val.is_none_or(|x| bad[0].1 == x);
            t.check(ok, &format!("selftest {name}: wrong bytes {bad:?}"));
            println!("  {name:<12} bad bytes {bad:?}");
        }

        // fault: an exception with a sensible description.
        let mut v = new_vm(config, privilege, 1, 8);
        let idx = v.blob.selftest_index("fault").unwrap();
        let c = Command {
            table: abi::TABLE_SELFTEST,
            index: idx,
            a0: arch::ARENA_BASE,
            a1: 0,
            a2: 64,
            count: 1,
            ..Default::default()
        };
        match call(&mut v, 0, &c) {
            Err(Error::Guest(f)) => {
                println!("  fault -> {f}");
                t.check(f.kind == FailureKind::Exception, "fault: kind Exception");
                t.check(
                    f.vector == Some(arch::UNDEFINED_INSTRUCTION_CLASS),
                    "fault: EC 0x00",
                );
                t.check(
                    f.pc_symbol
                        .as_deref()
                        .is_some_and(|s| s.starts_with("selftest_fault")),
                    "fault: PC in selftest_fault",
                );
                t.check(
                    f.detail.contains("undefined instruction")
                        && f.detail.contains(if privilege == Privilege::User {
                            "EL0t"
                        } else {
                            "EL1h"
                        }),
                    "fault: description",
                );
                let vec = if privilege == Privilege::User {
                    "lower EL using AArch64, synchronous"
                } else {
                    "current EL with SP_ELx, synchronous"
                };
                t.check(f.detail.contains(vec), "fault: vector");
            }
            other => t.check(
                false,
                &format!("fault: expected an exception, got {other:?}"),
            ),
        }

        // A wild store: data abort at an unmapped address (below RAM).
        let mut v = new_vm(config, privilege, 1, 9);
        let idx = v.blob.alias_index("memset_generic").unwrap();
        let c = Command {
            table: 0,
            index: idx,
            a0: 0x1000,
            a1: 0,
            a2: 64,
            count: 1,
            ..Default::default()
        };
        match call(&mut v, 0, &c) {
            Err(Error::Guest(f)) => {
                println!("  wild store -> {}", f.detail);
                let ec = if privilege == Privilege::User {
                    0x24
                } else {
                    0x25
                };
                t.check(
                    f.kind == FailureKind::Exception && f.vector == Some(ec),
                    "wild store: data abort",
                );
                t.check(
                    f.detail.contains("translation fault") && f.detail.contains("0x1000"),
                    "wild store: description",
                );
            }
            other => t.check(
                false,
                &format!("wild store: expected an exception, got {other:?}"),
            ),
        }

        // At EL0, the page tables are EL1-only: a permission fault.
        if privilege == Privilege::User {
            let mut v = new_vm(config, privilege, 1, 10);
            let idx = v.blob.alias_index("memset_generic").unwrap();
            let c = Command {
                table: 0,
                index: idx,
                a0: arch::RAM_BASE + 0x1_0000,
                a1: 0,
                a2: 64,
                count: 1,
                ..Default::default()
            };
            match call(&mut v, 0, &c) {
                Err(Error::Guest(f)) => {
                    println!("  EL0 store to page tables -> {}", f.detail);
                    t.check(
                        f.detail.contains("permission fault"),
                        "EL0 page-table store: permission fault",
                    );
                }
                other => t.check(
                    false,
                    &format!("EL0 page-table store: expected an exception, got {other:?}"),
                ),
            }
        }

        // hang: a timeout.
        let mut v = new_vm(config, privilege, 1, 11);
        let idx = v.blob.selftest_index("hang").unwrap();
        let c = Command {
            table: abi::TABLE_SELFTEST,
            index: idx,
            a0: arch::ARENA_BASE,
            a1: 0,
            a2: 64,
            count: 1,
            ..Default::default()
        };
        let t0 = Instant::now();
        let r = v.vcpu(0).unwrap().call(&c, Duration::from_secs(2));
        match r {
            Err(Error::Guest(f)) => {
                println!(
                    "  hang -> {:?} after {:?}, PC {:?}",
                    f.kind,
                    t0.elapsed(),
                    f.pc_symbol
                );
                t.check(f.kind == FailureKind::Timeout, "hang: Timeout");
                t.check(
                    f.pc_symbol
                        .as_deref()
                        .is_some_and(|s| s.starts_with("selftest_hang")),
                    "hang: PC in selftest_hang",
                );
            }
            other => t.check(false, &format!("hang: expected a timeout, got {other:?}")),
        }

        // A bad index is rejected by the dispatcher.
        let mut v = new_vm(config, privilege, 1, 12);
        let c = Command {
            table: 0,
            index: 999,
            ..Default::default()
        };
        match call(&mut v, 0, &c) {
            Err(Error::Guest(f)) => t.check(
                f.kind == FailureKind::BadCommand,
                &format!("bad index: {f}"),
            ),
            other => t.check(false, &format!("bad index: got {other:?}")),
        }
    }

    pub fn main() -> ExitCode {
        let quick = std::env::args().any(|a| a == "--quick");
        let kvm = match vmm::open_kvm() {
            Ok(k) => k,
            Err(e) => {
                println!("{e}");
                return ExitCode::from(2);
            }
        };
        let caps = arch::cpu_caps(&kvm);
        println!("CPU: {} features {:?}", caps.model, caps.features);
        println!("KVM: {}", arch::kvm_flavour());
        for (k, v) in arch::cpu_details(&kvm) {
            println!("  {k}: {v}");
        }
        drop(kvm);
        let mut t = Tally {
            passed: 0,
            failed: 0,
        };
        for privilege in [Privilege::Kernel, Privilege::User] {
            for config in [LinkConfig::Vanilla, LinkConfig::Memset] {
                routines(config, privilege, &caps, &mut t, quick);
            }
            selftests(privilege, &mut t);
        }
        println!("{} passed, {} failed", t.passed, t.failed);
        if t.failed == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    }
}
