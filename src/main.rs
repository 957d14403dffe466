//! hypclear binary: the CLI edge. Errors become a message and an exit
//! status (0 pass, 1 failure, 2 usage/environment).
#![warn(clippy::undocumented_unsafe_blocks)]

use clap::Parser;
use std::time::Instant;

fn main() {
    let start = Instant::now();
    let cli = hypclear::cli::Cli::parse();
    match hypclear::cmd::main(cli, start) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            let code = e.exit_code();
            eprintln!("hypclear: error: {:#}", anyhow::Error::from(e));
            std::process::exit(code);
        }
    }
}
