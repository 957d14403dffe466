//! hypclear binary: the CLI edge. Errors become a message and an exit
//! status (0 pass, 1 failure, 2 usage/environment).
#![warn(clippy::undocumented_unsafe_blocks)]

use std::time::Instant;

fn main() {
    // Output to a closed pipe (`hypclear ... | head -1`) ends the process
    // quietly, as for any Unix filter, instead of panicking in println!.
    // SAFETY: called first in main, before any other thread exists;
    // SIG_DFL is a valid disposition for SIGPIPE.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let start = Instant::now();
    // A head start on the first VM, on the other CPU, while clap parses.
    if hypclear::cli::Cli::may_boot_vm(std::env::args_os().skip(1)) {
        hypclear::vmm::prewarm::start();
    }
    let cli = hypclear::cli::Cli::parse_args();
    match hypclear::cmd::main(cli, start) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            let code = e.exit_code();
            use std::io::Write;
            // A full or closed stderr must not turn the error into a panic.
            let _ = writeln!(
                std::io::stderr(),
                "hypclear: error: {:#}",
                anyhow::Error::from(e)
            );
            std::process::exit(code);
        }
    }
}
