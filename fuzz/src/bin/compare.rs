//! `compare`'s input: one to three bench JSON files split at NUL.
fn main() {
    afl::fuzz!(|data: &[u8]| hypclear_bench::fuzz::compare_input(data));
}
