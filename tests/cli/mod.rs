//! The command line: exit codes, error messages, output formats.

mod diagnose;
mod inputs;
mod rules;
