//! The road from inputs to verdicts, one way down, shared by every entry point: [`gather`] what
//! the user named (files and standard input, scrapes, a Prometheus API, the local GPUs) into
//! prepared targets, then [`judge`] each. `cli` and `serve` parse their arguments, call these,
//! and render; `postmortem` and `diff` read a recording over a range through [`range`].
//!
//! ```text
//! input ─> gather ─> (source, pipeline) ─> Prepared ─> judge ─> (engine) ─> TargetReport ─> report
//! ```

pub mod gather;
pub mod head_of_line;
pub mod input;
pub mod judge;
pub mod range;
pub mod requests;
pub mod symptom_promql;
pub mod top_down;

pub use gather::{gather, window_ms, Gathered, Sources};
pub use judge::{judge, judge_all};
