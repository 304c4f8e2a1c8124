//! llm-doctor's binary-side library: sources, adapters, renderers and the CLI.
//! The pure diagnosis lives in the `llm-doctor-engine` crate; this crate feeds it.
//!
//! The tree is the data path (see ARCHITECTURE.md): `source` reads metrics into raw series,
//! `signal` holds the series and turns them into canonical signals (adapters, window math),
//! `target` splits them into the services they describe, `pipeline` makes one engine snapshot
//! per target, the engine diagnoses it, and `report` renders the diagnosis. `cli`, `serve`,
//! `score` and `export` sit on top. Imports run one way, down this list.

pub mod cli;
pub mod export;
pub mod fuzzing;
pub mod http;
pub mod log;
pub mod parallel;
pub mod pipeline;
pub mod postmortem;
pub mod prepared;
pub mod report;
pub mod rules;
pub mod score;
pub mod serve;
pub mod signal;
pub mod source;
pub mod target;
pub mod time;
pub mod traffic;
pub mod verdict;
