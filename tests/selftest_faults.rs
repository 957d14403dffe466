//! Every injected fault must be detected as its own kind of failure, in a
//! real VM (library API, one VM per fault), and the CLI must say N/N.
mod common;
use common::*;
use hypclear_check::selftest::{self, Expect};
use hypclear_routines::privilege::{self, CplChoice, ElChoice, Request};
use hypclear_vmm::VmOptions;
use hypclear_vmm::blob::{Blob, LinkConfig};
use hypclear_vmm::memory::Backing;
use std::time::Duration;

fn case(name: &str, expected: Expect) {
    seeded(name, expected, 3);
}

/// `case` with the patterns of `seed`.
fn seeded(name: &str, expected: Expect, seed: u64) {
    if !kvm_available(name) {
        return;
    }
    let p = privilege::choose(Request {
        cpl: CplChoice::Auto,
        el: ElChoice::Auto,
    })
    .expect("privilege");
    for config in [LinkConfig::Vanilla, LinkConfig::Memset] {
        let opts = VmOptions {
            mem: 64 << 20,
            backing: Backing::Anon,
            prefault: false,
            privilege: p.privilege,
            blob: Blob::get(config).expect("blob"),
            vcpus: 1,
            seed,
            vm_type: hypclear_vmm::VmType::Normal,
        };
        let r = selftest::run_case(
            &opts,
            &config.into(),
            name,
            expected,
            Duration::from_secs(2),
        )
        .unwrap_or_else(|e| panic!("{name} ({config}): {e}"));
        assert!(
            r.detected,
            "{name} ({config}) not detected as {expected:?}: {}",
            r.observed
        );
    }
}

#[test]
fn short_by_one_byte() {
    case("short", Expect::Short);
}

#[test]
fn overrun_into_guard() {
    case("overrun", Expect::Overrun);
}

#[test]
fn wrong_value() {
    case("wrong_value", Expect::WrongValue);
}

#[test]
fn exception_reports_vector_and_pc() {
    case("fault", Expect::Exception);
}

#[test]
fn hang_fires_watchdog() {
    case("hang", Expect::Timeout);
}

#[test]
fn source_change_blamed_on_its_copy_only() {
    case("source", Expect::SourceModified);
}

#[test]
fn short_copy_caught_where_a_copy_left_its_result() {
    case("copy_short", Expect::CopyShort);
}

#[test]
fn contract_breaches_caught_each_as_its_kind() {
    case("clobber", Expect::CalleeSaved);
    case("stack", Expect::StackMoved);
    case("bad_return", Expect::WrongReturn);
    case("overrun", Expect::EdgeOverrun);
    if cfg!(target_arch = "x86_64") {
        case("direction", Expect::FlagSet);
    }
}

#[test]
fn a_stray_write_far_away_is_caught_and_located() {
    case("hostile_stray_write", Expect::StrayWrite);
    // Seed 204's guard byte at the stray's address is the inverted fill
    // byte the case writes there: the rerun with the guard pattern cannot
    // see it, the one with its complement does.
    seeded("hostile_stray_write", Expect::StrayWrite, 204);
}

#[test]
fn a_truncated_pointer_faults_at_its_low_32_bits() {
    // Both architectures map the arena far above 4 GiB (x86_64: the
    // direct map, aarch64: the hyp VA) and nothing of RAM below it.
    case("truncate", Expect::TruncatedPointer);
}

#[test]
fn writing_text_or_running_data_faults_w_xor_x() {
    if hypclear_arch::WRITE_XOR_EXECUTE {
        case("patch_text", Expect::TextWritten);
        case("exec_data", Expect::DataExecuted);
    }
}

#[test]
fn tail_residue_caught_by_the_default_geometry() {
    case("tail_37", Expect::TailResidue);
}

#[test]
fn cli_reports_all_detected() {
    if !kvm_available("selftest cli") {
        return;
    }
    let out = hypclear(&["selftest", "--config", "vanilla", "--timeout", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    // aarch64 has every case but x86_64's DF one (`direction`).
    let n = if cfg!(target_arch = "x86_64") { 17 } else { 16 };
    assert!(
        stdout.contains(&format!("{n}/{n} injected faults detected")),
        "{stdout}"
    );
}

#[test]
fn a_selftest_routine_can_not_pass_as_correct() {
    // Guard against a checker that always says "pass": the same broken
    // routine run as a check must yield a failing verdict.
    if !kvm_available("selftest negative") {
        return;
    }
    let p = privilege::choose(Request {
        cpl: CplChoice::Auto,
        el: ElChoice::Auto,
    })
    .expect("privilege");
    let opts = VmOptions {
        mem: 64 << 20,
        backing: Backing::Anon,
        prefault: false,
        privilege: p.privilege,
        blob: Blob::get(LinkConfig::Vanilla).expect("blob"),
        vcpus: 1,
        seed: 11,
        vm_type: hypclear_vmm::VmType::Normal,
    };
    let r = selftest::run_case(
        &opts,
        &LinkConfig::Vanilla.into(),
        "short",
        Expect::Overrun,
        Duration::from_secs(2),
    )
    .unwrap();
    assert!(
        !r.detected,
        "a short write must not be accepted as an overrun"
    );
}
