//! The pure diagnosis engine of llm-doctor.
//!
//! It knows canonical signals and facts (the catalog), a small three-valued condition language,
//! playbooks compiled into a diagnosis graph, and how to evaluate and rank causes. It does no I/O,
//! reads no clock and prints nothing: the binary's sources and adapters build snapshots, and its
//! renderers print the diagnosis this crate returns.
#![warn(missing_docs)]

pub mod catalog;
pub mod condition;
pub mod evaluate;
pub mod playbook;
pub mod report;
pub mod snapshot;
pub mod suggest;
pub mod yaml_guard;

pub use catalog::Catalog;
pub use evaluate::diagnose;
pub use playbook::{load, Playbook, Source};
pub use report::{Diagnosis, Status};
pub use snapshot::{FactValue, SignalValue, Snapshot, Target, Window};
