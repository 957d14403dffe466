//! The progress bars on stderr: drawn only on a terminal (not for
//! `TERM=dumb` or `HYPCLEAR_PROGRESS=0`, e.g. a serial console that is
//! logged).

/// Whether progress bars are drawn: on a terminal, unless `TERM=dumb` or
/// `HYPCLEAR_PROGRESS=0`.
fn shown() -> bool {
    use std::io::IsTerminal;
    let off = std::env::var("HYPCLEAR_PROGRESS").is_ok_and(|v| v == "0")
        || std::env::var("TERM").is_ok_and(|t| t == "dumb");
    !off && std::io::stderr().is_terminal()
}

/// A group of progress bars (one per concurrent VM), drawing nothing where
/// [`bar`] would draw nothing: a bar added to a group draws through
/// the group's target, not its own.
pub(crate) fn group() -> indicatif::MultiProgress {
    if shown() {
        indicatif::MultiProgress::new()
    } else {
        indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden())
    }
}

/// A progress bar on stderr, only on a terminal (not for `TERM=dumb` or
/// `HYPCLEAR_PROGRESS=0`, e.g. a serial console that is logged).
pub(crate) fn bar(len: u64) -> indicatif::ProgressBar {
    if !shown() {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::new(len);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{prefix} [{bar:40}] {pos}/{len} checks {elapsed}")
    {
        pb.set_style(style.progress_chars("=> "));
    }
    pb
}
