//! From raw series to canonical signals: the series themselves, the window math over them, the
//! adapters that map an engine's metric names onto the engine-neutral signals, their PromQL
//! form, target selectors and the facts read from an engine's command line.

pub mod adapter;
pub mod engine_args;
pub mod promql;
pub mod samples;
pub mod selector;
pub mod series;
pub mod window;
