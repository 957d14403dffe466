//! x86_64 descriptor tables and vCPU register state for 64-bit mode, entered
//! directly at CPL 3 (user code 0x33 / data 0x2b) or CPL 0 (0x08 / 0x10).
use super::layout::*;
use hypclear_abi as abi;
use kvm_bindings::{kvm_regs, kvm_segment, kvm_sregs};

pub(crate) const CR0_PE: u64 = 1 << 0;
pub(crate) const CR0_MP: u64 = 1 << 1;
pub(crate) const CR0_ET: u64 = 1 << 4;
pub(crate) const CR0_NE: u64 = 1 << 5;
pub(crate) const CR0_WP: u64 = 1 << 16;
pub(crate) const CR0_AM: u64 = 1 << 18;
pub(crate) const CR0_PG: u64 = 1 << 31;
pub(crate) const CR4_PAE: u64 = 1 << 5;
pub(crate) const CR4_OSFXSR: u64 = 1 << 9;
pub(crate) const CR4_OSXMMEXCPT: u64 = 1 << 10;
pub(crate) const EFER_SCE: u64 = 1 << 0;
pub(crate) const EFER_LME: u64 = 1 << 8;
pub(crate) const EFER_LMA: u64 = 1 << 10;
pub(crate) const EFER_NXE: u64 = 1 << 11;

/// Privilege level the guest code runs at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Cpl {
    Kernel = 0,
    User = 3,
}

/// Flat 64-bit GDT descriptor: access byte and flags nibble.
const fn descriptor(access: u64, flags: u64) -> u64 {
    0xffff | (access << 40) | (0xf << 48) | (flags << 52)
}

/// GDT image: 8-byte descriptors, with a 16-byte TSS descriptor per vCPU.
pub(crate) fn gdt(vcpus: u64) -> Vec<u64> {
    let mut g = vec![0u64; (SEL_TSS0 as usize / 8) + 2 * vcpus as usize];
    g[(SEL_KERNEL_CODE / 8) as usize] = descriptor(0x9b, 0xa); // P, DPL0, code, L, G
    g[(SEL_KERNEL_DATA / 8) as usize] = descriptor(0x93, 0xc); // P, DPL0, data, DB, G
    g[(SEL_USER_DATA / 8) as usize] = descriptor(0xf3, 0xc); // P, DPL3, data
    g[(SEL_USER_CODE / 8) as usize] = descriptor(0xfb, 0xa); // P, DPL3, code, L
    for v in 0..vcpus {
        let base = tss_gpa(v);
        let limit = TSS_SIZE - 1;
        let lo = (limit & 0xffff)
            | ((base & 0xff_ffff) << 16)
            | (0x8b << 40) // P, busy 64-bit TSS
            | (((base >> 24) & 0xff) << 56);
        let i = (tss_selector(v) / 8) as usize;
        g[i] = lo;
        g[i + 1] = base >> 32;
    }
    g
}

/// A 64-bit TSS whose RSP0 is the vCPU's exception stack (no I/O bitmap).
pub(crate) fn tss(vcpu: u64) -> [u8; TSS_SIZE as usize] {
    let mut t = [0u8; TSS_SIZE as usize];
    t[4..12].copy_from_slice(&exception_stack_top(vcpu).to_le_bytes());
    t[0x66..0x68].copy_from_slice(&(TSS_SIZE as u16).to_le_bytes());
    t
}

/// IDT: one DPL 0 interrupt gate per vector, pointing at the blob's stubs.
pub(crate) fn idt(vectors: u64) -> Vec<u64> {
    let mut t = Vec::with_capacity(2 * IDT_VECTORS as usize);
    for v in 0..IDT_VECTORS {
        let h = vectors + v * VECTOR_STUB_SIZE;
        t.push(
            (h & 0xffff)
                | (u64::from(SEL_KERNEL_CODE) << 16)
                | (0x8e << 40) // P, DPL0, 64-bit interrupt gate
                | (((h >> 16) & 0xffff) << 48),
        );
        t.push(h >> 32);
    }
    t
}

fn segment(selector: u16, dpl: u8, code: bool) -> kvm_segment {
    kvm_segment {
        base: 0,
        limit: 0xffff_ffff,
        selector: selector | u16::from(dpl),
        type_: if code { 0xb } else { 0x3 },
        present: 1,
        dpl,
        db: u8::from(!code),
        s: 1,
        l: u8::from(code),
        g: 1,
        avl: 0,
        unusable: 0,
        padding: 0,
    }
}

/// Special registers for 64-bit mode at `cpl`, with GS based at the mailbox.
pub(crate) fn sregs(mut s: kvm_sregs, cpl: Cpl, vcpu: u64, pml4: u64) -> kvm_sregs {
    let (code, data, dpl) = match cpl {
        Cpl::User => (SEL_USER_CODE, SEL_USER_DATA, 3),
        Cpl::Kernel => (SEL_KERNEL_CODE, SEL_KERNEL_DATA, 0),
    };
    s.cs = segment(code, dpl, true);
    s.ds = segment(data, dpl, false);
    s.es = s.ds;
    s.fs = s.ds;
    s.ss = s.ds;
    s.gs = s.ds;
    s.gs.base = mailbox_gpa(vcpu);
    s.tr = kvm_segment {
        base: tss_gpa(vcpu),
        limit: (TSS_SIZE - 1) as u32,
        selector: tss_selector(vcpu),
        type_: 0xb,
        present: 1,
        s: 0,
        ..Default::default()
    };
    s.ldt = kvm_segment {
        type_: 0x2,
        present: 1,
        ..Default::default()
    };
    s.gdt.base = GDT_GPA;
    s.gdt.limit = (gdt(abi::MAX_VCPUS).len() * 8 - 1) as u16;
    s.idt.base = IDT_GPA;
    s.idt.limit = (IDT_VECTORS * 16 - 1) as u16;
    s.cr0 = CR0_PE | CR0_MP | CR0_ET | CR0_NE | CR0_WP | CR0_AM | CR0_PG;
    s.cr3 = pml4;
    s.cr4 = CR4_PAE | CR4_OSFXSR | CR4_OSXMMEXCPT;
    s.efer = EFER_SCE | EFER_LME | EFER_LMA | EFER_NXE;
    s
}

/// General registers at entry: RIP at the blob's entry, RSP at the stack top.
pub fn regs(entry: u64, vcpu: u64) -> kvm_regs {
    kvm_regs {
        rip: entry,
        rsp: stack_top(vcpu),
        rflags: 0x2,
        ..Default::default()
    }
}

/// Whether the registers are the power-on/INIT state (real mode at
/// F000:FFF0) rather than anything this harness's 64-bit guests can reach
/// (they start in long mode and nothing in them leaves it): kvm_amd
/// re-INITs the vCPU on a shutdown intercept (the VMCB is undefined after
/// one), so the guest's own registers are gone; VMX and PVM keep them.
pub(crate) fn is_init_state(r: &kvm_regs, s: &kvm_sregs) -> bool {
    r.rip == 0xfff0 && s.cs.selector == 0xf000 && s.cs.base == 0xffff_0000 && s.cr0 & CR0_PE == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_descriptors_match_linux_values() {
        let g = gdt(1);
        assert_eq!(g[1], 0x00af_9b00_0000_ffff);
        assert_eq!(g[2], 0x00cf_9300_0000_ffff);
        assert_eq!(g[5], 0x00cf_f300_0000_ffff);
        assert_eq!(g[6], 0x00af_fb00_0000_ffff);
    }

    #[test]
    fn tss_descriptor_encodes_base_and_limit() {
        let g = gdt(2);
        let i = (tss_selector(1) / 8) as usize;
        let base = tss_gpa(1);
        assert_eq!(g[i] & 0xffff, TSS_SIZE - 1);
        assert_eq!((g[i] >> 16) & 0xff_ffff, base & 0xff_ffff);
        assert_eq!((g[i] >> 40) & 0xff, 0x8b);
        assert_eq!(g[i + 1], base >> 32);
    }

    #[test]
    fn idt_gate_splits_handler_address() {
        let h = 0x1234_5678_9abc_def0u64;
        let t = idt(h);
        assert_eq!(t.len(), 64);
        assert_eq!(t[0] & 0xffff, 0xdef0);
        assert_eq!((t[0] >> 48) & 0xffff, 0x9abc);
        assert_eq!(t[1], 0x1234_5678);
        assert_eq!((t[0] >> 16) & 0xffff, u64::from(SEL_KERNEL_CODE));
        let h3 = h + 3 * VECTOR_STUB_SIZE;
        assert_eq!(t[6] & 0xffff, h3 & 0xffff);
    }

    #[test]
    fn user_mode_selectors_have_rpl3() {
        let s = sregs(kvm_sregs::default(), Cpl::User, 0, 0x10000);
        assert_eq!(s.cs.selector, 0x33);
        assert_eq!(s.ss.selector, 0x2b);
        assert_eq!(s.cs.dpl, 3);
        assert_eq!(s.gs.base, mailbox_gpa(0));
        assert_eq!(s.cr0, 0x8005_0033);
        let k = sregs(kvm_sregs::default(), Cpl::Kernel, 1, 0x10000);
        assert_eq!(k.cs.selector, 0x08);
        assert_eq!(k.tr.selector, tss_selector(1));
    }

    #[test]
    fn tss_rsp0_points_at_exception_stack() {
        let t = tss(2);
        let rsp0 = u64::from_le_bytes(t[4..12].try_into().unwrap());
        assert_eq!(rsp0, exception_stack_top(2));
        assert_eq!(rsp0 % 16, 0);
        assert_eq!(stack_top(2) % 16, 0);
    }

    #[test]
    fn only_the_power_on_state_counts_as_reinitialised() {
        // What kvm_amd leaves after KVM_EXIT_SHUTDOWN (measured under QEMU's
        // SVM): RIP 0xfff0, CS 0xf000 based at 0xffff0000, CR0 ET only.
        let mut s = kvm_sregs::default();
        s.cs.selector = 0xf000;
        s.cs.base = 0xffff_0000;
        s.cr0 = CR0_ET;
        let r = kvm_regs {
            rip: 0xfff0,
            rdx: 0x00a0_0f11,
            ..Default::default()
        };
        assert!(is_init_state(&r, &s));
        // The guest's own state, even at the same RIP, is not.
        let k = sregs(kvm_sregs::default(), Cpl::Kernel, 0, 0x10000);
        assert!(!is_init_state(&r, &k));
        assert!(!is_init_state(&regs(0xfff0, 0), &k));
        let mut protected = s;
        protected.cr0 |= CR0_PE;
        assert!(!is_init_state(&r, &protected));
        let moved = kvm_regs { rip: 0xfff3, ..r };
        assert!(!is_init_state(&moved, &s));
    }
}
