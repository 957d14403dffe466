//! The text formats hypclear writes: perf-bench-style sizes and rates,
//! KTAP version 1, and the tables' cell helpers. Depends on no other
//! hypclear crate.
pub mod ktap;
pub mod table;
pub mod units;
