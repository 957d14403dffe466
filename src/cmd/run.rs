//! `hypclear run` (also `hypclear` alone): the whole verification suite in
//! both link configurations.
use super::verify;
use crate::cli::{Common, RunArgs, VerifyArgs};
use crate::error::Result;
use crate::kernel::Side;
use std::time::Instant;

pub(super) fn run(
    common: &Common,
    args: &RunArgs,
    start: Instant,
    sides: Vec<Side>,
) -> Result<i32> {
    let args = VerifyArgs {
        run: args.clone(),
        ..VerifyArgs::default()
    };
    verify::verify(common, &args, start, "run", sides)
}
