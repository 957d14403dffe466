//! The call contract the guest harness checks around every call (see the
//! ABI's module docs): what a routine must return, the canaries it must
//! leave in the callee-saved registers, and the breach it is reported by.
use crate::arch;
use hypclear_abi as abi;
use serde::Serialize;
use std::fmt;

/// What a routine must return, checked by the guest after every call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Returns {
    /// Nothing the contract names (clear_page, clear_pages, copy_page).
    #[default]
    Nothing,
    /// Its first argument (memset, memcpy: `dst`).
    Dst,
}

impl Returns {
    /// The `CMDF_*` bits of a command with this contract.
    pub(crate) fn flags(self) -> u64 {
        match self {
            Returns::Nothing => 0,
            Returns::Dst => abi::CMDF_RET_A0,
        }
    }
}

/// What broke the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum BreachKind {
    /// A callee-saved register (named as the architecture does) changed.
    CalleeSaved { register: &'static str },
    /// The stack pointer moved across the call.
    Stack,
    /// A flag the ABI wants clear on return was set (x86_64: DF).
    Flags { flag: &'static str },
    /// The return value is not `dst`.
    Return,
    /// A page fault in the page the host left unmapped next to an edge
    /// check's buffer (got: the faulting address, want: the pc).
    Fault,
}

/// The first contract breach of a command: what, in which of its calls
/// (0-based), the value found and the value wanted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Breach {
    #[serde(flatten)]
    pub kind: BreachKind,
    pub call: u64,
    pub got: u64,
    pub want: u64,
}

impl fmt::Display for Breach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (got, want) = (self.got, self.want);
        match self.kind {
            BreachKind::CalleeSaved { register } => {
                write!(f, "callee-saved {register} changed ({want:#x} -> {got:#x})")
            }
            BreachKind::Stack => write!(
                f,
                "returned with the stack pointer moved by {:+} ({want:#x} -> {got:#x})",
                got.wrapping_sub(want) as i64
            ),
            BreachKind::Flags { flag } => write!(f, "returned with {flag}=1 (flags {got:#x})"),
            BreachKind::Return => write!(f, "returned {got:#x}, want dst {want:#x}"),
            BreachKind::Fault => write!(f, "page fault at {got:#x} (pc {want:#x})"),
        }?;
        if self.call > 0 {
            write!(f, " in call {}", self.call)?;
        }
        Ok(())
    }
}

/// Why the guest's breach words could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the guest reported a contract breach it cannot have seen: word {word:#x} ({why})")]
pub struct BadBreach {
    pub word: u64,
    pub why: &'static str,
}

/// Decode `MB_RES_BREACH*` (or a slot's `SLOT_BREACH*`): `None` for no
/// breach. The guest is untrusted: a call index past `count`, a register
/// the architecture does not guard, or an unknown kind is an error.
pub fn decode(word: u64, got: u64, want: u64, count: u64) -> Result<Option<Breach>, BadBreach> {
    if word == 0 {
        return Ok(None);
    }
    let bad = |why| BadBreach { word, why };
    let (kind, reg, call) = (word & 0xff, (word >> 8) & 0xff, word >> 32);
    if (word >> 16) & 0xffff != 0 {
        return Err(bad("reserved bits set"));
    }
    if call >= count {
        return Err(bad("call index past the command's count"));
    }
    let kind = match kind {
        abi::BREACH_CALLEE_SAVED => BreachKind::CalleeSaved {
            register: arch::CALLEE_SAVED
                .get(reg as usize)
                .copied()
                .ok_or(bad("no such callee-saved register"))?,
        },
        abi::BREACH_STACK => BreachKind::Stack,
        abi::BREACH_FLAGS if !arch::RETURN_FLAGS.is_empty() => BreachKind::Flags {
            flag: arch::RETURN_FLAGS,
        },
        abi::BREACH_RETURN => BreachKind::Return,
        abi::BREACH_FAULT => BreachKind::Fault,
        _ => return Err(bad("unknown kind")),
    };
    if reg != 0 && !matches!(kind, BreachKind::CalleeSaved { .. }) {
        return Err(bad("a register index on a breach that names none"));
    }
    if got == want {
        return Err(bad("the value found is the value wanted"));
    }
    Ok(Some(Breach {
        kind,
        call,
        got,
        want,
    }))
}

/// The callee-saved canaries of a VM: distinct, seeded, each with bits set
/// in both halves and in every byte lane that matters (a routine that
/// zeroes, truncates or sign-extends a register changes it).
pub(crate) fn canaries(seed: u64) -> [u64; abi::CANARIES as usize] {
    let mut out = [0u64; abi::CANARIES as usize];
    let mut x = seed ^ 0x6361_6e61_7279_5f5f; // "canary__"
    for i in 0..out.len() {
        loop {
            // splitmix64
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            let lanes_nonzero = z.to_le_bytes().iter().all(|b| *b != 0);
            if lanes_nonzero && !out[..i].contains(&z) {
                out[i] = z;
                break;
            }
        }
    }
    out
}

const _: () = assert!(arch::CALLEE_SAVED.len() as u64 <= abi::CANARIES);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canaries_are_seeded_distinct_and_dense() {
        let a = canaries(1);
        assert_eq!(a, canaries(1));
        assert_ne!(a, canaries(2));
        for (i, c) in a.iter().enumerate() {
            assert!(c.to_le_bytes().iter().all(|b| *b != 0), "{c:#x}");
            assert!(!a[..i].contains(c));
        }
    }

    #[test]
    fn breaches_decode_and_read_as_the_issue_names_them() {
        let word = |kind: u64, reg: u64, call: u64| kind | reg << 8 | call << 32;
        let b = decode(word(abi::BREACH_CALLEE_SAVED, 0, 0), 0, 0x5e00_00a1, 1)
            .unwrap()
            .unwrap();
        assert_eq!(
            b.to_string(),
            format!(
                "callee-saved {} changed (0x5e0000a1 -> 0x0)",
                arch::CALLEE_SAVED[0]
            )
        );
        let b = decode(word(abi::BREACH_RETURN, 0, 2), 0x10, 0x20, 3)
            .unwrap()
            .unwrap();
        assert_eq!(b.to_string(), "returned 0x10, want dst 0x20 in call 2");
        let b = decode(word(abi::BREACH_STACK, 0, 0), 0x1008, 0x1000, 1)
            .unwrap()
            .unwrap();
        assert!(b.to_string().contains("moved by +8"), "{b}");
        assert_eq!(decode(0, 1, 2, 1), Ok(None));
    }

    #[test]
    fn a_hostile_breach_word_is_an_error() {
        let cs = |reg: u64| abi::BREACH_CALLEE_SAVED | reg << 8;
        assert!(decode(cs(arch::CALLEE_SAVED.len() as u64), 0, 1, 1).is_err());
        assert!(decode(abi::BREACH_RETURN | 5 << 32, 0, 1, 5).is_err());
        assert!(decode(0x77, 0, 1, 1).is_err());
        assert!(decode(abi::BREACH_RETURN | 1 << 8, 0, 1, 1).is_err());
        assert!(decode(abi::BREACH_RETURN | 1 << 20, 0, 1, 1).is_err());
        assert!(decode(abi::BREACH_RETURN, 7, 7, 1).is_err());
    }
}
