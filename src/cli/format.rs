//! The output formats the subcommands share. Its own file, like `outcome.rs`, so that
//! subcommands name it without importing `cli/mod.rs`.

use clap::ValueEnum;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A table for the terminal.
    Table,
    /// The JSON output contract.
    Json,
    /// Markdown, for tickets and postmortems.
    Markdown,
}
