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

/// One descriptor: (name, byte offset of the value in the data block,
/// number of u64 values).
type Desc = (String, usize, usize);

/// The descriptor block: each entry a `kvm_stats_desc` followed by its
/// NUL-padded name of `name_size` bytes.
fn parse_descs(raw: &[u8], name_size: usize) -> Vec<Desc> {
    raw.chunks_exact(DESC_FIXED + name_size)
        .map(|d| {
            // SAFETY: the chunk holds at least DESC_FIXED bytes;
            // kvm_stats_desc is repr(C) with integer fields only (its `name`
            // is a zero-sized marker), so every byte pattern is a valid
            // value, and read_unaligned needs no alignment.
            let desc = unsafe { d.as_ptr().cast::<kvm_stats_desc>().read_unaligned() };
            let name = &d[DESC_FIXED..];
            let end = name.iter().position(|&c| c == 0).unwrap_or(name.len());
            (
                String::from_utf8_lossy(&name[..end]).into_owned(),
                desc.offset as usize,
                usize::from(desc.size),
            )
        })
        .collect()
}

/// An open statistics file of a VM or vCPU.
pub(crate) struct KvmStats {
    file: File,
    descs: Vec<Desc>,
    data_off: u64,
    data_len: usize,
}

impl KvmStats {
    /// Open the stats of a VM or vCPU fd; `None` where the kernel has none.
    pub(crate) fn open(fd: &impl AsRawFd) -> Option<KvmStats> {
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
        let mut raw_descs = vec![0u8; (DESC_FIXED + name_size) * num];
        file.read_exact_at(&mut raw_descs, desc_off).ok()?;
        let descs = parse_descs(&raw_descs, name_size);
        let data_len = descs.iter().map(|(_, o, s)| o + 8 * s).max().unwrap_or(0);
        Some(KvmStats {
            file,
            descs,
            data_off,
            data_len,
        })
    }

    /// Current values of all single-valued counters (one read).
    pub(crate) fn read(&self) -> BTreeMap<String, u64> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Two descriptors as the kernel lays them out (little endian): flags,
    /// exponent, size, offset, bucket_size, then the padded name.
    #[test]
    fn descriptors_parse_through_kvm_stats_desc() {
        let name_size = 8;
        let mut raw = Vec::new();
        for (name, size, offset) in [(&b"exits"[..], 1u16, 0u32), (b"hist", 4, 8)] {
            raw.extend_from_slice(&0x10u32.to_le_bytes());
            raw.extend_from_slice(&(-9i16).to_le_bytes());
            raw.extend_from_slice(&size.to_le_bytes());
            raw.extend_from_slice(&offset.to_le_bytes());
            raw.extend_from_slice(&7u32.to_le_bytes());
            let mut n = name.to_vec();
            n.resize(name_size, 0);
            raw.extend_from_slice(&n);
        }
        assert_eq!(DESC_FIXED, 16);
        assert_eq!(
            parse_descs(&raw, name_size),
            vec![("exits".to_string(), 0, 1), ("hist".to_string(), 8, 4)]
        );
        // A truncated trailing descriptor is ignored, not misread.
        assert_eq!(parse_descs(&raw[..raw.len() - 1], name_size).len(), 1);
    }

    #[test]
    fn delta_keeps_counters_present_in_both() {
        let before = BTreeMap::from([("a".to_string(), 5), ("b".to_string(), 1)]);
        let after = BTreeMap::from([("a".to_string(), 9), ("c".to_string(), 2)]);
        assert_eq!(
            delta(&before, &after),
            BTreeMap::from([("a".to_string(), 4)])
        );
    }
}
