//! The guest protocol: a session of exits and mailbox writes.
fn main() {
    afl::fuzz!(|data: &[u8]| hypclear_vmm::fuzz::protocol_session(data));
}
