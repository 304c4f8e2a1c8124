//! What a subcommand produced. Its own file so that every subcommand can name it without
//! importing `cli/mod.rs`, which names the subcommands (an import loop `tests/layout.rs` refuses).

/// What a command produced; `main` prints it and exits with its code. Errors (bad input, bad
/// flags) are not outcomes: they become exit code 2 there.
#[derive(Debug)]
pub struct Outcome {
    /// Text for stdout.
    pub stdout: String,
    /// Exit code: 0 healthy or success, 1 problems found or tests failed.
    pub code: u8,
}
