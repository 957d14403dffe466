//! The guest <-> host call ABI, defined once.
//!
//! `build.rs` includes this file and generates `hypclear_abi.h` for the guest
//! blob from it, so the numbers below are the only definition of the ABI.
//!
//! * **Doorbell**: a guest-physical page with no memslot behind it. A 64-bit
//!   store of a hypercall number to [`DOORBELL_GPA`] exits to the host as
//!   `KVM_EXIT_MMIO` on every KVM flavour (VMX, SVM, PVM, arm64), at any
//!   privilege level.
//! * **Mailbox**: [`MAILBOX_SIZE`] bytes of guest RAM per vCPU (where is up to the
//!   architecture's layout, `crates/arch/src/<arch>/layout.rs`), holding the command the host wants run
//!   and the results/fault details the guest reports. The guest finds its
//!   mailbox through a per-CPU register (x86_64: the GS base; aarch64:
//!   TPIDRRO_EL0), set by the host before the first entry.
//!
//! Protocol: the guest rings `HC_READY`; the host writes a command into the
//! mailbox and resumes; the guest runs it and rings `HC_RESULT`; and so on
//! until the host writes `CMD_EXIT`, answered by `HC_DONE`. `HC_LOG` and
//! `HC_FAIL` may be rung at any time.
//!
//! Batches: `CMD_BATCH` runs `MB_BATCH_N` commands from the slots at
//! `MB_SLOTS` one after the other, each exactly like a `CMD_CALL` (the
//! guest copies slot `i` into the `MB_CMD_*` fields, runs it, copies
//! `MB_RES_T0/T1/RET` back into the slot), with `MB_BATCH_CUR` naming the
//! slot running, and rings `HC_RESULT` once at the end: one exit for up to
//! `BATCH_SLOTS` commands, each still timed on its own.
//!
//! The call contract: around every call the guest loads each callee-saved
//! register with its canary from `MB_CANARIES` (written by the host, seeded,
//! distinct), enters with the flags the ABI requires (x86_64: DF clear), and
//! afterwards compares the registers, the stack pointer, the flags and, where
//! `CMDF_RET_A0` is set, the return value against `a0`. The first breach
//! ends that command's calls and is reported in `MB_RES_BREACH*` (a slot's
//! `SLOT_BREACH*`): kind and register in the low bits, the index of the
//! failing call above them, the value found and the value wanted. The
//! harness keeps its own state in `MB_RUN_*`, so nothing it needs lives in a
//! register a routine could break.

/// Size of a page everywhere in the ABI.
pub const PAGE_SIZE: u64 = 4096;

/// Guest-physical (and, identity mapped, guest-virtual) doorbell address.
/// No memslot covers it; see the module docs.
pub const DOORBELL_GPA: u64 = 0x00ff_ffff_f000;

/// The doorbell's value word: an 8-byte store here hands the host one
/// 64-bit value as the exit's data, so results reach the host without it
/// reading guest RAM (a pKVM protected VM's, which it must not touch while
/// the VM lives: `CMD_SEALED`).
pub const DOORBELL_VALUE: u64 = DOORBELL_GPA + 8;

/// Maximum number of vCPUs the fixed layout has room for.
pub const MAX_VCPUS: u64 = 16;

/// Bytes of guest RAM per vCPU mailbox: the command page, then the batch
/// slots (enough for a full-geometry batch of small checks per exit).
pub const MAILBOX_SIZE: u64 = 0x1_0000;

// ---- Hypercall numbers: the value stored to the doorbell. ----
/// Guest is up and waiting for its first command.
pub const HC_READY: u64 = 0x4843_0001;
/// A command finished; `RES_*` fields are valid.
pub const HC_RESULT: u64 = 0x4843_0002;
/// `LOG_LEN` bytes of text at `LOG_BUF` are a message for the host.
pub const HC_LOG: u64 = 0x4843_0003;
/// Something failed in the guest; `FAIL_*` fields say what.
pub const HC_FAIL: u64 = 0x4843_0004;
/// Guest saw `CMD_EXIT` and is finished.
pub const HC_DONE: u64 = 0x4843_0005;

// ---- Command opcodes (`MB_CMD_OP`). ----
/// Call a routine `MB_CMD_COUNT` times (see `MB_CMD_*`) and time the loop.
pub const CMD_CALL: u64 = 1;
/// Stop: the guest answers with `HC_DONE`.
pub const CMD_EXIT: u64 = 2;
/// Run the `MB_BATCH_N` commands in the slots (see the module docs).
pub const CMD_BATCH: u64 = 3;
/// For a guest whose RAM the host may not read (a protected VM): the host
/// writes this command before the first entry; the guest rings `HC_READY`
/// (the host answers without looking at the mailbox), runs the `MB_CMD_*`
/// call like `CMD_CALL`, stores `MB_RES_T0` then `MB_RES_T1` to
/// [`DOORBELL_VALUE`], rings `HC_RESULT` and powers off (aarch64: PSCI
/// SYSTEM_OFF by HVC). Only the aarch64 guest implements it.
pub const CMD_SEALED: u64 = 4;

// ---- Tables a command can call through (`MB_CMD_TABLE`). ----
/// The alias table: the only way to reach the `__pi_` library routines.
pub const TABLE_ALIAS: u64 = 0;
/// The selftest table: deliberately broken routines, outside the alias table.
pub const TABLE_SELFTEST: u64 = 1;
/// The alias table of a second blob loaded beside the first in the same
/// guest (an A/B bench: two sides on the same pages, call by call); the
/// host writes its relocated bounds to `MB_BESIDE_START`/`_END` (0: none).
pub const TABLE_BESIDE: u64 = 2;

// ---- Fail codes (`MB_FAIL_CODE`). ----
/// A CPU exception; details are architecture specific (see `MB_FAIL_D*`).
pub const FAIL_EXCEPTION: u64 = 1;
/// aarch64: set in D4 (with the vector offset) when the exception was
/// taken to EL2 (VBAR_EL2), so D0-D3 are ESR_EL2, ELR_EL2, FAR_EL2, SPSR_EL2.
pub const FAIL_EXC_EL2: u64 = 0x1_0000;
/// The command named a table or index that does not exist.
pub const FAIL_BAD_COMMAND: u64 = 2;

// ---- Command flags (`MB_CMD_FLAGS`, `SLOT_FLAGS`). ----
/// The routine returns its first argument (memset, memcpy: dst).
pub const CMDF_RET_A0: u64 = 1;

// ---- Contract breaches (`MB_RES_BREACH`: kind | reg << 8 | call << 32). ----
/// A callee-saved register changed; bits 8..16 name it (its index in
/// `MB_CANARIES`, in the architecture's order).
pub const BREACH_CALLEE_SAVED: u64 = 1;
/// The stack pointer is not where it was before the call.
pub const BREACH_STACK: u64 = 2;
/// x86_64: the routine returned with DF set (got: RFLAGS).
pub const BREACH_FLAGS: u64 = 3;
/// The return value is not `a0` (with `CMDF_RET_A0`).
pub const BREACH_RETURN: u64 = 4;
/// The routine touched `MB_HOLE`'s page (got: the faulting address, want:
/// the faulting pc): the call ends there, the guest goes on.
pub const BREACH_FAULT: u64 = 5;
/// Callee-saved canaries in the mailbox (x86_64 uses 6, aarch64 12).
pub const CANARIES: u64 = 12;

// ---- Mailbox layout: byte offsets of 64-bit fields. ----
/// Magic written by the host, checked by the guest on entry.
pub const MB_MAGIC: u64 = 0x00;
pub const MAILBOX_MAGIC: u64 = 0x6879_7063_6c65_6172; // "hypclear"
/// vCPU index, written by the host.
pub const MB_VCPU: u64 = 0x08;
/// Command sequence number; echoed as `MB_RES_ID`.
pub const MB_CMD_ID: u64 = 0x10;
pub const MB_CMD_OP: u64 = 0x18;
pub const MB_CMD_TABLE: u64 = 0x20;
pub const MB_CMD_INDEX: u64 = 0x28;
/// First argument and how much it advances after each call.
pub const MB_CMD_A0: u64 = 0x30;
pub const MB_CMD_A0_STEP: u64 = 0x38;
/// Second argument and its per-call step (a source pointer moves, a fill byte does not).
pub const MB_CMD_A1: u64 = 0x40;
pub const MB_CMD_A1_STEP: u64 = 0x48;
/// Third argument (constant).
pub const MB_CMD_A2: u64 = 0x50;
/// Number of calls.
pub const MB_CMD_COUNT: u64 = 0x58;
/// `CMD_BATCH`: how many slots to run (1..=`BATCH_SLOTS`), and the slot
/// the guest is running (written by the guest before each slot).
pub const MB_BATCH_N: u64 = 0x60;
pub const MB_BATCH_CUR: u64 = 0x68;
/// `CMDF_*` bits of the command (a slot's own in `SLOT_FLAGS`).
pub const MB_CMD_FLAGS: u64 = 0x70;
/// Echo of `MB_CMD_ID` for the finished command.
pub const MB_RES_ID: u64 = 0x80;
/// Guest timestamp (TSC / CNTVCT) before the first call and after the last.
pub const MB_RES_T0: u64 = 0x88;
pub const MB_RES_T1: u64 = 0x90;
/// Return value of the last call.
pub const MB_RES_RET: u64 = 0x98;
/// The first contract breach (0: none), the value found, the value wanted.
pub const MB_RES_BREACH: u64 = 0xa0;
pub const MB_RES_BREACH_GOT: u64 = 0xa8;
pub const MB_RES_BREACH_WANT: u64 = 0xb0;
/// Fail code and details. For `FAIL_EXCEPTION` on x86_64: D0 vector,
/// D1 error code, D2 RIP, D3 CR2, D4 RSP, D5 CS. On aarch64: D0 ESR_EL1,
/// D1 ELR_EL1, D2 FAR_EL1, D3 SPSR_EL1, D4 vector offset, D5 SP (the _EL2
/// registers, and `FAIL_EXC_EL2` in D4, for an exception taken to EL2).
pub const MB_FAIL_CODE: u64 = 0xc0;
pub const MB_FAIL_D0: u64 = 0xc8;
pub(crate) const MB_FAIL_D1: u64 = 0xd0;
pub(crate) const MB_FAIL_D2: u64 = 0xd8;
pub(crate) const MB_FAIL_D3: u64 = 0xe0;
pub(crate) const MB_FAIL_D4: u64 = 0xe8;
pub(crate) const MB_FAIL_D5: u64 = 0xf0;
/// The batch slots: `BATCH_SLOTS` of `SLOT_SIZE` bytes from `MB_SLOTS`,
/// each `SLOT_TABLE`..`SLOT_COUNT` laid out like `MB_CMD_TABLE`..
/// `MB_CMD_COUNT`, then the slot's results.
pub const MB_SLOTS: u64 = 0x1000;
pub const SLOT_SIZE: u64 = 0x78;
pub const BATCH_SLOTS: u64 = 512;
pub const SLOT_TABLE: u64 = 0x00;
pub const SLOT_INDEX: u64 = 0x08;
pub const SLOT_A0: u64 = 0x10;
pub const SLOT_A0_STEP: u64 = 0x18;
pub const SLOT_A1: u64 = 0x20;
pub const SLOT_A1_STEP: u64 = 0x28;
pub const SLOT_A2: u64 = 0x30;
pub const SLOT_COUNT: u64 = 0x38;
pub const SLOT_T0: u64 = 0x40;
pub const SLOT_T1: u64 = 0x48;
pub const SLOT_RET: u64 = 0x50;
pub const SLOT_FLAGS: u64 = 0x58;
pub const SLOT_BREACH: u64 = 0x60;
pub const SLOT_BREACH_GOT: u64 = 0x68;
pub const SLOT_BREACH_WANT: u64 = 0x70;
/// Length and text of a `HC_LOG` message.
pub const MB_LOG_LEN: u64 = 0x100;
/// `CANARIES` callee-saved canaries (host-written, read by the guest).
pub const MB_CANARIES: u64 = 0x180;
/// The harness's own state during a command (guest-private; the host
/// never reads it): routine, current a0 and a1, calls left, calls done,
/// the stack pointer at the call, the first timestamp.
pub const MB_RUN_ROUTINE: u64 = 0x200;
pub const MB_RUN_A0: u64 = 0x208;
pub const MB_RUN_A1: u64 = 0x210;
pub const MB_RUN_LEFT: u64 = 0x218;
pub const MB_RUN_DONE: u64 = 0x220;
pub const MB_RUN_SP: u64 = 0x228;
pub const MB_RUN_T0: u64 = 0x230;
/// aarch64: the link register of the harness across a command.
pub const MB_RUN_LR: u64 = 0x238;
/// Host-written: the guest-virtual page the host left unmapped for the
/// edge checks (a buffer ending or starting against it), 0 for none.
pub const MB_HOLE: u64 = 0x240;
/// Host-written: the guest-virtual first row and end of the second blob's
/// alias table (`TABLE_BESIDE`), both 0 when no blob is beside.
pub const MB_BESIDE_START: u64 = 0x248;
pub const MB_BESIDE_END: u64 = 0x250;
pub const MB_LOG_BUF: u64 = 0x800;
pub const LOG_BUF_SIZE: u64 = 0x800;

// The slots follow the command page (its log text included) within the
// mailbox, and a slot's command fields mirror `MB_CMD_TABLE..=MB_CMD_COUNT`
// (the guest copies them as eight consecutive words).
const _: () = assert!(MB_SLOTS >= MB_LOG_BUF + LOG_BUF_SIZE && MB_SLOTS == PAGE_SIZE);
const _: () = assert!(MB_SLOTS + BATCH_SLOTS * SLOT_SIZE <= MAILBOX_SIZE);
const _: () = assert!(SLOT_TABLE == 0 && SLOT_COUNT == MB_CMD_COUNT - MB_CMD_TABLE);
const _: () = assert!(SLOT_INDEX == MB_CMD_INDEX - MB_CMD_TABLE);
const _: () = assert!(SLOT_A0 == MB_CMD_A0 - MB_CMD_TABLE && SLOT_A2 == MB_CMD_A2 - MB_CMD_TABLE);
const _: () = assert!(SLOT_A0_STEP == MB_CMD_A0_STEP - MB_CMD_TABLE);
const _: () =
    assert!(SLOT_A1 == MB_CMD_A1 - MB_CMD_TABLE && SLOT_A1_STEP == MB_CMD_A1_STEP - MB_CMD_TABLE);
const _: () = assert!(SLOT_T0 >= SLOT_COUNT + 8 && SLOT_BREACH_WANT + 8 <= SLOT_SIZE);
const _: () = assert!(MB_CMD_FLAGS > MB_BATCH_CUR && MB_CMD_FLAGS < MB_RES_ID);
const _: () = assert!(MB_RES_BREACH_WANT < MB_FAIL_CODE);
const _: () =
    assert!(MB_CANARIES >= MB_LOG_LEN + 8 && MB_CANARIES + 8 * CANARIES <= MB_RUN_ROUTINE);
const _: () = assert!(MB_HOLE + 8 <= MB_BESIDE_START && MB_BESIDE_END + 8 <= MB_LOG_BUF);

/// Every constant above, by name, for generating the guest header.
pub const ALL: &[(&str, u64)] = &[
    ("PAGE_SIZE", PAGE_SIZE),
    ("DOORBELL_GPA", DOORBELL_GPA),
    ("DOORBELL_VALUE", DOORBELL_VALUE),
    ("MAX_VCPUS", MAX_VCPUS),
    ("MAILBOX_SIZE", MAILBOX_SIZE),
    ("HC_READY", HC_READY),
    ("HC_RESULT", HC_RESULT),
    ("HC_LOG", HC_LOG),
    ("HC_FAIL", HC_FAIL),
    ("HC_DONE", HC_DONE),
    ("CMD_CALL", CMD_CALL),
    ("CMD_EXIT", CMD_EXIT),
    ("CMD_BATCH", CMD_BATCH),
    ("CMD_SEALED", CMD_SEALED),
    ("TABLE_ALIAS", TABLE_ALIAS),
    ("TABLE_SELFTEST", TABLE_SELFTEST),
    ("TABLE_BESIDE", TABLE_BESIDE),
    ("FAIL_EXCEPTION", FAIL_EXCEPTION),
    ("FAIL_EXC_EL2", FAIL_EXC_EL2),
    ("FAIL_BAD_COMMAND", FAIL_BAD_COMMAND),
    ("CMDF_RET_A0", CMDF_RET_A0),
    ("BREACH_CALLEE_SAVED", BREACH_CALLEE_SAVED),
    ("BREACH_STACK", BREACH_STACK),
    ("BREACH_FLAGS", BREACH_FLAGS),
    ("BREACH_RETURN", BREACH_RETURN),
    ("BREACH_FAULT", BREACH_FAULT),
    ("CANARIES", CANARIES),
    ("MB_MAGIC", MB_MAGIC),
    ("MAILBOX_MAGIC", MAILBOX_MAGIC),
    ("MB_VCPU", MB_VCPU),
    ("MB_CMD_ID", MB_CMD_ID),
    ("MB_CMD_OP", MB_CMD_OP),
    ("MB_CMD_TABLE", MB_CMD_TABLE),
    ("MB_CMD_INDEX", MB_CMD_INDEX),
    ("MB_CMD_A0", MB_CMD_A0),
    ("MB_CMD_A0_STEP", MB_CMD_A0_STEP),
    ("MB_CMD_A1", MB_CMD_A1),
    ("MB_CMD_A1_STEP", MB_CMD_A1_STEP),
    ("MB_CMD_A2", MB_CMD_A2),
    ("MB_CMD_COUNT", MB_CMD_COUNT),
    ("MB_BATCH_N", MB_BATCH_N),
    ("MB_BATCH_CUR", MB_BATCH_CUR),
    ("MB_CMD_FLAGS", MB_CMD_FLAGS),
    ("MB_SLOTS", MB_SLOTS),
    ("SLOT_SIZE", SLOT_SIZE),
    ("BATCH_SLOTS", BATCH_SLOTS),
    ("SLOT_COUNT", SLOT_COUNT),
    ("SLOT_T0", SLOT_T0),
    ("SLOT_T1", SLOT_T1),
    ("SLOT_RET", SLOT_RET),
    ("SLOT_FLAGS", SLOT_FLAGS),
    ("SLOT_BREACH", SLOT_BREACH),
    ("SLOT_BREACH_GOT", SLOT_BREACH_GOT),
    ("SLOT_BREACH_WANT", SLOT_BREACH_WANT),
    ("MB_RES_ID", MB_RES_ID),
    ("MB_RES_T0", MB_RES_T0),
    ("MB_RES_T1", MB_RES_T1),
    ("MB_RES_RET", MB_RES_RET),
    ("MB_RES_BREACH", MB_RES_BREACH),
    ("MB_RES_BREACH_GOT", MB_RES_BREACH_GOT),
    ("MB_RES_BREACH_WANT", MB_RES_BREACH_WANT),
    ("MB_FAIL_CODE", MB_FAIL_CODE),
    ("MB_FAIL_D0", MB_FAIL_D0),
    ("MB_FAIL_D1", MB_FAIL_D1),
    ("MB_FAIL_D2", MB_FAIL_D2),
    ("MB_FAIL_D3", MB_FAIL_D3),
    ("MB_FAIL_D4", MB_FAIL_D4),
    ("MB_FAIL_D5", MB_FAIL_D5),
    ("MB_LOG_LEN", MB_LOG_LEN),
    ("MB_LOG_BUF", MB_LOG_BUF),
    ("MB_CANARIES", MB_CANARIES),
    ("MB_RUN_ROUTINE", MB_RUN_ROUTINE),
    ("MB_RUN_A0", MB_RUN_A0),
    ("MB_RUN_A1", MB_RUN_A1),
    ("MB_RUN_LEFT", MB_RUN_LEFT),
    ("MB_RUN_DONE", MB_RUN_DONE),
    ("MB_RUN_SP", MB_RUN_SP),
    ("MB_RUN_T0", MB_RUN_T0),
    ("MB_RUN_LR", MB_RUN_LR),
    ("MB_HOLE", MB_HOLE),
    ("MB_BESIDE_START", MB_BESIDE_START),
    ("MB_BESIDE_END", MB_BESIDE_END),
    ("LOG_BUF_SIZE", LOG_BUF_SIZE),
];
