//! The host baseline: the very same routine objects the blob is built from,
//! linked into this binary (see build.rs), run natively on a host buffer.

mod generated {
    include!(concat!(env!("OUT_DIR"), "/host_routines.rs"));
}

/// A routine callable with the dispatcher's convention `fn(a0, a1, a2)`.
pub type HostFn = unsafe extern "C" fn(u64, u64, u64) -> u64;

/// The host copy of the routine behind alias `name`.
pub fn routine(name: &str) -> Option<HostFn> {
    generated::HOST_ROUTINES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| {
            // SAFETY: every routine follows the C ABI with at most three
            // integer arguments; passing unused extra argument registers is
            // harmless under the SysV x86_64 and AAPCS64 calling conventions.
            unsafe { std::mem::transmute::<unsafe extern "C" fn(), HostFn>(*f) }
        })
}

/// Names of all routines linked into the host.
pub fn names() -> Vec<&'static str> {
    generated::HOST_ROUTINES.iter().map(|(n, _)| *n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vmm::memory::{Backing, GuestRam};

    #[test]
    fn host_routines_are_linked_and_clear_memory() {
        assert!(!names().is_empty());
        let buf = GuestRam::new(0, 2 << 20, Backing::Anon, false).unwrap();
        buf.write_bytes(0, &[0xaa; 4096]).unwrap();
        let name = names()
            .into_iter()
            .find(|n| n.starts_with("memset_"))
            .expect("a memset variant");
        let f = routine(name).unwrap();
        // SAFETY: buffer is large enough.
        unsafe { f(buf.host_addr() + 3, 0x5a, 100) };
        let s = buf.slice(0, 200).unwrap();
        assert_eq!(s[2], 0xaa);
        assert!(s[3..103].iter().all(|b| *b == 0x5a));
        assert_eq!(s[103], 0xaa);
        buf.discard(0, 4096).unwrap();
        assert_eq!(buf.slice(0, 1).unwrap()[0], 0);
    }
}
