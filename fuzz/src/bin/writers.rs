//! The KTAP and rst (markdown, text) writers.
fn main() {
    afl::fuzz!(|data: &[u8]| hypclear_bench::fuzz::writers(data));
}
