//! The process edge: exit statuses and failure categories, signals,
//! the watchdog, checked stdout/stderr and atomic result files. Depends on
//! no other hypclear crate.
pub mod exit;
pub mod files;
pub mod interrupt;
pub mod output;
pub mod watchdog;
