//! Playbooks: parse (spec), validate and compile (compile, graph).
//!
//! `PlaybookFile` is the YAML as written; `Playbook` is the validated, compiled form the evaluator
//! walks: every name resolved to an index, every condition compiled, the diagnosis graph checked
//! to be acyclic and complete. Evaluation never meets a string it has to look up.

mod compile;
mod graph;
pub mod spec;

pub use compile::{
    load, Cause, Evidence, LoadError, LoadErrorKind, LoadErrors, Playbook, Remediation, Slo,
    Source, Symptom,
};
