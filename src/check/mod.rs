//! Verification: seeded patterns and the checker, the suite of checks run
//! in a VM, and the selftest that proves the checker catches broken routines.
pub mod checker;
pub mod selftest;
pub mod suite;
