//! Playbooks: parse (spec), validate and compile (compile, graph) into the compiled form
//! (compiled).
//!
//! `PlaybookFile` is the YAML as written; `Playbook` is the validated, compiled form the evaluator
//! walks: every name resolved to an index, every condition compiled, the diagnosis graph checked
//! to be acyclic and complete. Evaluation never meets a string it has to look up.

mod compile;
mod compiled;
mod graph;
pub mod spec;

pub use compile::load;
pub use compiled::{
    Cause, Evidence, LoadError, LoadErrorKind, LoadErrors, Playbook, Remediation, Slo, Source,
    Symptom,
};
