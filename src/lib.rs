//! llm-doctor's binary-side library: sources, adapters, renderers and the CLI.
//! The pure diagnosis lives in the `llm-doctor-engine` crate; this crate feeds it.
//!
//! Data flows one way: exposition files are parsed into raw series (`exposition`, `series`),
//! split into targets (`targets`), turned into canonical signals and facts by the adapters
//! (`adapter`, `window`, `engine_args`, `pipeline`), diagnosed by the engine, and rendered
//! (`render`).

pub mod adapter;
pub mod alert_rules;
pub mod api_json;
pub mod cli;
pub mod commands;
pub mod engine_args;
pub mod eval;
pub mod exposition;
pub mod fixtures;
pub mod live;
pub mod nvml;
pub mod openmetrics;
pub mod pipeline;
pub mod promql;
pub mod render;
pub mod rules;
pub mod scrape;
pub mod selector;
pub mod series;
pub mod serve;
pub mod snapshot_file;
pub mod targets;
pub mod window;
