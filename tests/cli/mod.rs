//! The command line: exit codes, error messages, output formats.

mod diagnose;
mod eval;
mod golden;
mod inputs;
mod postmortem;
mod readme;
mod rules;
