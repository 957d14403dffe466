use hypclear::*;
use std::time::Duration;
fn main() {
    let kvm = vm::open_kvm().unwrap();
    let cpl = if std::env::args().nth(1).as_deref() == Some("0") { vm::Privilege::Kernel } else { vm::Privilege::User };
    let opts = vm::VmOptions { mem: 64 << 20, backing: memory::Backing::Anon, prefault: false, privilege: cpl, config: blob::LinkConfig::Vanilla, vcpus: 1, seed: 1 };
    let t = std::time::Instant::now();
    let mut v = vm::Vm::new(kvm, &opts).unwrap();
    println!("base {:#x} tsc {} kHz", v.loaded.base, v.counter_khz);
    let idx = v.blob.alias_index("memset_erms").unwrap();
    let ram = v.ram.clone();
    ram.slice_mut(0x100_0000, 8192).unwrap().fill(0xaa);
    let cpu = v.vcpu(0).unwrap();
    match cpu.start(Duration::from_secs(5)) { Ok(()) => println!("ready after {:?}", t.elapsed()), Err(e) => { println!("{e}"); return; } }
    let r = cpu.call(&vm::Command { table: 0, index: idx, a0: 0x100_0000, a1: 0x5a, a2: 4096, count: 1, ..Default::default() }, Duration::from_secs(5));
    match r { Ok(r) => println!("ok ticks {} ret {:#x} stats {:?}", r.ticks(), r.ret, r.stats.iter().filter(|(_, v)| **v != 0).collect::<Vec<_>>()), Err(e) => println!("{e}") }
    let s = ram.slice(0x100_0000, 8192).unwrap();
    println!("{:x} {:x} {:x}", s[0], s[4095], s[4096]);
    let sidx = v.blob.selftest_index("fault").unwrap();
    let cpu = v.vcpu(0).unwrap();
    let r = cpu.call(&vm::Command { table: 1, index: sidx, a0: 0x100_0000, a1: 0x5a, a2: 4096, count: 1, ..Default::default() }, Duration::from_secs(5));
    match r { Ok(r) => println!("ok? {:?}", r.ticks()), Err(e) => println!("{e}") }
}
