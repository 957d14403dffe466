//! `hypclear run` (also `hypclear` alone): the whole verification suite in
//! both link configurations.
use super::verify;
use crate::blob::Side;
use crate::cli::{Common, VerifyArgs};
use crate::error::Result;
use std::time::Instant;

pub fn run(common: &Common, start: Instant, sides: Vec<Side>) -> Result<i32> {
    verify::verify(common, &VerifyArgs::default(), start, "run", sides)
}
