//! KVM binary statistics (`KVM_GET_STATS_FD`, Linux 5.14+): named counters
//! such as `exits`, `insn_emulation`, `pf_taken` read without debugfs.
use std::collections::BTreeMap;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::FileExt;

use kvm_bindings::{kvm_stats_desc, kvm_stats_header};

const KVM_GET_STATS_FD: libc::c_ulong = 0xaece; // _IO(KVMIO, 0xce)
/// Fixed part of a descriptor; its name follows (`name_size` bytes).
const DESC_FIXED: usize = std::mem::size_of::<kvm_stats_desc>();

/// The header at the start of a stats file, as kvm-bindings lays it out.
fn read_header(file: &File) -> Option<kvm_stats_header> {
    let mut hdr = kvm_stats_header::default();
    // SAFETY: kvm_stats_header is repr(C) and made of u32 fields only, so
    // every byte pattern is a valid value; the slice covers exactly it and
    // lives only for this read.
    let bytes = unsafe {
        std::slice::from_raw_parts_mut(
            (&mut hdr as *mut kvm_stats_header).cast::<u8>(),
            std::mem::size_of::<kvm_stats_header>(),
        )
    };
    file.read_exact_at(bytes, 0).ok()?;
    Some(hdr)
}

/// An open statistics file of a VM or vCPU.
pub struct KvmStats {
    file: File,
    /// (name, byte offset of the value in the data block, number of u64 values)
    descs: Vec<(String, usize, usize)>,
    data_off: u64,
    data_len: usize,
}

impl KvmStats {
    /// Open the stats of a VM or vCPU fd; `None` where the kernel has none.
    pub fn open(fd: &impl AsRawFd) -> Option<KvmStats> {
        // SAFETY: KVM_GET_STATS_FD takes no argument and returns a new fd.
        let raw = unsafe { libc::ioctl(fd.as_raw_fd(), KVM_GET_STATS_FD, 0) };
        if raw < 0 {
            return None;
        }
        // SAFETY: raw is a fresh fd we own.
        let file = unsafe { File::from_raw_fd(raw) };
        let hdr = read_header(&file)?;
        let name_size = hdr.name_size as usize;
        let num = hdr.num_desc as usize;
        let desc_off = u64::from(hdr.desc_offset);
        let data_off = u64::from(hdr.data_offset);
        let u32_at = |b: &[u8], o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let dsz = DESC_FIXED + name_size;
        let mut raw_descs = vec![0u8; dsz * num];
        file.read_exact_at(&mut raw_descs, desc_off).ok()?;
        let descs = raw_descs
            .chunks_exact(dsz)
            .map(|d| {
                // kvm_stats_desc: flags u32, exponent i16, size u16, offset u32, ...
                let size = u16::from_le_bytes([d[6], d[7]]) as usize;
                let offset = u64::from(u32_at(d, 8));
                let name = &d[DESC_FIXED..];
                let end = name.iter().position(|&c| c == 0).unwrap_or(name.len());
                (
                    String::from_utf8_lossy(&name[..end]).into_owned(),
                    offset as usize,
                    size,
                )
            })
            .collect::<Vec<_>>();
        let data_len = descs.iter().map(|(_, o, s)| o + 8 * s).max().unwrap_or(0);
        Some(KvmStats {
            file,
            descs,
            data_off,
            data_len,
        })
    }

    /// Current values of all single-valued counters (one read).
    pub fn read(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        let mut data = vec![0u8; self.data_len];
        if self.file.read_exact_at(&mut data, self.data_off).is_err() {
            return m;
        }
        for (name, off, size) in &self.descs {
            if *size != 1 {
                continue;
            }
            let mut b = [0u8; 8];
            b.copy_from_slice(&data[*off..*off + 8]);
            m.insert(name.clone(), u64::from_le_bytes(b));
        }
        m
    }
}

/// `after - before` for every counter present in both.
pub fn delta(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter_map(|(k, a)| before.get(k).map(|b| (k.clone(), a.wrapping_sub(*b))))
        .collect()
}
