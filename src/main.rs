//! hypclear binary: the CLI edge. Errors become a message and an exit
//! status (0 pass, 1 failure, 2 usage/environment).
mod bench_lines;
mod cli;
mod cmd;
mod error;
mod progress;

// The crates below, under the names the modules use.
use hypclear_arch as arch;
use hypclear_bench as bench;
use hypclear_check as check;
use hypclear_check::report;
use hypclear_format::{ktap, table, text, units};
use hypclear_kernel as kernel;
use hypclear_process::exit::Failure as _;
use hypclear_process::{errln, files, interrupt, out, outln, output};
use hypclear_routines as routines;
use hypclear_vmm as vmm;
use hypclear_vmm::blob;

use std::time::Instant;

fn main() {
    // SIGPIPE stays ignored (the runtime's default): a closed stdout is an
    // EPIPE that `output` turns into a quiet stop and exit 141, after the
    // results are written, not a kill that loses them.
    let start = Instant::now();
    let cli = cli::Cli::parse_args();
    let code = match cmd::main(cli, start) {
        Ok(code) => code,
        Err(e) => {
            let code = e.exit_code();
            errln!("hypclear: error: {}", message(anyhow::Error::from(e)));
            code
        }
    };
    std::process::exit(output::exit_status(code));
}

/// The error and its causes, each said once: many messages already end
/// with their cause's text ("{path}: {source}"), which `{:#}` repeated.
fn message(e: anyhow::Error) -> String {
    let mut msg = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !msg.contains(&c) {
            msg.push_str(": ");
            msg.push_str(&c);
        }
    }
    // Messages quote paths and file or tree text: shown safe, line by line
    // (a message may span lines; a line inside it cannot forge another).
    msg.split('\n')
        .map(|l| text::sanitize_str(l).into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}
