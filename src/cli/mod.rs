//! The command line: clap types, one file per subcommand (its arguments and its work), and the
//! dispatch. Flags are parsed into typed values by clap (`parse.rs`), so a subcommand starts
//! from durations, times and pairs, never from text it must check. Every subcommand returns an
//! [`Outcome`]; `main` prints it and maps errors to exit code 2.
//!
//! Imports run one way inside this folder: `mod.rs` names the subcommands; they name
//! `outcome.rs`, `format.rs`, `parse.rs` and `sources.rs` (what `diagnose` and `record` share),
//! never `mod.rs`.

mod diagnose;
mod eval;
mod format;
mod outcome;
mod parse;
mod postmortem;
mod record;
mod rules;
mod serve;
mod signals;
mod sources;

use anyhow::Result;
use clap::{Parser, Subcommand};

pub use diagnose::DiagnoseArgs;
pub use eval::EvalArgs;
pub use format::Format;
pub use outcome::Outcome;
pub use postmortem::{DiffArgs, PostmortemArgs, RangeInputArgs, ReportFormat};
pub use record::RecordArgs;
pub use rules::{ExportFormat, GraphFormat, RulesCommand};
pub use serve::ServeArgs;
pub use sources::{NvmlSamplingArgs, PrometheusArgs};

/// Diagnoses LLM inference services from their metrics: ranked root causes, evidence, fixes.
#[derive(Debug, Parser)]
#[command(name = "llm-doctor", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
// Built once per process: boxing the large variant would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum Command {
    /// Diagnose a replica or a fleet: from recorded metrics, live /metrics endpoints, a
    /// Prometheus-compatible API or the local GPUs.
    Diagnose(DiagnoseArgs),
    /// Check, test and explain playbooks.
    #[command(subcommand)]
    Rules(RulesCommand),
    /// Record /metrics endpoints to an OpenMetrics file for later diagnosis or Prometheus import.
    Record(RecordArgs),
    /// Receive Alertmanager webhooks, diagnose each firing alert and hand it on with its diagnosis.
    Serve(ServeArgs),
    /// Walk an incident through time: episodes, what moved first, the causes that held, and a
    /// report (text, Markdown, HTML with charts, JSON), from recordings or Prometheus history.
    Postmortem(PostmortemArgs),
    /// What changed: a good window against a bad one, signals ranked by how far they moved.
    Diff(DiffArgs),
    /// Score the diagnosis on a corpus of labelled runs (see corpus/README.md).
    Eval(EvalArgs),
    /// Print a shell completion script: `llm-doctor completions bash > /etc/bash_completion.d/llm-doctor`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// List the canonical signals and facts.
    Signals {
        /// Output format (table, json or markdown).
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> Result<Outcome> {
    match cli.command {
        Command::Diagnose(args) => diagnose::run(args),
        Command::Rules(cmd) => rules::run(cmd),
        Command::Record(args) => record::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Signals { format } => signals::run(format),
        Command::Eval(args) => eval::run(args),
        Command::Postmortem(args) => postmortem::run(args),
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(
                shell,
                &mut <Cli as clap::CommandFactory>::command(),
                "llm-doctor",
                &mut script,
            );
            Ok(Outcome {
                stdout: String::from_utf8_lossy(&script).into_owned(),
                code: 0,
            })
        }
        Command::Diff(args) => postmortem::run_diff(args),
    }
}
