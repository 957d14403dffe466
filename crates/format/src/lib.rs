//! The text formats hypclear writes: perf-bench-style sizes and rates,
//! KTAP version 1, the tables' cell helpers, and the one sanitizer of
//! foreign text. Depends on no other hypclear crate.
pub mod ktap;
pub mod table;
pub mod text;
pub mod units;
