//! Building and preparing a user's kernel tree's own library routines for
//! the blob: the tree ([`tree`]), kbuild ([`kbuild`]) and the kernel's
//! alternatives ([`alternatives`]) and every path they can take ([`paths`]).
//!
//! [`blob`] makes and loads kernel blob files ([`routines`]: what they
//! offer; [`guest_src`]: hypclear's entry sources shipped for the link). What the real objects carry, and how they
//! link (measured on Debian's linux-source 6.1 and 6.12, defconfig):
//!
//! * x86 6.12 (`arch/x86/lib/{memset,memcpy,clear_page,copy_page}_64.o`):
//!   `.text` / `.noinstr.text` (memset, memcpy), `.altinstructions`
//!   (14-byte entries) with empty replacements, `.export_symbol`,
//!   `__ex_table` (clear_page_64.o: rep_stos_alternative). No objtool run on
//!   single objects: no `.return_sites`, no ORC; returns are
//!   `jmp __x86_return_thunk` (R_X86_64_PLT32). Relocations: PLT32, PC32
//!   (tables), R_X86_64_64 only in `.export_symbol`.
//! * x86 6.1: 12-byte entries, replacements that jump into `.text`
//!   (PC32 in `.altinstr_replacement`), objtool ran: `.return_sites`,
//!   `.orc_unwind`/`.orc_unwind_ip`, `___ksymtab+*`, `__ksymtab_strings`.
//! * arm64 6.12 nVHE objects (`arch/arm64/lib/*.nvhe.o`): `.text` only, no
//!   alternatives, relocations only in debug sections.
//!
//! Link recipe that passes the relocation policy (tests/kernel_tree.rs):
//! `ld -r`, `objcopy --prefix-symbols=__hypclear_`, then build.rs's final
//! link flags with a script that puts `.text` and `.noinstr.text` into
//! `.pi.text`, defines `__hypclear___x86_return_thunk` as `ret; int3`
//! bytes there, keeps `.altinstr_replacement`, `.altinstructions` and
//! `.return_sites` (load-time patching), and discards `.export_symbol`,
//! `__ex_table`, `*ksymtab*`, `.orc_*`, `.discard*`, notes and debug.
pub mod side;

pub use side::{External, Side};

// The crates below, under the names the modules use.
use hypclear_arch as arch;
use hypclear_format::text;
use hypclear_process::files;
use hypclear_vmm::error;
pub mod alternatives;
pub mod blob;
pub mod external;
pub mod guest_src;
pub mod kbuild;
pub mod paths;
pub mod picks;
pub mod routines;
pub mod setup;
pub mod tree;
