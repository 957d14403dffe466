//! hypclear binary: the CLI edge. Errors become a message and an exit
//! status (0 pass, 1 failure, 2 usage/environment).
#![warn(clippy::undocumented_unsafe_blocks)]

use std::time::Instant;

fn main() {
    // SIGPIPE stays ignored (the runtime's default): a closed stdout is an
    // EPIPE that `output` turns into a quiet stop and exit 141, after the
    // results are written, not a kill that loses them.
    let start = Instant::now();
    let cli = hypclear::cli::Cli::parse_args();
    let code = match hypclear::cmd::main(cli, start) {
        Ok(code) => code,
        Err(e) => {
            let code = e.exit_code();
            hypclear::errln!("hypclear: error: {}", message(anyhow::Error::from(e)));
            code
        }
    };
    std::process::exit(hypclear::output::exit_status(code));
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
    msg
}
