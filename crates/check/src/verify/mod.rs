//! `hypclear run` and `verify`, shaped like bench's run: a [`Plan`] in
//! (the sides, the filter, how a VM boots), a [`Report`] out (the
//! outcome, each side's banner, an error that cut it short), and a
//! checkpoint callback that gets the JSON document ([`Doc`]) while checks
//! complete. The binary turns arguments into the plan, prints the report
//! and writes the files.
mod doc;
mod outcome;
mod plan;
mod run;

pub use doc::{Doc, Summary};
pub use outcome::{Outcome, Report};
pub use plan::{Admitted, Boot, Plan, check_filter};
pub use run::{Bars, Checkpoint, run};
